/**
 * The database side of content checks on demand (./content-demand.ts) on the tables of
 * migration 0032: `content_check_demand` (one claim per mirror and file: deduplication across
 * replicas and the per-copy cooldown) and `content_check_demand_run` (the per-mirror hourly
 * budget). PostgreSQL syntax, also PGlite.
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import type {ContentDemandStore} from './content-demand.js'

/** Runs older than this are pruned: the budget looks back one hour. */
const RUN_RETENTION = '1 day'

/** The {@link ContentDemandStore} on `db`. */
export function sqlContentDemandStore(db: Kysely<DB>): ContentDemandStore {
  return {
    async claim(mirrorId, path, cooldownSeconds) {
      // Concurrent claims of one copy serialise on its row; the loser sees the winner's claimed_at and gets no row.
      const taken = await sql<{file_id: number}>`
        INSERT INTO content_check_demand (mirror_id, file_id, claimed_at)
        SELECT ${mirrorId}::smallint, f.id, now() FROM file f WHERE f.path = ${path}
        ON CONFLICT (mirror_id, file_id) DO UPDATE SET claimed_at = now()
        WHERE content_check_demand.claimed_at <= now() - make_interval(secs => ${cooldownSeconds}::float8)
        RETURNING file_id`.execute(db)
      return taken.rows.length > 0
    },
    async spend(mirrorId, path, budget) {
      await sql`DELETE FROM content_check_demand_run WHERE mirror_id = ${mirrorId}::smallint AND started_at < now() - ${RUN_RETENTION}::interval`.execute(db)
      const spent = await sql<{id: string | number}>`
        INSERT INTO content_check_demand_run (mirror_id, file_id)
        SELECT ${mirrorId}::smallint, f.id FROM file f
        WHERE f.path = ${path}
          AND (SELECT count(*) FROM content_check_demand_run WHERE mirror_id = ${mirrorId}::smallint AND started_at > now() - interval '1 hour') < ${budget}
        RETURNING id`.execute(db)
      return spent.rows.length > 0
    },
  }
}
