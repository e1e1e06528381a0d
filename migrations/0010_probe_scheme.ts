/**
 * Probe health per scheme: `mirror.http_up` and `mirror.https_up` summarise the probe checks
 * of that scheme the way `mirror.up` summarises all of them (some IPv4 check up, or for an
 * IPv6-only host some IPv6 check up). Null means that scheme has not been probed (the mirror
 * has no URL for it, or no probe has run since it got one), so both null means the mirror
 * has never been probed. Selection sends a client only to a mirror whose scheme for that
 * client is not down (`scheme_down`), and `select.unprobed` decides about null
 * (`unprobed`).
 *
 * Existing rows are filled from the per protocol/family states the prober keeps in
 * `mirror.status -> checks` (`http/ipv4`, `https/ipv6`, ...).
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN http_up boolean, ADD COLUMN https_up boolean`.execute(db)
  await sql`
    UPDATE mirror SET
      http_up = coalesce((status -> 'checks' -> 'http/ipv4' ->> 'up')::boolean, (status -> 'checks' -> 'http/ipv6' ->> 'up')::boolean),
      https_up = coalesce((status -> 'checks' -> 'https/ipv4' ->> 'up')::boolean, (status -> 'checks' -> 'https/ipv6' ->> 'up')::boolean)
    WHERE status ? 'checks'`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN http_up, DROP COLUMN https_up`.execute(db)
}
