/**
 * The database side of scans on demand (./demand.ts) on the tables of migration 0025:
 * `demand_scan` (one claim per folder: deduplication across replicas and the per-folder
 * cooldown), `demand_scan_run` (the per-mirror hourly budget) and `demand_scan_daily` (what
 * `mb stats` reports). PostgreSQL syntax, also PGlite.
 */
import {type Kysely, sql} from 'kysely'
import type {DB, MirrorRow} from '../db/schema.js'
import type {DemandStore, DemandTicket} from './demand.js'

/** Runs older than this are pruned: the budget looks back one hour. */
const RUN_RETENTION = '1 day'

/** The {@link DemandStore} on `db`. */
export function sqlDemandStore(db: Kysely<DB>): DemandStore {
  return {
    async claim(folder, cooldownSeconds) {
      // Concurrent claims of one folder serialise on its row; the loser sees the winner's claimed_at and gets no row.
      const taken = await sql<{folder: string}>`
        INSERT INTO demand_scan (folder, claimed_at) VALUES (${folder}, now())
        ON CONFLICT (folder) DO UPDATE SET claimed_at = now(), finished_at = NULL
        WHERE demand_scan.claimed_at <= now() - make_interval(secs => ${cooldownSeconds}::float8)
        RETURNING folder`.execute(db)
      return taken.rows.length > 0
    },
    async release(folder, cooldownSeconds, retrySeconds) {
      await sql`UPDATE demand_scan SET claimed_at = now() - make_interval(secs => ${cooldownSeconds - retrySeconds}::float8), finished_at = now() WHERE folder = ${folder}`.execute(db)
    },
    async candidates(_folder, paths, useTraces) {
      const rows = await sql<MirrorRow>`
        SELECT m.* FROM mirror m
        WHERE m.enabled AND (m.rsync_url IS NOT NULL OR m.ftp_url IS NOT NULL OR m.http_url IS NOT NULL OR m.https_url IS NOT NULL)
          AND EXISTS (SELECT 1 FROM file f WHERE f.path = ANY(${[...paths]}::text[]) AND NOT (m.id = ANY(f.mirrors))
            ${useTraces ? sql`AND (m.synced_at IS NULL OR m.synced_at > f.indexed_at)` : sql``})
        ORDER BY m.id`.execute(db)
      return rows.rows
    },
    async spend(mirrorId, folder, budget) {
      const spent = await sql<{id: string | number}>`
        INSERT INTO demand_scan_run (mirror_id, folder)
        SELECT ${mirrorId}::smallint, ${folder}
        WHERE (SELECT count(*) FROM demand_scan_run WHERE mirror_id = ${mirrorId}::smallint AND started_at > now() - interval '1 hour') < ${budget}
        RETURNING id`.execute(db)
      const row = spent.rows[0]
      return row === undefined ? undefined : {id: Number(row.id), mirrorId}
    },
    async refund(ticket: DemandTicket) {
      await sql`DELETE FROM demand_scan_run WHERE id = ${ticket.id}::bigint`.execute(db)
    },
    async changedSince(paths, seconds) {
      const {rows} = await sql<{recent: boolean}>`
        SELECT EXISTS (SELECT 1 FROM file WHERE path = ANY(${[...paths]}::text[]) AND indexed_at > now() - make_interval(secs => ${seconds}::float8)) AS recent`.execute(db)
      return rows[0]?.recent === true
    },
    async finishRun(ticket: DemandTicket, ok, found) {
      await sql`UPDATE demand_scan_run SET ok = ${ok}, found = ${found}::int WHERE id = ${ticket.id}::bigint`.execute(db)
    },
    async finishFolder(folder, run) {
      await db.transaction().execute(async (trx) => {
        await sql`UPDATE demand_scan SET finished_at = now(), mirrors = ${run.mirrors}::int, found = ${run.found}::int WHERE folder = ${folder}`.execute(trx)
        await sql`
          INSERT INTO demand_scan_daily (day, folder_scans, mirror_scans, failed, found)
          VALUES ((now() AT TIME ZONE 'UTC')::date, 1, ${run.mirrors}::int, ${run.failed}::int, ${run.found}::int)
          ON CONFLICT (day) DO UPDATE SET folder_scans = demand_scan_daily.folder_scans + 1,
            mirror_scans = demand_scan_daily.mirror_scans + excluded.mirror_scans,
            failed = demand_scan_daily.failed + excluded.failed, found = demand_scan_daily.found + excluded.found`.execute(trx)
        await sql`DELETE FROM demand_scan_run WHERE started_at < now() - ${RUN_RETENTION}::interval`.execute(trx)
      })
    },
  }
}

/** Scans on demand over a range of UTC days (`mb stats`). */
export interface DemandTotals {
  /** Folder runs that scanned at least one mirror. */
  folder_scans: number
  mirror_scans: number
  /** Mirror scans that failed (nothing changed for that mirror). */
  failed: number
  /** Copies the scans added to mirror sets. */
  files_found: number
}

/** The {@link DemandTotals} of the UTC days `since`..`until` (YYYY-MM-DD, inclusive; undefined = open). */
export async function demandTotals(db: Kysely<DB>, since?: string, until?: string): Promise<DemandTotals> {
  const rows = await sql<{folder_scans: string | number; mirror_scans: string | number; failed: string | number; found: string | number}>`
    SELECT coalesce(sum(folder_scans), 0)::bigint AS folder_scans, coalesce(sum(mirror_scans), 0)::bigint AS mirror_scans,
           coalesce(sum(failed), 0)::bigint AS failed, coalesce(sum(found), 0)::bigint AS found
    FROM demand_scan_daily
    WHERE ${since === undefined ? sql`true` : sql`day >= ${since}::date`} AND ${until === undefined ? sql`true` : sql`day <= ${until}::date`}`.execute(db)
  const r = rows.rows[0]
  return {folder_scans: Number(r.folder_scans), mirror_scans: Number(r.mirror_scans), failed: Number(r.failed), files_found: Number(r.found)}
}
