/**
 * The origin index: one `file` row per regular file of the master tree (path, size in bytes,
 * mtime in Unix seconds UTC), kept in step with the tree incrementally.
 *
 * Freshness rule (DESIGN.md): when a file's size or mtime changes, its `mirrors` set is
 * emptied and its `mirror_file_stale` and `mirror_file_bad` rows are dropped, because the origin now holds a version
 * no mirror has confirmed yet. The next scan of each mirror fills the set again.
 *
 * Writes are set-based (`unnest` batches), never one statement per file; the diff against the
 * existing rows happens in memory.
 */
import {join} from 'node:path'
import {type Kysely, sql} from 'kysely'
import {MbError} from '../errors.js'
import {pathFilter} from '../glob.js'
import type {DB} from '../db/schema.js'
import {type OriginFile, type OriginLink, walkOrigin} from './walk.js'
import {writeOriginTrace} from '../sync/trace.js'
import {replaceLinks} from './links.js'
import {inSubtree} from '../db/sql.js'
import {trimSlashes} from '../text.js'
import {sameVersion} from './freshness.js'
import {isRepomdPath, type RepomdChange, recordRepomdChanges} from './repomd.js'
import {signatureTargets, updateSignatures} from './signatures.js'
import {type IndexedRow, splitGone, stillHeldWarnings, updateMirrorOnly} from './mirror-only.js'

export {type OriginFile, walkOrigin} from './walk.js'

/** Rows per `unnest` statement. */
const BATCH = 5000

/** What an index run did. */
export interface IndexResult {
  /** Absolute path of the root as given. */
  root: string
  /** Subtree indexed ('' = the whole tree). */
  subdir: string
  /** Regular files found by the walk. */
  files: number
  added: number
  /** Files whose size or mtime changed (their mirror sets were emptied). */
  changed: number
  removed: number
  /** Files gone from the tree kept as mirror-only (`serve.mirror_only`, ./mirror-only.ts). */
  mirrorOnly: number
  unchanged: number
  /** Bytes in all files found. */
  bytes: number
  /** Symlinks found whose target lies inside the root (recorded in `file_link`, not walked as files). */
  links: number
  seconds: number
  warnings: string[]
  /** The time written to the sync trace (ISO 8601 UTC); null when none was written (no `tracePath`, or written less than a minute ago). */
  trace: string | null
}

export interface IndexOptions {
  /** Index only this subtree (relative to the root); rows outside it are left alone. */
  subdir?: string
  /** Receives each warning as it happens (they are also collected in the result). */
  onWarning?: (message: string) => void
  /**
   * `sync.trace_path`: the sync trace file, relative to the root. It is left out of the index
   * (its content changes every minute; no client downloads it through mb), and once the index
   * is written it gets the current time (src/lib/sync/trace.ts, at most once a minute).
   */
  tracePath?: string
  /**
   * `index.min_ratio` (0..1): a walk that would keep fewer than this share of the files indexed
   * before in its scope is refused (INDEX_TOO_FEW) and changes nothing. Unset or 0: no check.
   */
  minRatio?: number
  /**
   * `index.exclude`: picomatch globs (dotfiles matched) on root-relative paths left out of
   * the index, files and symlinks alike; rows indexed before under them are removed.
   * Unset: nothing is left out.
   */
  exclude?: readonly string[]
  /** `serve.mirror_only`: globs whose files, gone from the tree, stay indexed while a mirror holds them (./mirror-only.ts). */
  mirrorOnly?: readonly string[]
}

/**
 * Inserts new files and updates changed ones, by path. A changed size or mtime empties the
 * file's mirror set and drops its stale records. Unchanged rows are not written.
 * For callers that already know what changed (e.g. `mb serve --watch`).
 *
 * @param db     a Kysely handle (a transaction works too)
 * @param files  files to record; paths relative to the root, '/'-separated
 * @returns counts of rows added and changed
 */
export async function upsertOriginFiles(db: Kysely<DB>, files: OriginFile[]): Promise<{added: number; changed: number}> {
  let added = 0
  let changed = 0
  for (let i = 0; i < files.length; i += BATCH) {
    const chunk = files.slice(i, i + BATCH)
    const paths = chunk.map((f) => f.path)
    const sizes = chunk.map((f) => f.size)
    const mtimes = chunk.map((f) => f.mtime)
    const result = await sql<{inserted: boolean; id: number}>`
      INSERT INTO file (path, size, mtime)
      SELECT * FROM unnest(${paths}::text[], ${sizes}::bigint[], ${mtimes}::bigint[])
      ON CONFLICT (path) DO UPDATE SET size = excluded.size, mtime = excluded.mtime, mirrors = '{}', indexed_at = now(), mirror_only = false
        WHERE file.size <> excluded.size OR file.mtime <> excluded.mtime
      RETURNING (xmax = 0) AS inserted, id`.execute(db)
    const changedIds = result.rows.filter((r) => !r.inserted).map((r) => r.id)
    added += result.rows.length - changedIds.length
    changed += changedIds.length
    if (changedIds.length > 0) {
      await sql`DELETE FROM mirror_file_stale WHERE file_id = ANY(${changedIds}::int[])`.execute(db)
      await sql`DELETE FROM mirror_file_bad WHERE file_id = ANY(${changedIds}::int[])`.execute(db)
      await sql`DELETE FROM mirror_file_trace WHERE file_id = ANY(${changedIds}::int[])`.execute(db)
    }
  }
  return {added, changed}
}

/**
 * Removes files from the index by path (their stale records go by cascade; a tombstone is
 * written by trigger for snapshot readers).
 * @returns number of rows removed
 */
async function removeOriginFiles(db: Kysely<DB>, paths: string[]): Promise<number> {
  let removed = 0
  for (let i = 0; i < paths.length; i += BATCH) {
    const result = await sql`DELETE FROM file WHERE path = ANY(${paths.slice(i, i + BATCH)}::text[])`.execute(db)
    removed += Number(result.numAffectedRows ?? 0)
  }
  return removed
}

/**
 * Walks `root` and brings the `file` table in step with it in one transaction: adds new
 * files, updates changed ones (emptying their mirror sets), and drops files that are gone;
 * the tree's symlinks go to `file_link` in the same transaction (./links.ts).
 * Files under a directory that could not be read are kept, not dropped.
 *
 * Memory: one Map entry per existing row (about 150 bytes each).
 *
 * @throws UsageError ROOT_INVALID (exit 2) when the root or subdir is not a readable directory (nothing changes)
 * @throws MbError INDEX_TOO_FEW (exit 1) when the walk would keep fewer than `minRatio` of the
 *         files indexed before in its scope, as an empty mount point or a wrong root would
 *         (the transaction rolls back: nothing changes)
 */
export async function indexOrigin(db: Kysely<DB>, root: string, options: IndexOptions = {}): Promise<IndexResult> {
  const started = performance.now()
  const subdir = trimSlashes(options.subdir ?? '')
  const warnings: string[] = []
  const unreadable: string[] = []
  const links: OriginLink[] = []
  const onWarning = (message: string) => {
    warnings.push(message)
    options.onWarning?.(message)
  }

  const existing = new Map<string, {id: number; size: number; mtime: number}>()
  const indexed = new Map<string, IndexedRow>()
  /** Mirror-only rows found in the tree again. */
  const back: number[] = []
  // The mirrors of repository indexes go with the version a change replaces (./repomd.ts).
  const repomdMirrors = new Map<string, number[]>()
  const rows = await sql<{id: number; path: string; size: number; mtime: number; repomd_mirrors: string | null; held: number; mirror_only: boolean}>`
    SELECT id, path, size, mtime, CASE WHEN path LIKE '%repodata/repomd.xml' THEN array_to_string(mirrors, ',') END AS repomd_mirrors,
      cardinality(mirrors) AS held, mirror_only FROM file WHERE ${inSubtree(subdir)}`.execute(db)
  for (const row of rows.rows) {
    existing.set(row.path, {id: row.id, size: Number(row.size), mtime: Number(row.mtime)})
    indexed.set(row.path, {id: row.id, held: Number(row.held), mirrorOnly: row.mirror_only === true})
    if (row.repomd_mirrors !== null) repomdMirrors.set(row.path, row.repomd_mirrors ? row.repomd_mirrors.split(',').map(Number) : [])
  }
  rows.rows.length = 0
  const before = existing.size
  const repomdChanges: RepomdChange[] = []

  let files = 0
  let bytes = 0
  let added = 0
  let changed = 0
  let unchanged = 0
  let removed = 0
  let mirrorOnly = 0
  await db.transaction().execute(async (trx) => {
    let pending: OriginFile[] = []
    const flush = async () => {
      if (pending.length === 0) return
      const result = await upsertOriginFiles(trx, pending)
      added += result.added
      changed += result.changed
      await updateSignatures(
        trx,
        pending.flatMap((f) => signatureTargets(f.path)),
      )
      pending = []
    }
    for await (const file of keptFiles(root, subdir, options, {links, unreadable, onWarning})) {
      files++
      bytes += file.size
      const old = existing.get(file.path)
      if (old) {
        existing.delete(file.path)
        if (indexed.get(file.path)?.mirrorOnly) back.push(old.id)
        if (sameVersion(old, file)) {
          unchanged++
          continue
        }
      }
      pending.push(file)
      if (isRepomdPath(file.path)) repomdChanges.push({path: file.path, mtime: file.mtime, previousMirrors: repomdMirrors.get(file.path) ?? []})
      if (pending.length >= BATCH) await flush()
    }
    await flush()
    await recordRepomdChanges(trx, root, repomdChanges)
    const gone = [...existing.keys()].filter((path) => !unreadable.some((dir) => dir === '' || path.startsWith(dir + '/')))
    refuseFewFiles(root, subdir, before, before - gone.length, options.minRatio ?? 0)
    const settled = await settleGone(trx, gone, indexed, back, options.mirrorOnly ?? [], onWarning)
    removed = settled.removed
    mirrorOnly = settled.mirrorOnly
    await replaceLinks(trx, subdir, links, unreadable)
  })
  const trace = options.tracePath === undefined ? null : await writeTraceAfterIndex(root, options.tracePath, onWarning)
  return {root, subdir, files, added, changed, removed, mirrorOnly, unchanged, bytes, links: links.length, seconds: Math.round((performance.now() - started) / 10) / 100, warnings, trace}
}

/**
 * The walk of {@link indexOrigin}: the tree's files under `subdir` that the index keeps (not
 * the sync trace, nothing `index.exclude` leaves out), and likewise its symlinks, into
 * `into.links`; the directories that could not be read into `into.unreadable`.
 */
async function* keptFiles(
  root: string,
  subdir: string,
  options: Pick<IndexOptions, 'tracePath' | 'exclude'>,
  into: {links: OriginLink[]; unreadable: string[]; onWarning: (message: string) => void},
): AsyncGenerator<OriginFile> {
  const kept = pathFilter([], [...(options.exclude ?? [])])
  const onLink = (link: OriginLink) => {
    if (kept(link.path)) into.links.push(link)
  }
  for await (const file of walkOrigin(root, {subdir, onWarning: into.onWarning, onUnreadableDir: (p) => into.unreadable.push(p), onLink})) {
    if (file.path !== options.tracePath && kept(file.path)) yield file
  }
}

/**
 * Settles the files gone from the tree: those under `mirrorOnlyGlobs` that a mirror holds stay
 * as mirror-only (./mirror-only.ts), the rest leave the index (a warning names the mirrors
 * still holding each), and mirror-only rows found again (`back`) become ordinary files.
 * @returns rows removed and rows kept as mirror-only
 */
async function settleGone(
  trx: Kysely<DB>,
  gone: string[],
  indexed: ReadonlyMap<string, IndexedRow>,
  back: number[],
  mirrorOnlyGlobs: readonly string[],
  onWarning: (message: string) => void,
): Promise<{removed: number; mirrorOnly: number}> {
  const {keep, remove} = splitGone(gone, indexed, mirrorOnlyGlobs)
  for (const warning of await stillHeldWarnings(trx, remove)) onWarning(warning)
  await updateMirrorOnly(trx, keep, back)
  const removed = await removeOriginFiles(trx, remove)
  // The signature (./signatures.ts) of each row added, changed or removed, and of the files they sign.
  await updateSignatures(trx, remove.flatMap(signatureTargets))
  return {removed, mirrorOnly: keep.length}
}

/**
 * The `index.min_ratio` check: throws when a walk keeps `kept` of the `before` files indexed
 * in its scope and that is less than `minRatio` of them.
 * @throws MbError INDEX_TOO_FEW
 */
function refuseFewFiles(root: string, subdir: string, before: number, kept: number, minRatio: number): void {
  if (before === 0 || kept >= minRatio * before) return
  throw new MbError(
    `The walk of ${subdir ? join(root, subdir) : root} found ${kept} of the ${before} files indexed there (less than index.min_ratio ${minRatio}); nothing was changed. Check that the tree is mounted and the root is right; if the files really went, run again with --min-ratio 0.`,
    {code: 'INDEX_TOO_FEW'},
  )
}

/** Writes the origin's sync trace; a failure is a warning (the index is written), not an error. */
async function writeTraceAfterIndex(root: string, tracePath: string, onWarning: (message: string) => void): Promise<string | null> {
  try {
    return (await writeOriginTrace(root, tracePath))?.toISOString() ?? null
  } catch (error) {
    onWarning(`could not write the sync trace ${tracePath}: ${(error as Error).message}`)
    return null
  }
}
