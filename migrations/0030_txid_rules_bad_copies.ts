/**
 * `redirect_rule` and `mirror_file_bad` carry the writing transaction's id, as `mirror`, `file`
 * and `file_link` do (docs/change-tracking.md): `txid` from the column default on insert and
 * from the `BEFORE UPDATE` triggers `redirect_rule_touch` and `mirror_file_bad_touch`
 * (`mb_touch()`) on update. With the row counts they let one cheap statement tell a snapshot
 * keeper whether anything it holds changed, so that an idle poll re-reads no table
 * (src/lib/serve/snapshot/marks.ts). Writes of `mirror_file_bad` now send `NOTIFY mb_change`
 * too (payload `mirror_file_bad`, statement trigger `mirror_file_bad_notify`): a replica
 * that listens learns of a corrupt copy found or cleared at once, whatever its poll interval.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['redirect_rule', 'mirror_file_bad']) {
    await sql`ALTER TABLE ${sql.id(table)} ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id()`.execute(db)
    await sql`CREATE TRIGGER ${sql.id(`${table}_touch`)} BEFORE UPDATE ON ${sql.id(table)} FOR EACH ROW EXECUTE FUNCTION mb_touch()`.execute(db)
  }
  await sql`CREATE TRIGGER mirror_file_bad_notify AFTER INSERT OR UPDATE OR DELETE ON mirror_file_bad FOR EACH STATEMENT EXECUTE FUNCTION mb_notify_change()`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS mirror_file_bad_notify ON mirror_file_bad`.execute(db)
  for (const table of ['redirect_rule', 'mirror_file_bad']) {
    await sql`DROP TRIGGER IF EXISTS ${sql.id(`${table}_touch`)} ON ${sql.id(table)}`.execute(db)
    await sql`ALTER TABLE ${sql.id(table)} DROP COLUMN IF EXISTS txid`.execute(db)
  }
}
