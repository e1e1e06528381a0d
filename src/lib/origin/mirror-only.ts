/**
 * Files the origin pruned but mirrors still carry (`serve.mirror_only`, migration 0033):
 * projects delete old releases from the origin to save space while archive mirrors keep them.
 * A file that leaves the tree under one of the globs, while a mirror holds its last indexed
 * version, stays in the index as mirror-only (`file.mirror_only`, its hashes and mirror set
 * kept), and `mb serve` keeps redirecting it; the row goes once no mirror holds it, or by
 * `mb file forget`. A file that comes back to the tree is an ordinary file again. Outside the
 * globs a file that leaves the tree leaves the index, and the warning names the mirrors that
 * still hold it.
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import {pathFilter} from '../glob.js'

/** An indexed row as the walk's diff needs it. */
export interface IndexedRow {
  id: number
  /** How many mirrors hold the indexed version. */
  held: number
  mirrorOnly: boolean
}

/** Warnings named one by one before the rest are counted. */
const NAMED_WARNINGS = 20

/**
 * Splits the paths gone from the tree into those kept as mirror-only (under `globs`, held by a
 * mirror) and those to remove.
 */
export function splitGone(gone: readonly string[], rows: ReadonlyMap<string, IndexedRow>, globs: readonly string[]): {keep: number[]; remove: string[]} {
  const matches = globs.length > 0 ? pathFilter([[...globs]], []) : () => false
  const keep: number[] = []
  const remove: string[] = []
  for (const path of gone) {
    const row = rows.get(path)
    if (row !== undefined && row.held > 0 && matches(path)) keep.push(row.id)
    else remove.push(path)
  }
  return {keep, remove}
}

/**
 * Marks rows `ids` mirror-only (the origin no longer holds them) and clears the mark of rows
 * `back` (found in the tree again). Rows already so are not written.
 */
export async function updateMirrorOnly(db: Kysely<DB>, ids: readonly number[], back: readonly number[]): Promise<void> {
  if (ids.length > 0) await sql`UPDATE file SET mirror_only = true WHERE id = ANY(${[...ids]}::int[]) AND NOT mirror_only`.execute(db)
  if (back.length > 0) await sql`UPDATE file SET mirror_only = false WHERE id = ANY(${[...back]}::int[]) AND mirror_only`.execute(db)
}

/**
 * Warnings for files about to leave the index that mirrors still hold: one per file naming
 * the mirrors (the first {@link NAMED_WARNINGS}), then a count of the rest.
 */
export async function stillHeldWarnings(db: Kysely<DB>, paths: readonly string[]): Promise<string[]> {
  if (paths.length === 0) return []
  const {rows} = await sql<{path: string; mirrors: string; total: string | number}>`
    SELECT f.path, string_agg(m.identifier, ', ' ORDER BY m.identifier) AS mirrors, count(*) OVER () AS total
    FROM file f JOIN mirror m ON m.id = ANY(f.mirrors)
    WHERE f.path = ANY(${[...paths]}::text[])
    GROUP BY f.path ORDER BY f.path LIMIT ${NAMED_WARNINGS}`.execute(db)
  const warnings = rows.map((r) => `${r.path} left the origin and the index; mirrors still hold it: ${r.mirrors} (under serve.mirror_only it would stay redirected)`)
  const total = Number(rows[0]?.total ?? 0)
  if (total > rows.length) warnings.push(`${total - rows.length} more files left the origin and the index while mirrors still hold them`)
  return warnings
}

/** What `mb file forget` removed. */
export interface Forgotten {
  path: string
  /** It was mirror-only (the origin had pruned it already). */
  mirror_only: boolean
  /** The mirrors that held it: mb sends no client there for it any more; their copies stay theirs. */
  mirrors: string[]
}

/**
 * Removes the file at `path` (origin-relative, exact) from the index, mirror-only or not: no
 * redirect, metalink or list names it any more (the snapshot readers learn of it from the
 * tombstone the trigger writes). For a file that must go for legal reasons, after the origin
 * deleted it; a file still in the tree comes back at the next `mb index`.
 * @returns what was removed, or undefined when no such file is indexed
 */
export async function forgetFile(db: Kysely<DB>, path: string): Promise<Forgotten | undefined> {
  return db.transaction().execute(async (trx) => {
    const {rows} = await sql<{mirror_only: boolean; mirrors: string | null}>`
      SELECT f.mirror_only, (SELECT string_agg(m.identifier, ',' ORDER BY m.identifier) FROM mirror m WHERE m.id = ANY(f.mirrors)) AS mirrors
      FROM file f WHERE f.path = ${path} FOR UPDATE`.execute(trx)
    const row = rows[0]
    if (row === undefined) return undefined
    await sql`DELETE FROM file WHERE path = ${path}`.execute(trx)
    return {path, mirror_only: row.mirror_only === true, mirrors: row.mirrors ? row.mirrors.split(',') : []}
  })
}
