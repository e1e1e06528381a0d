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
 *    - not listed (or filtered out) → the mirror id leaves `file.mirrors`;
 *    - a copy a content check found corrupt (`mirror_file_bad`) stays out of the set while it
 *      is listed at the same version; listed otherwise, or not at all, its record goes.
 *    Readers never see a half-scanned mirror.
 * 4. A scan matching fewer than `minRatio` of the files the mirror matched before (in the same
 *    scope) is refused: it changes nothing and throws (the caller then marks the mirror
 *    suspect, {@link recordScanFailure}). A successful scan clears that mark.
 *
 * The plan's scope (from {@link planScope}) limits the scan: records outside that origin
 * subtree (or, for a one-folder scan, outside that folder's own files) are left alone. A
 * one-folder scan (the demand scans of `mb serve`, `mb scan --dir DIR --no-recursive`) leaves
 * the mirror's scan record alone too: its last scan time, error and suspect mark describe
 * whole-tree scans, which trust.ts and the operator read. Concurrency: the named lock `scanLock(mirror id)` (`db/named-locks.ts`)
 * refuses a second scan of the same mirror. The mirror-set updates follow the change-tracking
 * contract in docs/change-tracking.md.
 */
import {type Kysely, sql} from 'kysely'
import type {Database} from '../db/index.js'
import {scanLock} from '../db/named-locks.js'
import type {DB} from '../db/schema.js'
import {MbError, UsageError} from '../errors.js'
import type {ListingEntry} from './types.js'
import {inFolder, inSubtree} from '../db/sql.js'
import {pathFilter} from '../glob.js'
import {readLinks, underDirectoryLink} from '../origin/links.js'
import {folderOf, trimLeadingSlashes, trimSlashes} from '../text.js'

/** Rows per `unnest` insert into the temp table. */
const BATCH = 10_000
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
  /** What the scan covers, from {@link planScope} (default: the whole mirror). */
  plan?: ScanScope
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
  /** Whether the mirror is enabled after the scan (as it was before, or enabled by it). */
  enabled: boolean
  /** Whether this scan enabled it (`--enable`, and it matched files). */
  enabledByScan: boolean
  seconds: number
}

/** Where a (possibly partial) scan lists and what it replaces. */
export interface ScanScope {
  /** Subtree to list, relative to the mirror's base URL ('' = all). */
  listSubdir: string
  /** Origin subtree whose records the scan replaces ('' = all). */
  scope: string
  /** False: only the files directly in the folder `scope` are listed and replaced (a one-folder scan). */
  recursive: boolean
}

/**
 * Plans a scan of `subdir` (origin-relative) on a mirror carrying `basePath`: of the whole
 * subtree, or with `recursive` false of the files directly in that one folder.
 * @throws UsageError when the mirror carries nothing under `subdir` (for a one-folder scan:
 *         nothing directly in it), or `subdir` holds '..'
 */
export function planScope(basePath: string, subdir: string | undefined, recursive = true): ScanScope {
  const base = trimSlashes(basePath ?? '')
  const dir = trimSlashes(subdir ?? '')
  if (dir.split('/').some((c) => c === '..' || c === '.')) throw new UsageError(`--dir ${subdir} must be a plain path inside the origin tree (no '.' or '..').`)
  const plan = (listSubdir: string): ScanScope => ({listSubdir, scope: dir, recursive})
  if (!base) return plan(dir)
  if (dir === base) return plan('')
  if (dir.startsWith(base + '/')) return plan(dir.slice(base.length + 1))
  if (recursive && (!dir || base.startsWith(dir + '/'))) return plan('')
  if (!recursive) throw new UsageError(`The mirror carries only the origin subtree ${base}/, which holds no file directly in --dir ${dir || '(the top)'}.`)
  throw new UsageError(`The mirror carries only the origin subtree ${base}/, which does not overlap --dir ${dir}.`)
}

/** SQL condition: `column` (an origin path) lies in what the plan scans. */
function inPlan(plan: Pick<ScanScope, 'scope' | 'recursive'>, column = 'path') {
  return plan.recursive ? inSubtree(plan.scope, column) : inFolder(plan.scope, column)
}

/** Whether the origin path `path` lies in what the plan scans (the test {@link inPlan} makes in SQL). */
function pathInPlan(plan: Pick<ScanScope, 'scope' | 'recursive'>, path: string): boolean {
  return plan.recursive ? !plan.scope || path.startsWith(plan.scope + '/') : folderOf(path) === plan.scope
}

/** Maps a listed mirror path to its origin path, or undefined for a hostile or empty path. */
function toOriginPath(basePath: string, mirrorPath: string): string | undefined {
  const rel = trimLeadingSlashes(mirrorPath.replace(/^(\.\/)+/, ''))
  if (!rel) return undefined
  const parts = rel.split('/')
  if (parts.some((p) => p === '' || p === '.' || p === '..')) return undefined
  const base = trimSlashes(basePath ?? '')
  return base ? `${base}/${rel}` : rel
}

/** Phase timings on stderr when MB_SCAN_DEBUG is set (for benchmarks): each call reports the time since the previous one. */
function phaseClock(started: number): (label: string) => void {
  let since = started
  return (label) => {
    if (process.env.MB_SCAN_DEBUG) process.stderr.write(`[scan] ${label}: ${((performance.now() - since) / 1000).toFixed(2)} s\n`)
    since = performance.now()
  }
}

function secondsSince(started: number): number {
  return Math.round((performance.now() - started) / 10) / 100
}

/** One reconciliation under way: what it replaces and where its listing lies. */
interface Pass {
  mirror: ReconcileMirror
  /** Origin subtree the scan replaces ('' = all). */
  scope: string
  /** False: only the files directly in the folder `scope`. */
  recursive: boolean
  /** Session temp table holding the listing (one row per listed file in scope). */
  table: string
  phase: (label: string) => void
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
  const scope = options.plan?.scope ?? ''
  const recursive = options.plan?.recursive ?? true
  const filter = pathFilter([options.include ?? [], mirror.include_patterns ?? []], [...(options.exclude ?? []), ...(mirror.exclude_patterns ?? [])])
  const busy = (): never => {
    throw new MbError(`Mirror ${mirror.identifier} is being scanned by another process right now; this scan was refused. Wait for it to finish and try again.`, {code: 'SCAN_BUSY'})
  }
  return database.session((session) =>
    session.withLock(
      scanLock(mirror.id),
      () =>
        withListingTable(session.db, mirror.id, async (table) => {
          const pass: Pass = {mirror, scope, recursive, table, phase: phaseClock(started)}
          const links = await readLinks(session.db)
          const listed = await loadListing(session.db, pass, entries, filter, (path) => underDirectoryLink(links, path), options.onProgress)
          pass.phase('listing into temp table')
          await sql`ANALYZE ${sql.id(table)}`.execute(session.db)
          const applied = await session.transaction((trx) => applyListing(trx, pass, listed.files, options, started))
          return {mirror: mirror.identifier, protocol: options.protocol, subdir: scope, ...listed, ...applied, seconds: secondsSince(started)}
        }),
      busy,
    ),
  )
}

/** Creates the session temp table a listing streams into, runs `fn` with its name, and drops it. */
async function withListingTable<T>(db: Kysely<DB>, mirrorId: number, fn: (table: string) => Promise<T>): Promise<T> {
  const table = `mb_scan_${mirrorId}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`
  await sql`CREATE TEMP TABLE ${sql.id(table)} (path text COLLATE "C" NOT NULL, size bigint NOT NULL, mtime bigint, prec integer, smin bigint, smax bigint)`.execute(db)
  try {
    return await fn(table)
  } finally {
    await sql`DROP TABLE IF EXISTS ${sql.id(table)}`.execute(db).catch(() => {})
  }
}

/** Listing rows not yet inserted, by column, for one `unnest` insert. */
class ListingBatch {
  paths: string[] = []
  sizes: number[] = []
  mtimes: Array<number | null> = []
  precs: Array<number | null> = []
  // A listing that shows rounded sizes (Apache's 1.2K) gives the range the exact size lies in.
  smins: Array<number | null> = []
  smaxs: Array<number | null> = []

  add(path: string, entry: ListingEntry): void {
    this.paths.push(path)
    this.sizes.push(entry.size)
    this.mtimes.push(entry.mtime === undefined ? null : Math.floor(entry.mtime))
    this.precs.push(entry.mtime === undefined ? null : Math.max(1, Math.round(entry.mtimePrecision ?? 1)))
    const ranged = entry.sizeApproximate && entry.sizeMin !== undefined && entry.sizeMax !== undefined
    this.smins.push(ranged ? entry.sizeMin! : null)
    this.smaxs.push(ranged ? entry.sizeMax! : null)
  }

  async insertInto(db: Kysely<DB>, table: string): Promise<void> {
    if (this.paths.length === 0) return
    await sql`INSERT INTO ${sql.id(table)} SELECT * FROM unnest(${this.paths}::text[], ${this.sizes}::bigint[], ${this.mtimes}::bigint[], ${this.precs}::int[], ${this.smins}::bigint[], ${this.smaxs}::bigint[])`.execute(
      db,
    )
  }
}

/**
 * Streams the listing's files that lie in the scope and pass `filter` into the pass's table,
 * mapped to origin paths. A file listed through one of the origin's directory symlinks
 * (`linked`: `latest/…` of `latest -> 16.0`, which an HTTP or FTP listing follows) is the
 * target's file seen again: it is neither counted nor compared. Nothing visible changes.
 * @returns files listed (each once), and those of them considered (in scope, through the filter)
 */
async function loadListing(
  db: Kysely<DB>,
  pass: Pass,
  entries: AsyncIterable<ListingEntry>,
  filter: (path: string) => boolean,
  linked: (path: string) => boolean,
  onProgress?: (entries: number) => void,
): Promise<{files: number; considered: number}> {
  const {mirror} = pass
  let files = 0
  let considered = 0
  let seen = 0
  let batch = new ListingBatch()
  for await (const entry of entries) {
    seen++
    if (onProgress && seen % 5000 === 0) onProgress(seen)
    if (entry.type !== 'file') continue
    const path = toOriginPath(mirror.base_path, entry.path)
    if (path !== undefined && linked(path)) continue
    files++
    if (path === undefined || !pathInPlan(pass, path) || !filter(path)) continue
    considered++
    batch.add(path, entry)
    if (batch.paths.length >= BATCH) {
      await batch.insertInto(db, pass.table)
      batch = new ListingBatch()
    }
  }
  await batch.insertInto(db, pass.table)
  onProgress?.(seen)
  return {files, considered}
}

/** What the transaction of {@link applyListing} found and changed. */
type Applied = Pick<ReconcileResult, 'previous' | 'matched' | 'stale' | 'missing' | 'added' | 'removed' | 'enabled' | 'enabledByScan'>

/**
 * In the caller's transaction: compares the listing with the origin index and, unless the
 * min_ratio check refuses it, replaces the mirror's file set and stale records in the scope
 * and records the scan on the mirror.
 * @param files  files in the listing (recorded as `last_scan_files`)
 * @throws MbError SCAN_TOO_FEW (the caller's transaction then rolls back)
 */
async function applyListing(trx: Kysely<DB>, pass: Pass, files: number, options: ReconcileOptions, started: number): Promise<Applied> {
  const M = pass.mirror.id
  const previous = await countHeld(trx, M, pass)
  const matchTable = `${pass.table}_m`
  await createMatchTable(trx, pass.table, matchTable)
  pass.phase('match table')
  const tally = await sql<{matched: number; stale: number}>`
    SELECT count(*) FILTER (WHERE ok)::int AS matched, count(*) FILTER (WHERE NOT ok)::int AS stale FROM ${sql.id(matchTable)}`.execute(trx)
  const {matched, stale} = tally.rows[0]
  const minRatio = options.minRatio ?? 0.5
  if (previous > 0 && matched < minRatio * previous) {
    throw new MbError(
      `Scan of ${pass.mirror.identifier} matched only ${matched} file(s) where it matched ${previous} before (less than scan.min_ratio ${minRatio}); nothing was changed. If the mirror really lost them, lower scan.min_ratio for this run.`,
      {code: 'SCAN_TOO_FEW'},
    )
  }
  const {added, removed} = await updateMirrorSets(trx, pass, matchTable)
  await replaceStaleRows(trx, M, pass, matchTable)
  await dropChangedBadCopies(trx, M, pass, matchTable)
  // The scan decides about copies a sync trace vouched for (src/lib/probe/trust.ts): kept above when listed, taken out when not.
  await sql`DELETE FROM mirror_file_trace t USING file f WHERE t.mirror_id = ${M}::smallint AND f.id = t.file_id AND ${inPlan(pass, 'f.path')}`.execute(trx)
  pass.phase('stale rows')
  const originInScope = await countInScope(trx, {scope: carriedScope(pass.mirror.base_path, pass.scope), recursive: pass.recursive})
  // Enabling a mirror takes a tree scan: one folder says little about the rest of it.
  const enabledByScan = Boolean(options.enable && matched > 0 && pass.recursive)
  if (pass.recursive) await recordScan(trx, pass, files, matched, options.protocol, enabledByScan, started)
  pass.phase('counts')
  // The mirror's real state, for `--json` and the caller (not only whether this scan enabled it).
  const {enabled} = await trx.selectFrom('mirror').select('enabled').where('id', '=', M).executeTakeFirstOrThrow()
  return {previous, matched, stale, missing: Math.max(0, originInScope - matched - stale), added, removed, enabled, enabledByScan}
}

/** Records a successful tree scan on the mirror (its time, protocol, counts), clearing the marks a scan settles. */
async function recordScan(trx: Kysely<DB>, pass: Pass, files: number, matched: number, protocol: string, enabled: boolean, started: number): Promise<void> {
  const M = pass.mirror.id
  const total = pass.scope ? await countHeld(trx, M, {scope: '', recursive: true}) : matched
  await sql`
    UPDATE mirror SET last_scan_at = now(), last_scan_ok_at = now(), last_scan_error = NULL,
      last_scan_protocol = ${protocol}, last_scan_files = ${files}::int, last_scan_matched = ${total}::int,
      last_scan_seconds = ${secondsSince(started)}::float8, needs_rescan = false, scan_refused_at = NULL, url_changed_at = NULL
      ${enabled ? sql`, enabled = true` : sql``}
    WHERE id = ${M}::smallint`.execute(trx)
}

type PlanScope = Pick<ScanScope, 'scope' | 'recursive'>

/** Files in the plan's scope that mirror `M` holds. */
async function countHeld(trx: Kysely<DB>, M: number, plan: PlanScope): Promise<number> {
  return (await sql<{n: number}>`SELECT count(*)::int AS n FROM file WHERE ${M}::smallint = ANY(mirrors) AND ${inPlan(plan)}`.execute(trx)).rows[0].n
}

/** Files in the plan's scope. */
async function countInScope(trx: Kysely<DB>, plan: PlanScope): Promise<number> {
  return (await sql<{n: number}>`SELECT count(*)::int AS n FROM file WHERE ${inPlan(plan)}`.execute(trx)).rows[0].n
}

/** The origin subtree the mirror can hold in the scan's scope: the deeper of the scope and its base path (planScope made sure they overlap). */
function carriedScope(basePath: string, scope: string): string {
  const base = trimSlashes(basePath ?? '')
  return !scope ? base : !base ? scope : scope.length >= base.length ? scope : base
}

/**
 * Builds the transaction's temp table `matchTable` from the listing in `table`: one row per
 * origin file listed, with ok = same size (or inside the listed range) and mtime equal within
 * the listing's precision or off by whole hours (up to ±14 h).
 */
async function createMatchTable(trx: Kysely<DB>, table: string, matchTable: string): Promise<void> {
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
}

/**
 * Takes the mirror out of the sets of the files in scope it no longer holds as matched, and
 * puts it into the sets of the matched files it was missing from, except where a content
 * check found its copy of that version corrupt (`mirror_file_bad`, src/lib/probe/content.ts):
 * a listing with the same size and mtime says nothing new about the bytes. These bulk updates stamp
 * `txid` themselves, as docs/change-tracking.md requires, so the row trigger stays out of them.
 */
async function updateMirrorSets(trx: Kysely<DB>, pass: Pass, matchTable: string): Promise<{added: number; removed: number}> {
  const M = pass.mirror.id
  const removed = await sql`
    UPDATE file SET mirrors = array_remove(mirrors, ${M}::smallint), txid = pg_current_xact_id()
    WHERE ${M}::smallint = ANY(mirrors) AND ${inPlan(pass)}
      AND NOT EXISTS (SELECT 1 FROM ${sql.id(matchTable)} m WHERE m.id = file.id AND m.ok)`.execute(trx)
  pass.phase('remove from sets')
  const added = await sql`
    UPDATE file SET mirrors = array_append(mirrors, ${M}::smallint), txid = pg_current_xact_id()
    FROM ${sql.id(matchTable)} m
    WHERE file.id = m.id AND m.ok AND NOT (${M}::smallint = ANY(file.mirrors))
      AND NOT EXISTS (SELECT 1 FROM mirror_file_bad b WHERE b.mirror_id = ${M}::smallint AND b.file_id = file.id AND b.size = file.size AND b.mtime = file.mtime)`.execute(trx)
  pass.phase('add to sets')
  return {added: Number(added.numAffectedRows ?? 0), removed: Number(removed.numAffectedRows ?? 0)}
}

/** Replaces the mirror's stale records in scope by the listed files that did not match. */
async function replaceStaleRows(trx: Kysely<DB>, M: number, plan: PlanScope, matchTable: string): Promise<void> {
  await sql`
    DELETE FROM mirror_file_stale s USING file f
    WHERE s.mirror_id = ${M}::smallint AND f.id = s.file_id AND ${inPlan(plan, 'f.path')}`.execute(trx)
  await sql`
    INSERT INTO mirror_file_stale (mirror_id, file_id, size, mtime)
    SELECT ${M}::smallint, id, size, mtime FROM ${sql.id(matchTable)} WHERE NOT ok`.execute(trx)
}

/**
 * Drops the mirror's corrupt-copy records in scope that this listing no longer bears out: the
 * copy is listed at another size or mtime, is not listed, or the origin holds another version
 * by now. The copy is then judged as any other by the sets above and by later content checks.
 */
async function dropChangedBadCopies(trx: Kysely<DB>, M: number, plan: PlanScope, matchTable: string): Promise<void> {
  await sql`
    DELETE FROM mirror_file_bad b USING file f
    WHERE b.mirror_id = ${M}::smallint AND f.id = b.file_id AND ${inPlan(plan, 'f.path')}
      AND NOT (b.size = f.size AND b.mtime = f.mtime AND EXISTS (SELECT 1 FROM ${sql.id(matchTable)} m WHERE m.id = f.id AND m.ok))`.execute(trx)
}

/**
 * Records a failed scan on the mirror (last_scan_at, last_scan_error, last_scan_protocol) and
 * nothing else: its file set and stale records stay as they were. A scan the safety check
 * refused (`refused`, error SCAN_TOO_FEW) also makes the mirror suspect (`scan_refused_at`),
 * which keeps it out of selection (reason `scan_refused`) until a successful scan or
 * `mb mirror edit NAME --trust-scan`: the earlier file set is kept, but the mirror's tree no
 * longer looks like it.
 * @param reason  operator-facing message (credentials already redacted)
 */
export async function recordScanFailure(db: Kysely<DB>, mirrorId: number, reason: string, protocol: string | null, refused = false): Promise<void> {
  await sql`UPDATE mirror SET last_scan_at = now(), last_scan_error = ${reason.slice(0, 2000)}, last_scan_protocol = ${protocol}
    ${refused ? sql`, scan_refused_at = now()` : sql``}
    WHERE id = ${mirrorId}::smallint`.execute(db)
}
