/**
 * `mirror.maintenance_until`: the end of a maintenance window set by the operator
 * (`mb mirror edit NAME --maintenance-until TIME`). While the clock is before it, selection
 * passes the mirror over with reason `maintenance`; null means no window.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN maintenance_until timestamptz`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN maintenance_until`.execute(db)
}
