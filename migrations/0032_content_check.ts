/**
 * Whole-copy content checks (src/lib/probe/content.ts) and the checks client retries ask for
 * (src/lib/probe/content-demand.ts):
 *
 * - `mirror_file_check`: one row per mirror and file a content check read, about the origin
 *   version `size`/`mtime` (bytes, Unix seconds; a row of another version counts as never
 *   checked and is rewritten by the next check). `next_piece` is where the next check of the
 *   copy starts: pieces are read in order from 0, and when a pass reaches the last piece
 *   `whole_at` is set and the next pass starts at 0 again, so repeated rounds cover the whole
 *   copy. `checked_at` is the last check that read pieces (matching or not);
 *   `unchecked_at`/`unchecked_reason` the last one that could not judge the copy (a redirect
 *   loop, a short body, a body longer than the range, a 5xx...): such a check changes neither
 *   the cursor nor the copy's standing.
 * - `content_check_demand`: one row per mirror and file a client's retry asked to check;
 *   `claimed_at` deduplicates the replicas sharing the database (a claim succeeds only when
 *   the previous one is older than the cooldown), as `demand_scan` does for scans on demand.
 * - `content_check_demand_run`: one row per check run on demand, for the per-mirror bound
 *   (`probe.content_demand_mirror_budget` per hour); rows older than a day are pruned.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE mirror_file_check (
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      file_id integer NOT NULL REFERENCES file(id) ON DELETE CASCADE,
      size bigint NOT NULL,
      mtime bigint NOT NULL,
      next_piece integer NOT NULL DEFAULT 0,
      checked_at timestamptz,
      whole_at timestamptz,
      unchecked_at timestamptz,
      unchecked_reason text,
      PRIMARY KEY (mirror_id, file_id)
    )`.execute(db)
  await sql`CREATE INDEX mirror_file_check_file_idx ON mirror_file_check (file_id)`.execute(db)
  await sql`
    CREATE TABLE content_check_demand (
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      file_id integer NOT NULL REFERENCES file(id) ON DELETE CASCADE,
      claimed_at timestamptz NOT NULL,
      PRIMARY KEY (mirror_id, file_id)
    )`.execute(db)
  await sql`
    CREATE TABLE content_check_demand_run (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      file_id integer NOT NULL,
      started_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`CREATE INDEX content_check_demand_run_mirror_idx ON content_check_demand_run (mirror_id, started_at)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE content_check_demand_run`.execute(db)
  await sql`DROP TABLE content_check_demand`.execute(db)
  await sql`DROP TABLE mirror_file_check`.execute(db)
}
