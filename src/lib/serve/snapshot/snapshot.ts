/**
 * The in-memory snapshot `mb serve` answers from: compiled mirrors, and origin path ->
 * {size, mtime, mirror set, hashes}. The hot path only reads it; it never waits on the
 * database.
 *
 * Loading: one REPEATABLE READ transaction reads all mirrors and streams the `file` table in
 * id-ordered batches (keyset pagination), with `array_to_string(mirrors, ',')` parsed by hand
 * and interned into shared Int16Array chunks (files on the same mirrors share one subarray
 * view, {@link MirrorSetPool}), the digests stored as bytes ({@link DigestArena}), and each
 * file's fields kept in columns by slot ({@link FileMap}) behind a table of its path's bytes
 * (./path-table.ts), so millions of files stay compact and are not heap objects. Batches
 * are small enough that a batch's rows die young (in V8's new space).
 *
 * Incremental refresh: first one statement that tells whether anything changed since the
 * previous refresh (./marks.ts), outside any transaction; when something did, the rows that
 * the previous refresh's transaction snapshot could not see (by their `txid`), plus the paths
 * tombstoned since, as docs/change-tracking.md sets out. Mirrors, rules and bad copies (a
 * few hundred rows) are then re-read whole; the origin's symlinks (`file_link`, a small
 * table) when they changed.
 */
import {sql} from 'kysely'
import type {Database, ReadView} from '../../db/index.js'
import type {MirrorRow} from '../../db/schema.js'
import {compileMirror, MirrorTable} from '../../select/mirror.js'
import type {SelectMirror} from '../../select/types.js'
import {HASHES_MATCH_VERSION_SQL} from '../../origin/freshness.js'
import {compileRules, NO_RULES, RULES_SQL, type RuleSet, ruleFromJson} from '../../rules/rule.js'
import {type LinkTarget, resolveLinks} from '../../origin/links.js'
import {type FileEntry, FORMAT_SHA256_PIECES, FORMAT_TORRENT, FORMAT_ZSYNC, DigestArena} from './file-entry.js'
import {FileMap, yieldToEventLoop} from './file-map.js'
import {MirrorSetPool} from './mirror-sets.js'
import {snapshotBounds, unseenCondition} from './unseen.js'
import {changedSince, readMarks, type StatementRunner, type TableCounts} from './marks.js'

/** Rows per keyset batch. */
const BATCH_ROWS = 5_000

/** A consistent picture of mirrors and files. Replaced wholesale on a full load. */
export class Snapshot {
  readonly files = new FileMap()
  /** Compiled mirrors by id: read-only once built; a refresh assigns a new table. */
  mirrors: MirrorTable = new MirrorTable()
  /** The enabled redirect rules (src/lib/rules), compiled against `mirrors`; replaced with them. */
  rules: RuleSet = NO_RULES
  /** Where the files' mirror sets live (interned). */
  readonly mirrorSets = new MirrorSetPool()
  /** Where the files' digests live. */
  readonly digests = new DigestArena()
  /** The last refresh's transaction snapshot (`pg_snapshot` text, `xmin:xmax:xip,...`). */
  xmin: string | null = null
  /** Row counts of the tables re-read whole, as `xmin` saw them (./marks.ts compares them). */
  counts: TableCounts = {mirrors: 0, rules: 0, links: 0, badCopies: 0}
  /** Unix ms (UTC) of the last successful load or refresh. */
  refreshedAt = 0
  /** File rows replaced since the full load (their old digest records, and mirror sets no other file shares, are garbage). */
  churn = 0
  /** The origin's symlinks (`file_link`): link path → canonical target. Replaced whole when it changes. */
  links: ReadonlyMap<string, LinkTarget> = new Map()
  /** Paths of the copies content checks found corrupt, by mirror id (re-read with the mirrors on every change; {@link readBadCopies}). */
  badCopies: ReadonlyMap<number, readonly string[]> = new Map()

  /**
   * The mirrors of `ids` less those with a copy under `prefix` (a directory ending in '/', or
   * '') that content checks found corrupt: the lists of a whole repository or archive (apt's
   * `mirrors.txt`, dnf's repo metalinks and mirror lists) leave such a mirror out, since apt
   * stops at a hash mismatch and dnf downloads the bad copy before it tries the next mirror. A
   * copy cleared by a later check brings the mirror back at the next refresh.
   */
  withoutBadCopiesUnder(ids: Iterable<number>, prefix: string): Int16Array {
    const kept: number[] = []
    for (const id of ids) if (!this.hasBadCopyUnder(id, prefix)) kept.push(id)
    return Int16Array.from(kept)
  }

  /** True when content checks found a copy on mirror `id` corrupt at a path starting with `prefix`. */
  hasBadCopyUnder(id: number, prefix: string): boolean {
    const paths = this.badCopies.get(id)
    return paths?.some((path) => path.startsWith(prefix)) === true
  }

  /**
   * The indexed file at `path`, or else, when links lie on `path`, the indexed file at its
   * canonical path (origin/links.ts). Links are looked at only on a miss, so a request for an
   * indexed path pays nothing for them.
   */
  lookup(path: string): FileEntry | undefined {
    const entry = this.files.get(path)
    if (entry !== undefined || this.links.size === 0) return entry
    const canonical = resolveLinks(this.links, path)
    return canonical === undefined ? undefined : this.files.get(canonical)
  }
}

function str(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value)
}

function fileFromRow(snapshot: Snapshot, row: unknown[]): FileEntry {
  // id, path, size, mtime, mirrors, md5, sha1, sha256, signature, formats
  return snapshot.digests.entry(
    {path: row[1] as string, size: Number(row[2]), mtime: Number(row[3]), mirrors: snapshot.mirrorSets.fromText(row[4] as string | null), signature: str(row[8]), formats: Number(row[9])},
    str(row[5]),
    str(row[6]),
    str(row[7]),
  )
}

// Hashes only while they describe the row's version (origin/freshness.ts).
const FRESH = HASHES_MATCH_VERSION_SQL
const FORMATS = `CASE WHEN ${FRESH} THEN (CASE WHEN sha1_pieces IS NOT NULL THEN ${FORMAT_TORRENT} ELSE 0 END) + (CASE WHEN zsync_block_size IS NOT NULL THEN ${FORMAT_ZSYNC} ELSE 0 END) + (CASE WHEN piece_hash = 'sha256' AND pieces IS NOT NULL THEN ${FORMAT_SHA256_PIECES} ELSE 0 END) ELSE 0 END`
const FILE_COLUMNS = `id, path, size, mtime, array_to_string(mirrors, ','), CASE WHEN ${FRESH} THEN md5 END, CASE WHEN ${FRESH} THEN sha1 END, CASE WHEN ${FRESH} THEN sha256 END, signature, ${FORMATS}`

async function readMirrors(view: ReadView): Promise<MirrorTable> {
  const result = await view.query(`SELECT row_to_json(m)::text FROM mirror m ORDER BY id`)
  const compiled: SelectMirror[] = []
  for (const [json] of result) {
    const row = JSON.parse(json as string) as MirrorRow
    for (const key of ['status_changed_at', 'last_scan_at', 'last_scan_ok_at', 'created_at', 'updated_at'] as const) {
      if (row[key]) (row as unknown as Record<string, unknown>)[key] = new Date(row[key] as unknown as string)
    }
    compiled.push(compileMirror(row))
  }
  return new MirrorTable(compiled)
}

/** Bad copies read per refresh at most: a mirror with more is suspect long before (`probe.suspect_bad_copies`). */
const BAD_COPIES_READ = 10_000

/**
 * The copies content checks found corrupt at the files' current versions (`mirror_file_bad`,
 * as `mb mirror show` counts them): paths by mirror id. Few rows (a mirror with many is
 * suspect and out of selection), re-read like the mirrors whenever anything changed: the bad
 * rows first, then their files by primary key, so that a network without bad copies reads
 * no file row here.
 */
async function readBadCopies(view: ReadView): Promise<{byMirror: Map<number, string[]>; rows: number}> {
  const byMirror = new Map<number, string[]>()
  const bad = await view.query(`SELECT mirror_id, file_id, size, mtime FROM mirror_file_bad LIMIT ${BAD_COPIES_READ}`)
  const rows = bad.length < BAD_COPIES_READ ? bad.length : Number((await view.query('SELECT count(*)::int FROM mirror_file_bad'))[0][0])
  if (bad.length === 0) return {byMirror, rows}
  const files = new Map<number, {path: string; version: string}>()
  const ids = `{${[...new Set(bad.map((row) => Number(row[1])))].join(',')}}`
  for (const [id, path, size, mtime] of await view.query(`SELECT id, path, size, mtime FROM file WHERE id = ANY($1::int[])`, [ids])) {
    files.set(Number(id), {path: path as string, version: `${size}/${mtime}`})
  }
  for (const [mirror, fileId, size, mtime] of bad) {
    const file = files.get(Number(fileId))
    if (file === undefined || file.version !== `${size}/${mtime}`) continue // a copy of an older version
    const paths = byMirror.get(Number(mirror))
    if (paths) paths.push(file.path)
    else byMirror.set(Number(mirror), [file.path])
  }
  return {byMirror, rows}
}

/** Reads every redirect rule (a handful of rows, re-read like the mirrors by every refresh that found a change) and compiles them against `mirrors`; `rows`: how many there are. */
async function readRules(view: ReadView, mirrors: MirrorTable): Promise<{rules: RuleSet; rows: number}> {
  const rows = await view.query(RULES_SQL)
  const rules = compileRules(
    rows.map(([json]) => ruleFromJson(json as string)),
    mirrors,
  )
  return {rules, rows: rows.length}
}

/** Every row of `file_link`, as the snapshot holds them. */
async function readLinkRows(view: ReadView): Promise<Map<string, LinkTarget>> {
  const links = new Map<string, LinkTarget>()
  for (const [path, target, directory] of await view.query(`SELECT path, target, directory FROM file_link`)) links.set(path as string, {target: target as string, directory: Boolean(directory)})
  return links
}

/** The tables a load or refresh reads whole, and their row counts as its view saw them. */
interface WholeTables {
  mirrors: MirrorTable
  rules: RuleSet
  badCopies: Map<number, string[]>
  /** Undefined when `file_link` did not change (keep the snapshot's). */
  links: Map<string, LinkTarget> | undefined
  counts: TableCounts
}

/**
 * Reads the mirrors, the rules and the bad copies, and the links when they changed since the
 * snapshot `unseen` tells of ({@link unseenCondition}; null: read them) or their row count
 * differs from `knownLinks`. The counts come from the rows read, so that a refresh that
 * found a change costs no statement more for them.
 */
async function readWholeTables(view: ReadView, unseen: string | null, knownLinks: number): Promise<WholeTables> {
  const mirrors = await readMirrors(view)
  const rules = await readRules(view, mirrors)
  const bad = await readBadCopies(view)
  let links: Map<string, LinkTarget> | undefined
  let linkRows = knownLinks
  if (unseen === null) links = await readLinkRows(view)
  else {
    const [[count, newer]] = await view.query(`SELECT count(*)::int, coalesce(bool_or(${unseen}), false) FROM file_link`)
    if (newer || Number(count) !== knownLinks) links = await readLinkRows(view)
  }
  if (links !== undefined) linkRows = links.size
  return {mirrors, rules: rules.rules, badCopies: bad.byMirror, links, counts: {mirrors: mirrors.size, rules: rules.rows, links: linkRows, badCopies: bad.rows}}
}

async function currentXmin(view: ReadView): Promise<string> {
  const [[snapshot]] = await view.query(`SELECT pg_current_snapshot()::text`)
  return snapshot as string
}

/**
 * One statement outside any transaction, on a pooled connection: the poll of
 * {@link refreshSnapshot} (a single round trip; a read view would add its BEGIN and COMMIT).
 */
function singleStatements(database: Database): StatementRunner {
  return {
    async query(text) {
      const result = await sql.raw<Record<string, unknown>>(text).execute(database.db)
      return result.rows.map((row) => Object.values(row))
    },
  }
}

/** Reads the files with lo < id <= hi in keyset batches into `snapshot`. */
async function readFileRange(view: ReadView, snapshot: Snapshot, lo: number, hi: number, onProgress?: (files: number) => void): Promise<void> {
  let lastId = lo
  for (;;) {
    const rows = await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${BATCH_ROWS}`, [lastId, hi])
    for (const row of rows) {
      const entry = fileFromRow(snapshot, row)
      snapshot.files.set(entry.path, entry)
    }
    if (rows.length === 0) break
    lastId = Number(rows.at(-1)![0])
    onProgress?.(snapshot.files.size)
    if (rows.length < BATCH_ROWS) break
  }
}

/**
 * Reads a complete snapshot in one consistent view. With more than 200,000 files, the id range
 * is read in two halves through {@link ReadView.parallel}: on PostgreSQL the server then
 * produces one half while this process parses the other.
 * @param onProgress called after each batch with the number of files read so far
 * @throws whatever the database driver throws (unreachable, schema missing)
 */
export async function loadSnapshot(database: Database, onProgress?: (files: number) => void): Promise<Snapshot> {
  const snapshot = new Snapshot()
  await database.readSnapshot(async (view) => {
    snapshot.xmin = await currentXmin(view)
    const whole = await readWholeTables(view, null, 0)
    snapshot.mirrors = whole.mirrors
    snapshot.rules = whole.rules
    snapshot.badCopies = whole.badCopies
    snapshot.links = whole.links!
    snapshot.counts = whole.counts
    const [[minId, maxId, count]] = await view.query(`SELECT coalesce(min(id), 0), coalesce(max(id), 0), count(*)::int FROM file`)
    const lo = Number(minId) - 1
    const hi = Number(maxId)
    snapshot.files.reserve(Number(count))
    if (Number(count) < 200_000) return readFileRange(view, snapshot, lo, hi, onProgress)
    const mid = Math.floor((lo + hi) / 2)
    await view.parallel([(half) => readFileRange(half, snapshot, lo, mid, onProgress), (half) => readFileRange(half, snapshot, mid, hi, onProgress)])
  })
  snapshot.files.counts.settle() // so that the first overview of the tree, and the first mirror page's folder order, are lookups too
  snapshot.refreshedAt = Date.now()
  return snapshot
}

/** What one incremental refresh changed. */
export interface RefreshResult {
  mirrors: number
  updated: number
  deleted: number
  /** Too many rows changed for an incremental refresh: nothing was applied, reload in full. */
  reload?: boolean
}

/** Changed file rows read and parsed per slice of a refresh, between yields to the event loop. */
const REFRESH_SLICE_ROWS = 2_000

/**
 * Applies the changes committed since the snapshot's xmin. First one statement, outside any
 * transaction, tells whether anything changed ({@link readMarks}); when nothing did, that is
 * all, and the snapshot takes that statement's transaction snapshot as its own (`notified`:
 * a notification said that something did, so that statement is left out). Otherwise,
 * in one read view: all mirrors, rules and bad copies are re-read, changed file rows replace
 * their entries, tombstoned paths are dropped (tombstones first, then rows, so a
 * delete-then-recreate ends with the file present).
 *
 * A large change set must neither block the event loop nor show readers half of it. The
 * changed rows are read and parsed aside, {@link REFRESH_SLICE_ROWS} at a time with a yield
 * to the event loop before each slice (requests are answered meanwhile, from the unchanged
 * snapshot); then {@link FileMap.applyChangeSet} publishes the whole set at once, with the
 * new mirror table, and merges it in slices, so a request sees every change of the set or
 * none, and no request waits for more than a slice.
 * @throws whatever the database driver throws; the snapshot is then unchanged
 */
export async function refreshSnapshot(database: Database, snapshot: Snapshot, options: {notified?: boolean} = {}): Promise<RefreshResult> {
  const since = snapshot.xmin ?? '1:1:'
  if (!options.notified) {
    const poll = await readMarks(singleStatements(database), since)
    if (!changedSince(poll, snapshot.counts)) {
      // Nothing that statement could see is newer than `since`: its snapshot is as good a base.
      snapshot.xmin = poll.snapshot
      snapshot.refreshedAt = Date.now()
      return {mirrors: snapshot.mirrors.size, updated: 0, deleted: 0}
    }
  }
  const changes = await database.readSnapshot((view) => readChanges(view, since, Math.max(50_000, snapshot.files.size / 10), snapshot))
  if (!changes) {
    snapshot.churn = Number.POSITIVE_INFINITY // the keeper reloads in full
    return {mirrors: 0, updated: 0, deleted: 0, reload: true}
  }
  // Applied after the transaction, so a failed read changes nothing.
  const result: RefreshResult = {mirrors: changes.mirrors.size, updated: changes.entries.length, deleted: 0}
  result.deleted = await snapshot.files.applyChangeSet(changes.tombstones, changes.entries, () => {
    snapshot.mirrors = changes.mirrors
    snapshot.rules = changes.rules
    snapshot.badCopies = changes.badCopies
    if (changes.links !== undefined) snapshot.links = changes.links
    snapshot.xmin = changes.xmin
    snapshot.counts = changes.counts
  })
  snapshot.churn += result.updated
  snapshot.refreshedAt = Date.now()
  return result
}

/** What changed since a transaction snapshot, read in one view. */
interface Changes {
  /** This view's own transaction snapshot, the next refresh's `since`. */
  xmin: string
  /** The row counts this view saw. */
  counts: TableCounts
  mirrors: MirrorTable
  rules: RuleSet
  badCopies: Map<number, string[]>
  /** All links, when `file_link` changed since (else undefined: keep the snapshot's). */
  links: Map<string, LinkTarget> | undefined
  /** Paths deleted since, to drop before applying `entries`. */
  tombstones: string[]
  /** Changed files, parsed (their mirror sets and digests in the snapshot's pools), not yet in its map. */
  entries: FileEntry[]
}

/**
 * Reads the mirrors and the file rows and tombstones that the transaction snapshot `since`
 * (`pg_snapshot` text) could not see, parsed into `snapshot`'s mirror-set pool and digest
 * arena (its map is left as it is; `snapshot.links.size` tells whether the links changed).
 *
 * Its cost follows the change, never the size of `file`: the bounds are literals
 * ({@link unseenCondition}) and sequential scans are off for this transaction's file
 * queries, so `file` and `file_tombstone` are read through their txid indexes whatever the
 * statistics say (missing, stale, or one txid for every row). An idle refresh reads no file
 * row. A set of at most {@link REFRESH_SLICE_ROWS} rows is one query; a larger one reads the
 * changed ids first (from the txid index) and then the rows by primary key, that many at a
 * time, with a yield to the event loop before each page.
 * @returns null when more than `limit` file rows changed (the caller reloads in full instead)
 */
async function readChanges(view: ReadView, since: string, limit: number, snapshot: Snapshot): Promise<Changes | null> {
  const unseen = unseenCondition(snapshotBounds(since))
  const xmin = await currentXmin(view)
  const whole = await readWholeTables(view, unseen, snapshot.counts.links)
  // Ends with the transaction. Every file query below has its txid index to go by.
  await view.query('SET LOCAL enable_seqscan = off')
  const tombstones = (await view.query(`SELECT path FROM file_tombstone WHERE ${unseen}`)).map(([path]) => path as string)
  const [[count]] = await view.query(`SELECT count(*)::int FROM file WHERE ${unseen}`)
  if (Number(count) > limit) return null
  const entries: FileEntry[] = []
  if (Number(count) <= REFRESH_SLICE_ROWS) {
    const rows = Number(count) > 0 ? await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE ${unseen}`) : []
    for (const row of rows) entries.push(fileFromRow(snapshot, row))
  } else {
    // On the embedded store a query runs on this event loop: short pages keep it free.
    const ids = (await view.query(`SELECT id FROM file WHERE ${unseen}`)).map(([id]) => Number(id))
    for (let at = 0; at < ids.length; at += REFRESH_SLICE_ROWS) {
      await yieldToEventLoop()
      const page = `{${ids.slice(at, at + REFRESH_SLICE_ROWS).join(',')}}`
      for (const row of await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id = ANY($1::int[])`, [page])) entries.push(fileFromRow(snapshot, row))
    }
  }
  return {xmin, ...whole, tombstones, entries}
}
