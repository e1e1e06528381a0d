/**
 * Scans on demand (src/lib/scan/demand.ts): `mb serve` scans one folder on the mirrors that
 * could hold a file no eligible mirror holds. Three tables, all written by the demand queue:
 *
 * - `demand_scan`: one row per folder ever scanned on demand (origin-relative, '' = the top).
 *   `claimed_at` is when a replica last took it; a claim succeeds only when the previous one
 *   is older than `scan.demand_cooldown_seconds`, which deduplicates the folder scans of
 *   replicas sharing the database and gives the per-folder cooldown. `finished_at`, `mirrors`
 *   (mirror scans run) and `found` (copies added) describe the last run.
 * - `demand_scan_run`: one row per mirror scanned on demand (`ok`, `found` copies added), for
 *   the per-mirror budget (`scan.demand_mirror_budget` per hour). Rows older than a day are
 *   pruned by the queue.
 * - `demand_scan_daily`: per UTC day, folder scans, mirror scans (failed ones apart) and copies
 *   found, for `mb stats`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE demand_scan (
      folder text COLLATE "C" PRIMARY KEY,
      claimed_at timestamptz NOT NULL,
      finished_at timestamptz,
      mirrors integer NOT NULL DEFAULT 0,
      found integer NOT NULL DEFAULT 0
    )`.execute(db)
  await sql`
    CREATE TABLE demand_scan_run (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      started_at timestamptz NOT NULL DEFAULT now(),
      folder text NOT NULL,
      ok boolean,
      found integer NOT NULL DEFAULT 0
    )`.execute(db)
  await sql`CREATE INDEX demand_scan_run_mirror_idx ON demand_scan_run (mirror_id, started_at)`.execute(db)
  await sql`
    CREATE TABLE demand_scan_daily (
      day date PRIMARY KEY,
      folder_scans integer NOT NULL DEFAULT 0,
      mirror_scans integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      found integer NOT NULL DEFAULT 0
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE demand_scan_daily`.execute(db)
  await sql`DROP TABLE demand_scan_run`.execute(db)
  await sql`DROP TABLE demand_scan`.execute(db)
}
