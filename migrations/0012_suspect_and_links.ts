/**
 * Two additions:
 *
 * - `mirror.scan_refused_at`: when the mirror's last scan was refused by the safety check
 *   (`scan.min_ratio`: the listing matched far fewer files than before, as a wiped or
 *   truncated tree does). While it is set the mirror is *suspect* and selection passes it
 *   over with reason `scan_refused`; a successful scan or `mb mirror edit NAME --trust-scan`
 *   clears it. Null = not suspect.
 * - `file_link`: the symbolic links of the origin tree whose target lies inside the root, as
 *   `mb index` finds them: the link's path and its target's canonical path (both relative to
 *   the root, every symlink in the target resolved), and whether the target is a directory.
 *   `mb serve` serves a request through a link from the mirrors holding the target. The
 *   table is small (a few links per release tree); the snapshot re-reads it whole when a row
 *   is newer than its last view or the row count changed, so it needs no tombstones, only
 *   the `txid` stamp and the `NOTIFY mb_change` of docs/change-tracking.md.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN scan_refused_at timestamptz`.execute(db)
  await sql`
    CREATE TABLE file_link (
      path text COLLATE "C" PRIMARY KEY,
      target text COLLATE "C" NOT NULL,
      directory boolean NOT NULL,
      indexed_at timestamptz NOT NULL DEFAULT now(),
      txid xid8 NOT NULL DEFAULT pg_current_xact_id()
    )`.execute(db)
  await sql`CREATE TRIGGER file_link_touch BEFORE UPDATE ON file_link FOR EACH ROW EXECUTE FUNCTION mb_touch()`.execute(db)
  await sql`CREATE TRIGGER file_link_notify AFTER INSERT OR UPDATE OR DELETE ON file_link FOR EACH STATEMENT EXECUTE FUNCTION mb_notify_change()`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS file_link`.execute(db)
  await sql`ALTER TABLE mirror DROP COLUMN scan_refused_at`.execute(db)
}
