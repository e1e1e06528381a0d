/**
 * Two mirror columns for "one bad mirror never fails a download" (docs/selection.md):
 *
 * - `mirror.range_ok`: whether the mirror honours `Range` (RFC 9110 §14), as probing learns
 *   it: the probe's request carries `Range: bytes=0-0`, and a `206` says yes, a `200` with the
 *   whole file says no. Null until a probe of a file has answered. A request carrying `Range`
 *   is not sent to a mirror with `range_ok = false` (reason `no_range`).
 * - `mirror.url_changed_at`: when `mb mirror edit --http-url/--https-url` changed a base URL.
 *   While it is set the mirror is out of selection (reason `url_changed`, "URL changed,
 *   awaiting scan"): what the old URL held says nothing about the new one. The next
 *   successful scan of the mirror clears it. Null = no change waiting.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN range_ok boolean, ADD COLUMN url_changed_at timestamptz`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN range_ok, DROP COLUMN url_changed_at`.execute(db)
}
