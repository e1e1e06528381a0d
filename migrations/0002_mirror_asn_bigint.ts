/**
 * 4-byte AS numbers (RFC 6793) run up to 4294967295, past PostgreSQL's `integer`.
 * Widen `mirror.asn` to bigint and enforce the valid range 1..4294967295.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ALTER COLUMN asn TYPE bigint`.execute(db)
  await sql`ALTER TABLE mirror ADD CONSTRAINT mirror_asn_range CHECK (asn BETWEEN 1 AND 4294967295)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP CONSTRAINT IF EXISTS mirror_asn_range`.execute(db)
  await sql`ALTER TABLE mirror ALTER COLUMN asn TYPE integer`.execute(db)
}
