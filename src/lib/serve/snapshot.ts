/**
 * The in-memory snapshot `mb serve` answers from: compiled mirrors, and origin path ->
 * {size, mtime, mirror set, hashes}. The hot path only reads it; it never waits on the
 * database.
 *
 * Loading: one REPEATABLE READ transaction reads all mirrors and streams the `file` table in
 * id-ordered batches (keyset pagination), with `array_to_string(mirrors, ',')` parsed by hand
 * straight into shared Int16Array chunks (a file's mirror set is a subarray view), so
 * 1,000,000 files x 200 mirrors stay compact.
 *
 * Incremental refresh: rows that the previous refresh's transaction snapshot could not see
 * (by their `txid`), plus the paths tombstoned since, as docs/change-tracking.md sets out.
 * Mirrors (a few hundred rows) are reloaded every time.
 */
import type {Database, ReadView} from '../db/index.js'
import type {MirrorRow} from '../db/schema.js'
import {compileMirror, MirrorTable} from '../select/mirror.js'
import type {SelectFile, SelectMirror} from '../select/types.js'
import {HASHES_MATCH_VERSION_SQL} from '../origin/freshness.js'

/** One origin file as the snapshot holds it. Size in bytes, mtime in Unix seconds (UTC). */
export interface FileEntry extends SelectFile {
  path: string
  size: number
  mtime: number
  /** Ids of the mirrors holding this exact version (a view into a shared chunk). */
  mirrors: Int16Array
  /** Hex digests from the index, null when not hashed (for metalinks and hash routes). */
  md5: string | null
  sha1: string | null
  sha256: string | null
}

const CHUNK_ENTRIES = 1 << 20
const EMPTY = new Int16Array(0)
/** Rows per keyset batch. */
const BATCH_ROWS = 20_000

/**
 * Allocates mirror-id sets out of large shared Int16Array chunks (no per-file ArrayBuffer).
 * Slots of replaced sets are not reused; `wasted` counts them so the owner can reload.
 */
export class MirrorSetPool {
  private chunk = new Int16Array(CHUNK_ENTRIES)
  private used = 0
  /** Entries allocated in total, in int16 slots. */
  allocated = 0

  /**
   * Parses `array_to_string(mirrors, ',')` output (`"3,17,42"`, or '' / null for none) into
   * a view. Non-digit characters other than ',' are ignored.
   */
  fromText(text: string | null): Int16Array {
    if (!text) return EMPTY
    let n = 1
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 44) n++
    const view = this.take(n)
    let k = 0
    let value = 0
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c === 44) {
        view[k++] = value
        value = 0
      } else if (c >= 48 && c <= 57) {
        value = value * 10 + (c - 48)
      }
    }
    view[k] = value
    return view
  }

  /** Copies a list of ids into a view. */
  fromArray(ids: ArrayLike<number>): Int16Array {
    if (ids.length === 0) return EMPTY
    const view = this.take(ids.length)
    for (let i = 0; i < ids.length; i++) view[i] = ids[i]
    return view
  }

  private take(n: number): Int16Array {
    if (this.used + n > this.chunk.length) {
      this.chunk = new Int16Array(Math.max(CHUNK_ENTRIES, n))
      this.used = 0
    }
    const view = this.chunk.subarray(this.used, this.used + n)
    this.used += n
    this.allocated += n
    return view
  }
}

/** A consistent picture of mirrors and files. Replaced wholesale on a full load. */
export class Snapshot {
  readonly files = new Map<string, FileEntry>()
  /** Compiled mirrors by id: read-only once built; a refresh assigns a new table. */
  mirrors: MirrorTable = new MirrorTable()
  /** Where the files' mirror sets live. */
  readonly mirrorSets = new MirrorSetPool()
  /** The last refresh's transaction snapshot (`pg_snapshot` text, `xmin:xmax:xip,...`). */
  xmin: string | null = null
  /** Unix ms (UTC) of the last successful load or refresh. */
  refreshedAt = 0
  /** File rows replaced since the full load (their old mirror slots are garbage). */
  churn = 0
}

function str(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value)
}

function fileFromRow(sets: MirrorSetPool, row: unknown[]): FileEntry {
  // id, path, size, mtime, mirrors, md5, sha1, sha256
  return {
    path: row[1] as string,
    size: Number(row[2]),
    mtime: Number(row[3]),
    mirrors: sets.fromText(row[4] as string | null),
    md5: str(row[5]),
    sha1: str(row[6]),
    sha256: str(row[7]),
  }
}

// Hashes only while they describe the row's version (origin/freshness.ts).
const FRESH = HASHES_MATCH_VERSION_SQL
const FILE_COLUMNS = `id, path, size, mtime, array_to_string(mirrors, ','), CASE WHEN ${FRESH} THEN md5 END, CASE WHEN ${FRESH} THEN sha1 END, CASE WHEN ${FRESH} THEN sha256 END`

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

async function currentXmin(view: ReadView): Promise<string> {
  const [[snapshot]] = await view.query(`SELECT pg_current_snapshot()::text`)
  return snapshot as string
}

/** Reads the files with lo < id <= hi in keyset batches into `snapshot`. */
async function readFileRange(view: ReadView, snapshot: Snapshot, lo: number, hi: number, onProgress?: (files: number) => void): Promise<void> {
  let lastId = lo
  for (;;) {
    const rows = await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${BATCH_ROWS}`, [lastId, hi])
    for (const row of rows) {
      const entry = fileFromRow(snapshot.mirrorSets, row)
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
    snapshot.mirrors = await readMirrors(view)
    const [[minId, maxId, count]] = await view.query(`SELECT coalesce(min(id), 0), coalesce(max(id), 0), count(*)::int FROM file`)
    const lo = Number(minId) - 1
    const hi = Number(maxId)
    if (Number(count) < 200_000) return readFileRange(view, snapshot, lo, hi, onProgress)
    const mid = Math.floor((lo + hi) / 2)
    await view.parallel([(half) => readFileRange(half, snapshot, lo, mid, onProgress), (half) => readFileRange(half, snapshot, mid, hi, onProgress)])
  })
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

/**
 * Applies the changes committed since the snapshot's xmin: all mirrors are re-read, changed
 * file rows replace their entries, tombstoned paths are dropped (tombstones first, then rows,
 * so a delete-then-recreate ends with the file present). Mutates `snapshot` in place; the
 * hot path sees each file either before or after its change.
 * @throws whatever the database driver throws; the snapshot is then unchanged except for
 *         rows already applied (all of them still unseen by the old snapshot, so re-read later)
 */
export async function refreshSnapshot(database: Database, snapshot: Snapshot): Promise<RefreshResult> {
  const changes = await database.readSnapshot((view) => readChanges(view, snapshot.xmin ?? '1:1:', Math.max(50_000, snapshot.files.size / 10)))
  if (!changes) {
    snapshot.churn = Number.POSITIVE_INFINITY // the keeper reloads in full
    return {mirrors: 0, updated: 0, deleted: 0, reload: true}
  }
  // Apply synchronously, after the transaction, so a failed read changes nothing.
  const result: RefreshResult = {mirrors: changes.mirrors.size, updated: 0, deleted: 0}
  snapshot.mirrors = changes.mirrors
  for (const path of changes.tombstones) if (snapshot.files.delete(path)) result.deleted++
  for (const row of changes.rows) {
    const entry = fileFromRow(snapshot.mirrorSets, row)
    snapshot.files.set(entry.path, entry)
    result.updated++
  }
  snapshot.churn += result.updated
  snapshot.xmin = changes.xmin
  snapshot.refreshedAt = Date.now()
  return result
}

/** What changed since a transaction snapshot, read in one view. */
interface Changes {
  /** This view's own transaction snapshot, the next refresh's `since`. */
  xmin: string
  mirrors: MirrorTable
  /** Paths deleted since, to drop before applying `rows`. */
  tombstones: string[]
  /** Changed file rows, in {@link FILE_COLUMNS} order. */
  rows: unknown[][]
}

/**
 * Reads the mirrors and the file rows and tombstones that the transaction snapshot `since`
 * (`pg_snapshot` text) could not see.
 * @returns null when more than `limit` file rows changed (the caller reloads in full instead)
 */
async function readChanges(view: ReadView, since: string, limit: number): Promise<Changes | null> {
  // Rows invisible to the previous snapshot: committed later (>= xmax) or in flight then (xip).
  const unseen = `(txid >= pg_snapshot_xmax($1::pg_snapshot) OR txid = ANY(ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))`
  const xmin = await currentXmin(view)
  const mirrors = await readMirrors(view)
  const tombstones = (await view.query(`SELECT path FROM file_tombstone WHERE ${unseen}`, [since])).map(([path]) => path as string)
  // No ORDER BY/LIMIT here: that would make the planner walk the primary key instead of
  // the txid index. A large change set is left to a full reload (streamed in batches).
  const [[count]] = await view.query(`SELECT count(*)::int FROM file WHERE ${unseen}`, [since])
  if (Number(count) > limit) return null
  const rows = Number(count) > 0 ? await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE ${unseen}`, [since]) : []
  return {xmin, mirrors, tombstones, rows}
}
