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
 * Incremental refresh (PostgreSQL xid8 change tracking): rows carry `txid`, set by triggers
 * on insert/update; deletions land in `file_tombstone`. Each refresh remembers its own
 * transaction snapshot (`pg_current_snapshot()`: xmin, xmax and the in-progress list xip).
 * The next refresh reads exactly the rows that snapshot could not see: `txid >= xmax` or
 * `txid` in xip. Every transaction in flight back then is in xip (or >= xmax), so no commit
 * is missed. (Reading `txid >= xmin` alone is also safe, but a long transaction anywhere in
 * the cluster holds xmin back, and every poll would then re-read everything changed since.)
 * Mirrors (a few hundred rows) are reloaded every time.
 */
import type pg from 'pg'
import type {PGlite} from '@electric-sql/pglite'
import type {MirrorRow} from '../db/schema.js'
import type {Database} from '../db/index.js'
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

/** Minimal row-array query interface over `pg` or PGlite, inside one transaction. */
interface Tx {
  query(text: string, params?: unknown[]): Promise<unknown[][]>
}

const CHUNK_ENTRIES = 1 << 20
const EMPTY = new Int16Array(0)
/** Rows per keyset batch. */
export const BATCH_ROWS = 20_000

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
  mirrorRows: MirrorRow[] = []
  readonly pool = new MirrorSetPool()
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

function fileFromRow(pool: MirrorSetPool, row: unknown[]): FileEntry {
  // id, path, size, mtime, mirrors, md5, sha1, sha256
  return {
    path: row[1] as string,
    size: Number(row[2]),
    mtime: Number(row[3]),
    mirrors: pool.fromText(row[4] as string | null),
    md5: str(row[5]),
    sha1: str(row[6]),
    sha256: str(row[7]),
  }
}

// Hashes only while they describe the row's version (origin/freshness.ts).
const FRESH = HASHES_MATCH_VERSION_SQL
const FILE_COLUMNS = `id, path, size, mtime, array_to_string(mirrors, ','), CASE WHEN ${FRESH} THEN md5 END, CASE WHEN ${FRESH} THEN sha1 END, CASE WHEN ${FRESH} THEN sha256 END`

async function withTx<T>(database: Database, fn: (tx: Tx) => Promise<T>): Promise<T> {
  if (database.kind === 'postgres') {
    const client: pg.PoolClient = await database.pool!.connect()
    let broken = false
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      const tx: Tx = {
        query: async (text, params) => (await client.query({text, values: params as unknown[] | undefined, rowMode: 'array'})).rows as unknown[][],
      }
      const result = await fn(tx)
      await client.query('COMMIT')
      return result
    } catch (error) {
      broken = true
      await client.query('ROLLBACK').catch(() => {})
      throw error
    } finally {
      client.release(broken)
    }
  }
  const pglite = database.pglite as PGlite
  return pglite.transaction(async (t) => {
    await t.exec('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ')
    const tx: Tx = {query: async (text, params) => (await t.query<unknown[]>(text, params as any[], {rowMode: 'array'})).rows}
    return fn(tx)
  })
}

async function readMirrors(tx: Tx): Promise<{rows: MirrorRow[]; compiled: MirrorTable}> {
  const result = await tx.query(`SELECT row_to_json(m)::text FROM mirror m ORDER BY id`)
  const rows: MirrorRow[] = []
  const compiled: SelectMirror[] = []
  for (const [json] of result) {
    const row = JSON.parse(json as string) as MirrorRow
    for (const key of ['status_changed_at', 'last_scan_at', 'last_scan_ok_at', 'created_at', 'updated_at'] as const) {
      if (row[key]) (row as any)[key] = new Date(row[key] as unknown as string)
    }
    rows.push(row)
    compiled.push(compileMirror(row))
  }
  return {rows, compiled: new MirrorTable(compiled)}
}

async function currentXmin(tx: Tx): Promise<string> {
  const [[snapshot]] = await tx.query(`SELECT pg_current_snapshot()::text`)
  return snapshot as string
}

/** Reads the files with lo < id <= hi in keyset batches into `snapshot`. */
async function readFileRange(tx: Tx, snapshot: Snapshot, lo: number, hi: number, onProgress?: (files: number) => void): Promise<void> {
  let lastId = lo
  for (;;) {
    const rows = await tx.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${BATCH_ROWS}`, [lastId, hi])
    for (const row of rows) {
      const entry = fileFromRow(snapshot.pool, row)
      snapshot.files.set(entry.path, entry)
    }
    if (rows.length === 0) break
    lastId = Number(rows.at(-1)![0])
    onProgress?.(snapshot.files.size)
    if (rows.length < BATCH_ROWS) break
  }
}

/**
 * Reads a complete snapshot in one consistent view. On PostgreSQL with more than 200,000
 * files, the id range is read in two halves on two connections sharing the transaction's
 * exported snapshot (`pg_export_snapshot()` / `SET TRANSACTION SNAPSHOT`), so the server
 * produces one half while this process parses the other.
 * @param onProgress called after each batch with the number of files read so far
 * @throws whatever the database driver throws (unreachable, schema missing)
 */
export async function loadSnapshot(database: Database, onProgress?: (files: number) => void): Promise<Snapshot> {
  const snapshot = new Snapshot()
  await withTx(database, async (tx) => {
    snapshot.xmin = await currentXmin(tx)
    const mirrors = await readMirrors(tx)
    snapshot.mirrors = mirrors.compiled
    snapshot.mirrorRows = mirrors.rows
    const [[minId, maxId, count]] = await tx.query(`SELECT coalesce(min(id), 0), coalesce(max(id), 0), count(*)::int FROM file`)
    const lo = Number(minId) - 1
    const hi = Number(maxId)
    if (database.kind !== 'postgres' || Number(count) < 200_000) return readFileRange(tx, snapshot, lo, hi, onProgress)
    const [[exported]] = await tx.query(`SELECT pg_export_snapshot()`)
    const mid = Math.floor((lo + hi) / 2)
    const helper = await database.pool!.connect()
    let broken = false
    try {
      await helper.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      await helper.query(`SET TRANSACTION SNAPSHOT '${String(exported).replace(/'/g, "''")}'`)
      const helperTx: Tx = {query: async (text, params) => (await helper.query({text, values: params as unknown[] | undefined, rowMode: 'array'})).rows as unknown[][]}
      await Promise.all([readFileRange(tx, snapshot, lo, mid, onProgress), readFileRange(helperTx, snapshot, mid, hi, onProgress)])
      await helper.query('COMMIT')
    } catch (error) {
      broken = true
      throw error
    } finally {
      helper.release(broken)
    }
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
  const since = snapshot.xmin ?? '1:1:'
  // Rows invisible to the previous snapshot: committed later (>= xmax) or in flight then (xip).
  const unseen = `(txid >= pg_snapshot_xmax($1::pg_snapshot) OR txid = ANY(ARRAY(SELECT pg_snapshot_xip($1::pg_snapshot))))`
  const result: RefreshResult = {mirrors: 0, updated: 0, deleted: 0}
  let xmin = since
  let mirrors: Awaited<ReturnType<typeof readMirrors>> | undefined
  const tombstones: string[] = []
  const changed: unknown[][][] = []
  let tooMany = false
  await withTx(database, async (tx) => {
    xmin = await currentXmin(tx)
    mirrors = await readMirrors(tx)
    for (const [path] of await tx.query(`SELECT path FROM file_tombstone WHERE ${unseen}`, [since])) tombstones.push(path as string)
    // No ORDER BY/LIMIT here: that would make the planner walk the primary key instead of
    // the txid index. A large change set is left to a full reload (streamed in batches).
    const [[count]] = await tx.query(`SELECT count(*)::int FROM file WHERE ${unseen}`, [since])
    if (Number(count) > Math.max(50_000, snapshot.files.size / 10)) {
      tooMany = true
      return
    }
    if (Number(count) > 0) changed.push(await tx.query(`SELECT ${FILE_COLUMNS} FROM file WHERE ${unseen}`, [since]))
  })
  if (tooMany) {
    snapshot.churn = Number.POSITIVE_INFINITY // the keeper reloads in full
    return {...result, reload: true}
  }
  // Apply synchronously, after the transaction, so a failed read changes nothing.
  snapshot.mirrors = mirrors!.compiled
  snapshot.mirrorRows = mirrors!.rows
  result.mirrors = mirrors!.compiled.size
  for (const path of tombstones) if (snapshot.files.delete(path)) result.deleted++
  for (const rows of changed) {
    for (const row of rows) {
      const entry = fileFromRow(snapshot.pool, row)
      snapshot.files.set(entry.path, entry)
      result.updated++
    }
  }
  snapshot.churn += result.updated
  snapshot.xmin = xmin
  snapshot.refreshedAt = Date.now()
  return result
}
