/**
 * `stats_origin`: what the origin delivered itself, per UTC day x meter reason (the fixed set
 * of src/lib/stats/origin.ts: no_mirror, origin_only, index_stale, small_file, fallback, rule,
 * local_network, other): requests answered with a file (200, 206 or 304) and body bytes sent,
 * added up by `mb serve`'s flushes. `mb stats origin` sets them against the day's downloads.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE stats_origin (
      day date NOT NULL,
      reason text NOT NULL,
      requests bigint NOT NULL DEFAULT 0,
      bytes bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (day, reason)
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE stats_origin`.execute(db)
}
