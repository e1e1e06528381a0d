/**
 * The scan reconciler: turns one mirror's listing (the shared entry stream) into the mirror's
 * file set in the origin index.
 *
 * 1. Entries are mapped from mirror paths to origin paths through the mirror's `base_path`
 *    (a mirror carrying only the origin subtree `base_path` has that subtree at its root), then
 *    filtered by include/exclude globs (picomatch, on origin paths; global `scan.include` /
 *    `scan.exclude` and the mirror's `include_patterns` / `exclude_patterns`).
 * 2. They stream into a session temp table in `unnest` batches; nothing visible changes.
 * 3. When the listing is complete, ONE transaction compares with the origin index:
 *    - same size (or, for a listing that rounds sizes, an origin size inside the entry's
 *      [sizeMin, sizeMax] range), and mtime equal within the listing's precision (or off by whole hours, up to
 *      ±14 h, for listings shown in another time zone) → the mirror id joins `file.mirrors`;
 *    - listed with another size or mtime → a `mirror_file_stale` row (size and mtime seen);
 *    - not listed (or filtered out) → the mirror id leaves `file.mirrors`.
 *    Readers never see a half-scanned mirror.
 * 4. A scan matching fewer than `minRatio` of the files the mirror matched before (in the same
 *    scope) is refused: it changes nothing and throws.
 *
 * `subdir` limits the scope: records outside that origin subtree are left alone.
 * Concurrency: a PostgreSQL session advisory lock (classid 0x6d62, objid = mirror id) refuses a
 * second scan of the same mirror; with PGlite (one process per store) an in-process set does.
 */
import {type Kysely, sql} from 'kysely'
import picomatch from 'picomatch'
import type {Database} from '../db/index.js'
import type {DB} from '../db/schema.js'
import {MbError, UsageError} from '../errors.js'
import type {ListingEntry} from './types.js'
import {inSubtree} from '../db/sql.js'
import {trimLeadingSlashes, trimSlashes} from '../text.js'

/** Rows per `unnest` insert into the temp table. */
const BATCH = 10_000
/** Advisory-lock class for scans ('mb'). */
export const SCAN_LOCK_CLASS = 0x6d62
/** Largest whole-hour offset tolerated between listing and origin mtimes, seconds. */
const MAX_TZ_OFFSET = 14 * 3600

/** The mirror fields the reconciler needs. */
export interface ReconcileMirror {
  id: number
  identifier: string
  base_path: string
  include_patterns: string[]
  exclude_patterns: string[]
}

export interface ReconcileOptions {
  mirror: ReconcileMirror
  /** Origin-relative subtree to rescan; '' or undefined = the whole mirror. */
  subdir?: string
  /** Global include globs (config `scan.include`). */
  include?: string[]
  /** Global exclude globs (config `scan.exclude`). */
  exclude?: string[]
  /** Refuse when matched < minRatio x matched before (default 0.5). */
  minRatio?: number
  /** Protocol that produced the listing, recorded on the mirror. */
  protocol: string
  /** Set `enabled = true` in the same transaction when the scan matched at least one file. */
  enable?: boolean
  /** Called every few thousand entries with the number of entries seen so far. */
  onProgress?: (entries: number) => void
}

/** What a successful reconciliation did. Counts are files (not directories). */
export interface ReconcileResult {
  mirror: string
  protocol: string
  subdir: string
  /** Files in the listing. */
  files: number
  /** Listed files inside the scope after base_path mapping and include/exclude. */
  considered: number
  /** Origin files the mirror holds at the origin's size and mtime. */
  matched: number
  /** Origin files the mirror holds at another size or mtime. */
  stale: number
  /** Origin files in the mirror's scope that it lacks (not filtered by globs). */
  missing: number
  /** Files matched in the same scope before this scan. */
  previous: number
  /** Files that joined / left the mirror's set. */
  added: number
  removed: number
  enabled: boolean
  seconds: number
}

/** Where a (possibly partial) scan lists and what it replaces. */
export interface ScanScope {
  /** Subtree to list, relative to the mirror's base URL ('' = all). */
  listSubdir: string
  /** Origin subtree whose records the scan replaces ('' = all). */
  scope: string
}

/**
 * Plans a scan of `subdir` (origin-relative) on a mirror carrying `basePath`.
 * @throws UsageError when the mirror carries nothing under `subdir`, or `subdir` holds '..'
 */
export function planScope(basePath: string, subdir: string | undefined): ScanScope {
  const base = trimSlashes(basePath ?? '')
  const dir = trimSlashes(subdir ?? '')
  if (dir.split('/').some((c) => c === '..' || c === '.')) throw new UsageError(`--dir ${subdir} must be a plain path inside the origin tree (no '.' or '..').`)
  if (!dir) return {listSubdir: '', scope: ''}
  if (!base) return {listSubdir: dir, scope: dir}
  if (dir === base) return {listSubdir: '', scope: dir}
  if (dir.startsWith(base + '/')) return {listSubdir: dir.slice(base.length + 1), scope: dir}
  if (base.startsWith(dir + '/')) return {listSubdir: '', scope: dir}
  throw new UsageError(`The mirror carries only the origin subtree ${base}/, which does not overlap --dir ${dir}.`)
}

/** Maps a listed mirror path to its origin path, or undefined for a hostile or empty path. */
export function toOriginPath(basePath: string, mirrorPath: string): string | undefined {
  const rel = trimLeadingSlashes(mirrorPath.replace(/^(\.\/)+/, ''))
  if (!rel) return undefined
  const parts = rel.split('/')
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return undefined
  const base = trimSlashes(basePath ?? '')
  return base ? `${base}/${rel}` : rel
}

/**
 * Builds the include/exclude filter for origin paths: a path counts when it matches every
 * non-empty include list (global, then per mirror) and no exclude glob. Globs are picomatch
 * with `dot: true`.
 */
export function pathFilter(include: string[][], exclude: string[]): (path: string) => boolean {
  const includes = include.filter((list) => list.length > 0).map((list) => picomatch(list, {dot: true}))
  const excludes = exclude.length > 0 ? picomatch(exclude, {dot: true}) : undefined
  return (path) => includes.every((m) => m(path)) && !(excludes && excludes(path))
}

/** A database session on which temp tables live: one pg connection, or the PGlite instance. */
interface Session {
  db: Kysely<DB>
  transaction<T>(fn: (trx: Kysely<DB>) => Promise<T>): Promise<T>
}

async function withSession<T>(database: Database, fn: (session: Session) => Promise<T>): Promise<T> {
  if (database.kind === 'pglite') {
    return fn({db: database.db, transaction: (body) => database.db.transaction().execute(body)})
  }
  return database.db.connection().execute(async (conn) =>
    fn({
      db: conn,
      transaction: async (body) => {
        await sql`BEGIN`.execute(conn)
        try {
          const result = await body(conn)
          await sql`COMMIT`.execute(conn)
          return result
        } catch (error) {
          await sql`ROLLBACK`.execute(conn).catch(() => {})
          throw error
        }
      },
    }),
  )
}

const localScans = new Set<number>()

/** Phase timings on stderr when MB_SCAN_DEBUG is set (for benchmarks). */
function phase(label: string, since: number): number {
  if (process.env.MB_SCAN_DEBUG) process.stderr.write(`[scan] ${label}: ${((performance.now() - since) / 1000).toFixed(2)} s\n`)
  return performance.now()
}

/**
 * Consumes `entries` (one mirror's listing) and, when it is complete and plausible, replaces the
 * mirror's file set in the scope in one transaction. The caller records failures with
 * {@link recordScanFailure}.
 *
 * @throws MbError SCAN_BUSY when another scan of this mirror runs (nothing read or written),
 *         SCAN_TOO_FEW when the min_ratio check refuses the result (nothing written), and
 *         whatever the listing throws (nothing written).
 */
export async function reconcileListing(database: Database, entries: AsyncIterable<ListingEntry>, options: ReconcileOptions): Promise<ReconcileResult> {
  const started = performance.now()
  const {mirror} = options
  const M = mirror.id
  const {scope} = planScope(mirror.base_path, options.subdir)
  const filter = pathFilter([options.include ?? [], mirror.include_patterns ?? []], [...(options.exclude ?? []), ...(mirror.exclude_patterns ?? [])])
  const minRatio = options.minRatio ?? 0.5
  const table = `mb_scan_${M}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  const busy = () => new MbError(`Mirror ${mirror.identifier} is being scanned by another process right now; this scan was refused. Wait for it to finish and try again.`, {code: 'SCAN_BUSY'})

  return withSession(database, async (session) => {
    const {db} = session
    if (database.kind === 'pglite') {
      if (localScans.has(M)) throw busy()
      localScans.add(M)
    } else {
      const got = await sql<{ok: boolean}>`SELECT pg_try_advisory_lock(${SCAN_LOCK_CLASS}::int, ${M}::int) AS ok`.execute(db)
      if (!got.rows[0]?.ok) throw busy()
    }
    try {
      await sql`CREATE TEMP TABLE ${sql.id(table)} (path text COLLATE "C" NOT NULL, size bigint NOT NULL, mtime bigint, prec integer, smin bigint, smax bigint)`.execute(db)
      try {
        let files = 0
        let considered = 0
        let seen = 0
        let paths: string[] = []
        let sizes: number[] = []
        let mtimes: Array<number | null> = []
        let precs: Array<number | null> = []
        // A listing that shows rounded sizes (Apache's 1.2K) gives the range the exact size lies in.
        let smins: Array<number | null> = []
        let smaxs: Array<number | null> = []
        const flush = async () => {
          if (paths.length === 0) return
          await sql`INSERT INTO ${sql.id(table)} SELECT * FROM unnest(${paths}::text[], ${sizes}::bigint[], ${mtimes}::bigint[], ${precs}::int[], ${smins}::bigint[], ${smaxs}::bigint[])`.execute(db)
          paths = []
          sizes = []
          mtimes = []
          precs = []
          smins = []
          smaxs = []
        }
        for await (const entry of entries) {
          seen++
          if (options.onProgress && seen % 5000 === 0) options.onProgress(seen)
          if (entry.type !== 'file') continue
          files++
          const path = toOriginPath(mirror.base_path, entry.path)
          if (path === undefined) continue
          if (scope && !path.startsWith(scope + '/')) continue
          if (!filter(path)) continue
          considered++
          paths.push(path)
          sizes.push(entry.size)
          mtimes.push(entry.mtime === undefined ? null : Math.floor(entry.mtime))
          precs.push(entry.mtime === undefined ? null : Math.max(1, Math.round(entry.mtimePrecision ?? 1)))
          const ranged = entry.sizeApproximate && entry.sizeMin !== undefined && entry.sizeMax !== undefined
          smins.push(ranged ? entry.sizeMin! : null)
          smaxs.push(ranged ? entry.sizeMax! : null)
          if (paths.length >= BATCH) await flush()
        }
        await flush()
        options.onProgress?.(seen)
        let mark = phase('listing into temp table', started)
        await sql`ANALYZE ${sql.id(table)}`.execute(db)

        const counts = await session.transaction(async (trx) => {
          const prev = await sql<{n: number}>`SELECT count(*)::int AS n FROM file WHERE ${M}::smallint = ANY(mirrors) AND ${inSubtree(scope)}`.execute(trx)
          const previous = prev.rows[0].n
          const matchTable = `${table}_m`
          // One row per origin file listed; ok = same size and mtime within precision or whole hours.
          await sql`
            CREATE TEMP TABLE ${sql.id(matchTable)} ON COMMIT DROP AS
            SELECT f.id,
                   bool_or((e.size = f.size OR coalesce(f.size BETWEEN e.smin AND e.smax, false)) AND (e.mtime IS NULL OR (
                     abs(e.mtime - f.mtime) < coalesce(e.prec, 1) OR (
                       abs(e.mtime - f.mtime) <= ${MAX_TZ_OFFSET}
                       AND least(abs(e.mtime - f.mtime) % 3600, 3600 - abs(e.mtime - f.mtime) % 3600) < coalesce(e.prec, 1))))) AS ok,
                   max(e.size) AS size, max(e.mtime) AS mtime
            FROM ${sql.id(table)} e JOIN file f ON f.path = e.path
            GROUP BY f.id`.execute(trx)
          await sql`ANALYZE ${sql.id(matchTable)}`.execute(trx)
          mark = phase('match table', mark)
          const tally = await sql<{matched: number; stale: number}>`
            SELECT count(*) FILTER (WHERE ok)::int AS matched, count(*) FILTER (WHERE NOT ok)::int AS stale FROM ${sql.id(matchTable)}`.execute(trx)
          const {matched, stale} = tally.rows[0]
          if (previous > 0 && matched < minRatio * previous) {
            throw new MbError(
              `Scan of ${mirror.identifier} matched only ${matched} file(s) where it matched ${previous} before (less than scan.min_ratio ${minRatio}); nothing was changed. If the mirror really lost them, lower scan.min_ratio for this run.`,
              {code: 'SCAN_TOO_FEW'},
            )
          }
          const removed = await sql`
            UPDATE file SET mirrors = array_remove(mirrors, ${M}::smallint), txid = pg_current_xact_id()
            WHERE ${M}::smallint = ANY(mirrors) AND ${inSubtree(scope)}
              AND NOT EXISTS (SELECT 1 FROM ${sql.id(matchTable)} m WHERE m.id = file.id AND m.ok)`.execute(trx)
          mark = phase('remove from sets', mark)
          const added = await sql`
            UPDATE file SET mirrors = array_append(mirrors, ${M}::smallint), txid = pg_current_xact_id()
            FROM ${sql.id(matchTable)} m
            WHERE file.id = m.id AND m.ok AND NOT (${M}::smallint = ANY(file.mirrors))`.execute(trx)
          mark = phase('add to sets', mark)
          await sql`
            DELETE FROM mirror_file_stale s USING file f
            WHERE s.mirror_id = ${M}::smallint AND f.id = s.file_id AND ${inSubtree(scope, 'f.path')}`.execute(trx)
          await sql`
            INSERT INTO mirror_file_stale (mirror_id, file_id, size, mtime)
            SELECT ${M}::smallint, id, size, mtime FROM ${sql.id(matchTable)} WHERE NOT ok`.execute(trx)
          mark = phase('stale rows', mark)
          const base = trimSlashes(mirror.base_path ?? '')
          // The deeper of the scope and the mirror's base path (planScope made sure they overlap).
          const carried = !scope ? base : !base ? scope : scope.length >= base.length ? scope : base
          const originInScope = await sql<{n: number}>`SELECT count(*)::int AS n FROM file WHERE ${inSubtree(carried)}`.execute(trx)
          const total = scope
            ? (await sql<{n: number}>`SELECT count(*)::int AS n FROM file WHERE ${M}::smallint = ANY(mirrors)`.execute(trx)).rows[0].n
            : matched
          mark = phase('counts', mark)
          const enabled = Boolean(options.enable && matched > 0)
          const seconds = Math.round((performance.now() - started) / 10) / 100
          await sql`
            UPDATE mirror SET last_scan_at = now(), last_scan_ok_at = now(), last_scan_error = NULL,
              last_scan_protocol = ${options.protocol}, last_scan_files = ${files}::int, last_scan_matched = ${total}::int,
              last_scan_seconds = ${seconds}::float8, needs_rescan = false
              ${enabled ? sql`, enabled = true` : sql``}
            WHERE id = ${M}::smallint`.execute(trx)
          return {
            previous,
            matched,
            stale,
            missing: Math.max(0, originInScope.rows[0].n - matched - stale),
            added: Number(added.numAffectedRows ?? 0),
            removed: Number(removed.numAffectedRows ?? 0),
            enabled,
          }
        })
        return {
          mirror: mirror.identifier,
          protocol: options.protocol,
          subdir: scope,
          files,
          considered,
          ...counts,
          seconds: Math.round((performance.now() - started) / 10) / 100,
        }
      } finally {
        await sql`DROP TABLE IF EXISTS ${sql.id(table)}`.execute(db).catch(() => {})
      }
    } finally {
      if (database.kind === 'pglite') localScans.delete(M)
      else await sql`SELECT pg_advisory_unlock(${SCAN_LOCK_CLASS}::int, ${M}::int)`.execute(db).catch(() => {})
    }
  })
}

/**
 * Records a failed scan on the mirror (last_scan_at, last_scan_error, last_scan_protocol) and
 * nothing else: its file set and stale records stay as they were.
 * @param reason  operator-facing message (credentials already redacted)
 */
export async function recordScanFailure(db: Kysely<DB>, mirrorId: number, reason: string, protocol: string | null): Promise<void> {
  await sql`UPDATE mirror SET last_scan_at = now(), last_scan_error = ${reason.slice(0, 2000)}, last_scan_protocol = ${protocol} WHERE id = ${mirrorId}::smallint`.execute(db)
}
