/**
 * Which origin files have a detached OpenPGP signature beside them: `file.signature` is
 * `.asc` when `PATH.asc` is indexed and smaller than PATH, else `.sig` when `PATH.sig` is,
 * else null (migration 0015). `mb index` keeps it for the paths a run adds, changes or
 * removes, so `mb serve` reads it from its snapshot and never looks per request.
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'

/** The suffixes of a detached signature, in the order they are preferred. */
const SUFFIXES = ['.asc', '.sig'] as const

/**
 * The paths whose `signature` may change when `path` is added, changed or removed: the path
 * itself, and for a signature (`X.asc`, `X.sig`) the file it signs.
 */
export function signatureTargets(path: string): string[] {
  for (const suffix of SUFFIXES) if (path.endsWith(suffix) && path.length > suffix.length) return [path, path.slice(0, -suffix.length)]
  return [path]
}

/**
 * Recomputes `file.signature` for the rows at `paths` (missing ones are skipped), writing only
 * rows whose value changes (each write stamps the row for snapshot readers).
 * @returns the number of rows changed
 */
export async function updateSignatures(db: Kysely<DB>, paths: readonly string[]): Promise<number> {
  let changed = 0
  const unique = [...new Set(paths)]
  for (let i = 0; i < unique.length; i += 5000) {
    const chunk = unique.slice(i, i + 5000)
    const result = await sql`
      UPDATE file f SET signature = n.signature FROM (
        SELECT t.id, (SELECT s.suffix FROM (VALUES ('.asc', 1), ('.sig', 2)) AS s(suffix, rank) JOIN file g ON g.path = t.path || s.suffix
                      WHERE g.size < t.size ORDER BY s.rank LIMIT 1) AS signature
        FROM file t WHERE t.path = ANY(${chunk}::text[])) n
      WHERE f.id = n.id AND f.signature IS DISTINCT FROM n.signature`.execute(db)
    changed += Number(result.numAffectedRows ?? 0)
  }
  return changed
}
