/**
 * `file_touch` fires only for a row that changed and whose `txid` the statement has not already
 * set to the current transaction's, so bulk updates that stamp it themselves skip the trigger:
 * rule 2 of docs/change-tracking.md.
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
