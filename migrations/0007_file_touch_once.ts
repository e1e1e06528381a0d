/**
 * Bulk updates that set `txid` themselves (the scan reconciler adding or removing a mirror in
 * a million file rows) skip the row trigger: it fires only when the row changed and its txid
 * is not already the current transaction's. Cuts about a third off a first scan's update.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER file_touch ON file`.execute(db)
  await sql`CREATE TRIGGER file_touch BEFORE UPDATE ON file FOR EACH ROW
    WHEN (NEW.txid IS DISTINCT FROM pg_current_xact_id() AND OLD.* IS DISTINCT FROM NEW.*)
    EXECUTE FUNCTION mb_touch()`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER file_touch ON file`.execute(db)
  await sql`CREATE TRIGGER file_touch BEFORE UPDATE ON file FOR EACH ROW WHEN (OLD.* IS DISTINCT FROM NEW.*) EXECUTE FUNCTION mb_touch()`.execute(db)
}
