/**
 * Download statistics as aggregates, never one row per request.
 *
 * - `stats_daily`: one row per UTC day x path x mirror x client country. `mirror_id` 0 is
 *   the origin (local delivery, and every non-redirect request); `country` is the ISO
 *   3166-1 alpha-2 code of the client, or `--` when unknown. `downloads` counts GETs
 *   answered by a redirect or by local delivery (not Range continuations); `bytes` is what
 *   those answers delivered (the origin's bytes sent, or the file size for a redirect);
 *   `other_requests` counts HEADs, metalinks, hashes, mirror lists, 304s and continuations.
 * - `stats_monthly`: the same shape by month (`month` = the first day of the month), filled
 *   by `mb stats prune` from daily rows older than the retention policy.
 *
 * `mirror_id` has no foreign key on purpose: statistics outlive a deleted mirror.
 * Flushes from several `mb serve` replicas add up through `INSERT … ON CONFLICT DO UPDATE`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE stats_daily (
      day date NOT NULL,
      path text NOT NULL,
      mirror_id smallint NOT NULL DEFAULT 0,
      country char(2) NOT NULL DEFAULT '--',
      downloads bigint NOT NULL DEFAULT 0,
      bytes bigint NOT NULL DEFAULT 0,
      other_requests bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (day, path, mirror_id, country)
    )`.execute(db)
  await sql`
    CREATE TABLE stats_monthly (
      month date NOT NULL CHECK (extract(day FROM month) = 1),
      path text NOT NULL,
      mirror_id smallint NOT NULL DEFAULT 0,
      country char(2) NOT NULL DEFAULT '--',
      downloads bigint NOT NULL DEFAULT 0,
      bytes bigint NOT NULL DEFAULT 0,
      other_requests bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (month, path, mirror_id, country)
    )`.execute(db)
  await sql`CREATE INDEX stats_daily_path ON stats_daily (path text_pattern_ops)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS stats_monthly`.execute(db)
  await sql`DROP TABLE IF EXISTS stats_daily`.execute(db)
}
