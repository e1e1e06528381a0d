/**
 * Trusting sync traces for new files (`select.trust_trace`; docs/operations.md, "Sync
 * traces"). A file first indexed, or changed, at origin time T (`file.indexed_at`) is taken
 * as held by a mirror whose trace (`mirror.synced_at`) is at least T + `sync.margin_seconds`,
 * provided that:
 *
 * - the mirror's last successful scan came before T (a file it could have listed, and did
 *   not, stays out), and the file lies in what the mirror carries (`base_path`, its include
 *   and exclude globs);
 * - the mirror is not partial for the file's folder: its scans saw that folder with another
 *   file it holds (by scan, not itself by trace);
 * - no content check found its copy of that version corrupt, and no scan saw it differ.
 *
 * Such a copy joins the file's mirror set and is recorded in `mirror_file_trace` (migration
 * 0023), so that `mb file lookup` says "by trace" until the next scan confirms it (listed)
 * or removes it (not listed). Content checks and verified redirects treat it as any copy.
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import {inFolder, inSubtree} from '../db/sql.js'
import {pathFilter} from '../glob.js'
import {folderOf, trimSlashes} from '../text.js'

/**
 * Adds to their files' mirror sets the copies `mirrorId`'s trace vouches for (see the module
 * doc), in one transaction, stamping `txid` as bulk updates must (docs/change-tracking.md).
 *
 * @param marginSeconds  `sync.margin_seconds`
 * @returns the origin paths added, in path order (empty when the mirror has no trace or no scan)
 */
export async function trustTrace(db: Kysely<DB>, mirrorId: number, marginSeconds: number): Promise<string[]> {
  const mirror = await db.selectFrom('mirror').select(['id', 'base_path', 'include_patterns', 'exclude_patterns', 'last_scan_ok_at', 'synced_at']).where('id', '=', mirrorId).executeTakeFirst()
  if (!mirror?.synced_at || !mirror.last_scan_ok_at) return []
  const M = mirror.id
  const vouchedUntil = new Date(new Date(mirror.synced_at).getTime() - marginSeconds * 1000)
  const candidates = await sql<{id: number; path: string; size: number; mtime: number}>`
    SELECT f.id, f.path, f.size, f.mtime FROM file f
    WHERE f.indexed_at > ${new Date(mirror.last_scan_ok_at)} AND f.indexed_at <= ${vouchedUntil}
      AND NOT (${M}::smallint = ANY(f.mirrors)) AND ${inSubtree(trimSlashes(mirror.base_path ?? ''), 'f.path')}
      AND NOT EXISTS (SELECT 1 FROM mirror_file_bad b WHERE b.mirror_id = ${M}::smallint AND b.file_id = f.id)
      AND NOT EXISTS (SELECT 1 FROM mirror_file_stale s WHERE s.mirror_id = ${M}::smallint AND s.file_id = f.id)
    ORDER BY f.path`.execute(db)
  const carried = pathFilter([mirror.include_patterns ?? []], mirror.exclude_patterns ?? [])
  const folders = new Map<string, boolean>()
  const vouched: typeof candidates.rows = []
  for (const file of candidates.rows) {
    if (!carried(file.path)) continue
    const folder = folderOf(file.path)
    let seen = folders.get(folder)
    if (seen === undefined) {
      seen = await heldByScanIn(db, M, folder)
      folders.set(folder, seen)
    }
    if (seen) vouched.push(file)
  }
  if (vouched.length === 0) return []
  const ids = vouched.map((f) => Number(f.id))
  await db.transaction().execute(async (trx) => {
    await sql`
      UPDATE file SET mirrors = array_append(mirrors, ${M}::smallint), txid = pg_current_xact_id()
      WHERE id = ANY(${ids}::int[]) AND NOT (${M}::smallint = ANY(mirrors))`.execute(trx)
    await sql`
      INSERT INTO mirror_file_trace (mirror_id, file_id, size, mtime, trace_at)
      SELECT ${M}::smallint, f.id, f.size, f.mtime, ${new Date(mirror.synced_at!)} FROM file f WHERE f.id = ANY(${ids}::int[])
      ON CONFLICT (mirror_id, file_id) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, trace_at = excluded.trace_at, added_at = now()`.execute(trx)
  })
  return vouched.map((f) => f.path)
}

/** Whether mirror `M` holds, by scan, some file directly in `folder` ('' = the top). */
async function heldByScanIn(db: Kysely<DB>, M: number, folder: string): Promise<boolean> {
  const found = await sql<{one: number}>`
    SELECT 1 AS one FROM file g
    WHERE ${inFolder(folder, 'g.path')} AND ${M}::smallint = ANY(g.mirrors)
      AND NOT EXISTS (SELECT 1 FROM mirror_file_trace t WHERE t.mirror_id = ${M}::smallint AND t.file_id = g.id)
    LIMIT 1`.execute(db)
  return found.rows.length > 0
}
