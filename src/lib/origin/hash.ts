/**
 * Hashes of the origin tree: MD5, SHA-1, SHA-256 and piece hashes of every file, computed in
 * one streaming read per file, on all cores (worker_threads), and stored on the `file` row;
 * in the same read the SHA-1 pieces a `.torrent` needs and, for files from `zsync.min_size`
 * up, the zsync block sums (kept in `file_zsync`, zsync.ts).
 *
 * Freshness: `hashed_size`/`hashed_mtime` record the version the hashes were read from; when
 * they may be served is decided in freshness.ts. A stale hash is never served.
 *
 * Piece size ({@link pieceSizeFor}): the smallest power of two from 256 KiB up to 16 MiB
 * that keeps a file at or under 2,048 pieces; files above 32 GiB keep 16 MiB pieces and get
 * more. That is what Metalink 4 clients (aria2, wget2) repair by: a bad piece costs at most
 * one piece to re-fetch, and the document stays small (≤ 2,048 × 64 hex chars per file).
 */
import {stat} from 'node:fs/promises'
import {createRequire} from 'node:module'
import {availableParallelism} from 'node:os'
import {join} from 'node:path'
import {Worker} from 'node:worker_threads'
import {type Selectable, sql} from 'kysely'
import type {Database} from '../db/index.js'
import {rootNotDirectory} from './root.js'
import {hashesOutdatedSql} from './freshness.js'
import {zsyncParams, type ZsyncParams} from './zsync.js'
import {inSubtree} from '../db/sql.js'
import {trimSlashes} from '../text.js'
import type {FileTable} from '../db/schema.js'

/** Piece hash algorithms for Metalink `<pieces type=…>`. */
export type PieceHash = 'sha256' | 'sha1'

export const MIN_PIECE_SIZE = 256 * 1024
export const MAX_PIECE_SIZE = 16 * 1024 * 1024
const MAX_PIECES = 2048

/** zsync block sums of one file version (zsync.ts has the layout). */
export interface ZsyncSums {
  /** Bytes per block. */
  blockSize: number
  /** `Hash-Lengths` value, e.g. `2,3,5`. */
  hashLengths: string
  /** Per block, the trailing rsum bytes then the leading MD4 bytes. */
  sums: Uint8Array
}

/** The hashes of one file as read from disk. Sizes in bytes, mtime in Unix seconds (UTC). */
export interface FileHashes {
  md5: string
  sha1: string
  sha256: string
  pieceSize: number
  pieceHash: PieceHash
  /** Hex digests of each piece, in order (the last piece may be shorter). */
  pieces: string[]
  /** SHA-1 hex digests of the same pieces (BitTorrent v1); equal to `pieces` for SHA-1 pieces. */
  sha1Pieces: string[]
  /** zsync block sums when they were asked for (by size) and the file kept that size; else null. */
  zsync: ZsyncSums | null
  /** Size and mtime of the file when it was read (both checked before and after). */
  size: number
  mtime: number
}

/**
 * The piece size in bytes for a file of `size` bytes: the smallest power of two in
 * [256 KiB, 16 MiB] with `ceil(size / pieceSize) <= 2048`.
 */
export function pieceSizeFor(size: number): number {
  let piece = MIN_PIECE_SIZE
  while (piece < MAX_PIECE_SIZE && Math.ceil(size / piece) > MAX_PIECES) piece *= 2
  return piece
}

/** What one hashing job computes besides the whole-file digests. */
interface HashJob {
  pieceHash: PieceHash
  /** zsync parameters for the size the file is expected to have; none: no zsync sums. */
  zsync?: ZsyncParams
}

// The hashing code, evaluated as CommonJS on the worker threads and, through `new Function`,
// on the main thread (hashFile), so that both run one implementation, from dist/ and under
// tsx alike. One streaming read per file feeds every digest, the piece hashes and the zsync
// block sums (zsync.ts has their rules and layout).
const CORE_SOURCE = `
const {createHash} = require('node:crypto')
const fs = require('node:fs')
const {createMD4} = require(${JSON.stringify(createRequire(import.meta.url).resolve('hash-wasm'))})
const MIN = ${MIN_PIECE_SIZE}, MAX = ${MAX_PIECE_SIZE}, MAXN = ${MAX_PIECES}
function pieceSizeFor(size) { let p = MIN; while (p < MAX && Math.ceil(size / p) > MAXN) p *= 2; return p }
let md4Ready
function zsyncBlock(z, block) {
  let a = 0, b = 0
  const n = block.length
  for (let i = 0; i < n; i++) { const c = block[i]; a += c; b += (n - i) * c }
  a %= 65536; b %= 65536
  const r = [a >> 8, a & 255, b >> 8, b & 255]
  for (let k = 4 - z.p.rsumLen; k < 4; k++) z.out[z.at++] = r[k]
  z.md4.init(); z.md4.update(block)
  const d = z.md4.digest('binary')
  for (let k = 0; k < z.p.checksumLen; k++) z.out[z.at++] = d[k]
}
function zsyncFeed(z, chunk) {
  const bs = z.p.blockSize
  let off = 0
  if (z.fill > 0) {
    const take = Math.min(bs - z.fill, chunk.length)
    z.block.set(chunk.subarray(0, take), z.fill); z.fill += take; off = take
    if (z.fill === bs) { zsyncBlock(z, z.block); z.fill = 0 }
  }
  while (chunk.length - off >= bs) { zsyncBlock(z, chunk.subarray(off, off + bs)); off += bs }
  if (off < chunk.length) { z.block.set(chunk.subarray(off), 0); z.fill = chunk.length - off }
}
async function hash(path, job) {
  const before = fs.statSync(path)
  const pieceSize = pieceSizeFor(before.size)
  const pieceHash = job.pieceHash
  const md5 = createHash('md5'), sha1 = createHash('sha1'), sha256 = createHash('sha256')
  const pieces = [], sha1Pieces = pieceHash === 'sha1' ? pieces : []
  let piece = createHash(pieceHash), piece1 = pieceHash === 'sha1' ? null : createHash('sha1'), inPiece = 0, total = 0
  let z = null
  if (job.zsync && job.zsync.size === before.size && before.size > 0) {
    md4Ready = md4Ready || createMD4()
    const p = job.zsync
    z = {p, md4: await md4Ready, out: new Uint8Array(Math.ceil(before.size / p.blockSize) * (p.rsumLen + p.checksumLen)), at: 0, block: new Uint8Array(p.blockSize), fill: 0}
  }
  for await (const chunk of fs.createReadStream(path, {highWaterMark: 1024 * 1024})) {
    md5.update(chunk); sha1.update(chunk); sha256.update(chunk); total += chunk.length
    let offset = 0
    while (offset < chunk.length) {
      const take = Math.min(pieceSize - inPiece, chunk.length - offset)
      const part = chunk.subarray(offset, offset + take)
      piece.update(part); if (piece1) piece1.update(part); inPiece += take; offset += take
      if (inPiece === pieceSize) {
        pieces.push(piece.digest('hex')); piece = createHash(pieceHash)
        if (piece1) { sha1Pieces.push(piece1.digest('hex')); piece1 = createHash('sha1') }
        inPiece = 0
      }
    }
    if (z) zsyncFeed(z, chunk)
  }
  if (inPiece > 0 || total === 0) { pieces.push(piece.digest('hex')); if (piece1) sha1Pieces.push(piece1.digest('hex')) }
  if (z && z.fill > 0) { z.block.fill(0, z.fill); zsyncBlock(z, z.block) }
  const after = fs.statSync(path)
  if (after.size !== before.size || after.mtimeMs !== before.mtimeMs || total !== before.size) {
    const e = new Error(path + ' changed while it was hashed (size ' + before.size + ' -> ' + after.size + '); hash it again once it is complete.'); e.code = 'FILE_CHANGED'; throw e
  }
  const zsync = z ? {blockSize: z.p.blockSize, hashLengths: z.p.seqMatches + ',' + z.p.rsumLen + ',' + z.p.checksumLen, sums: z.out} : null
  return {md5: md5.digest('hex'), sha1: sha1.digest('hex'), sha256: sha256.digest('hex'), pieceSize, pieceHash, pieces, sha1Pieces, zsync, size: before.size, mtime: Math.floor(before.mtimeMs / 1000)}
}
`

const WORKER_SOURCE = `${CORE_SOURCE}
const {parentPort} = require('node:worker_threads')
parentPort.on('message', (message) => {
  hash(message.path, message.job).then(
    (result) => parentPort.postMessage({id: message.id, result}, result.zsync ? [result.zsync.sums.buffer] : []),
    (error) => parentPort.postMessage({id: message.id, error: {message: error.message, code: error.code}}),
  )
})
`

let mainThreadCore: ((path: string, job: HashJob) => Promise<FileHashes>) | undefined

/**
 * Hashes one file in a single streaming read on the calling thread: MD5, SHA-1, SHA-256,
 * piece hashes, SHA-1 pieces, and zsync block sums when `zsyncMinSize` is given and the file
 * has at least that many bytes.
 *
 * @param path absolute path
 * @param pieceHash piece digest algorithm (default SHA-256)
 * @param zsyncMinSize smallest size in bytes that gets zsync sums (default null: none)
 * @throws Error with code FILE_CHANGED when the file's size or mtime changed while it was
 *         read, or the fs error when it cannot be read
 */
export async function hashFile(path: string, pieceHash: PieceHash = 'sha256', zsyncMinSize: number | null = null): Promise<FileHashes> {
  mainThreadCore ??= new Function('require', `${CORE_SOURCE}\nreturn hash`)(createRequire(import.meta.url)) as typeof mainThreadCore
  return mainThreadCore!(path, hashJob(pieceHash, zsyncMinSize, (await stat(path)).size))
}

/** The job for a file expected to have `size` bytes (undefined: unknown, no zsync sums). */
function hashJob(pieceHash: PieceHash, zsyncMinSize: number | null, size: number | undefined): HashJob {
  const job: HashJob = {pieceHash}
  if (zsyncMinSize !== null && size !== undefined && size > 0 && size >= zsyncMinSize) job.zsync = zsyncParams(size)
  return job
}

/** Hash columns of a `file` row, as read for serving. */
export type StoredHashes = Pick<Selectable<FileTable>, 'size' | 'mtime' | 'md5' | 'sha1' | 'sha256' | 'piece_size' | 'piece_hash' | 'pieces' | 'sha1_pieces' | 'hashed_size' | 'hashed_mtime'>

/** Splits the stored `pieces` text (concatenated hex digests) into one digest per piece. */
export function splitPieces(pieces: string | null, pieceHash: string | null): string[] {
  if (!pieces) return []
  const width = pieceHash === 'sha1' ? 40 : 64
  const out: string[] = []
  for (let i = 0; i < pieces.length; i += width) out.push(pieces.slice(i, i + width))
  return out
}

/**
 * A pool of hashing threads. `hash(path)` resolves to {@link FileHashes} or rejects with the
 * read error (`code` ENOENT, FILE_CHANGED, ...). `close()` ends every thread.
 */
export class HashPool {
  private readonly workers: Worker[] = []
  private readonly idle: Worker[] = []
  private readonly waiting: Array<() => void> = []
  private readonly pending = new Map<number, {resolve: (h: FileHashes) => void; reject: (e: Error) => void}>()
  private nextId = 1

  /**
   * @param size number of threads (>= 1)
   * @param pieceHash piece digest algorithm
   * @param zsyncMinSize smallest file size in bytes that gets zsync sums (null: none)
   */
  constructor(
    size: number,
    private readonly pieceHash: PieceHash = 'sha256',
    private readonly zsyncMinSize: number | null = null,
  ) {
    for (let i = 0; i < Math.max(1, size); i++) {
      const worker = new Worker(WORKER_SOURCE, {eval: true})
      worker.on('message', (message: {id: number; result?: FileHashes; error?: {message: string; code?: string}}) => {
        const job = this.pending.get(message.id)
        this.pending.delete(message.id)
        this.release(worker)
        if (!job) return
        if (message.error) job.reject(Object.assign(new Error(message.error.message), {code: message.error.code}))
        else job.resolve(message.result!)
      })
      worker.unref()
      this.workers.push(worker)
      this.idle.push(worker)
    }
  }

  private release(worker: Worker): void {
    this.idle.push(worker)
    this.waiting.shift()?.()
  }

  /**
   * Hashes `path` (absolute) on the next free thread. `expectedSize` (bytes, the indexed
   * size) decides whether zsync sums are computed; they are left out (null) when the file
   * no longer has that size.
   */
  async hash(path: string, expectedSize?: number): Promise<FileHashes> {
    while (this.idle.length === 0) await new Promise<void>((resolve) => this.waiting.push(resolve))
    const worker = this.idle.pop()!
    const id = this.nextId++
    return new Promise((resolve, reject) => {
      this.pending.set(id, {resolve, reject})
      worker.postMessage({id, path, job: hashJob(this.pieceHash, this.zsyncMinSize, expectedSize)})
    })
  }

  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.terminate()))
  }
}

/** Progress of {@link hashIndex}: counts of files and bytes, hashed so far out of the total. */
export interface HashProgress {
  files: number
  totalFiles: number
  bytes: number
  totalBytes: number
  /** The path just finished. */
  path?: string
}

export interface HashIndexOptions {
  /** Hashing threads; default: all cores (os.availableParallelism()). */
  jobs?: number
  /** Piece digest algorithm, default SHA-256 (SHA-1 for old clients). */
  pieceHash?: PieceHash
  /** Rehash every file, even those whose hashes are current. */
  force?: boolean
  /** Rows written per transaction (default 100). */
  batchSize?: number
  /** Due files read per query (default 1,000). */
  pageRows?: number
  /** Only files under this origin-relative directory (e.g. `releases/15.6`). */
  subdir?: string
  /** Files of at least this many bytes also get zsync block sums (config `zsync.min_size`); null or absent: none. */
  zsyncMinSize?: number | null
  onProgress?: (progress: HashProgress) => void
}

export interface HashIndexResult {
  /** Files hashed and stored. */
  hashed: number
  /** Bytes read. */
  bytes: number
  /** Files already current (skipped). */
  current: number
  /** Files that could not be hashed (vanished, unreadable, changed while read), with why. */
  failed: Array<{path: string; error: string}>
  seconds: number
}

/** Due files read per query. */
const PAGE_ROWS = 1000

interface Todo {
  id: number
  path: string
  size: number
}

/**
 * Hashes the origin files whose hashes are missing or stale (`hashed_size`/`hashed_mtime`
 * differ from the row's size/mtime, or the piece algorithm differs), or lack the SHA-1
 * pieces or (from `zsyncMinSize` bytes up) the zsync sums, reading them under `root`, on
 * `jobs` threads, and stores the results in batches. Only those files are read, so the work
 * follows what changed.
 *
 * The stored `hashed_size`/`hashed_mtime` are the size and mtime of the bytes actually read,
 * so a file that changed on disk since the last walk gets hashes that become fresh only once
 * the index records the same size and mtime.
 *
 * @throws UsageError ROOT_INVALID when `root` is not a readable directory
 */
export async function hashIndex(database: Database, root: string, options: HashIndexOptions = {}): Promise<HashIndexResult> {
  const started = process.hrtime.bigint()
  const rootStat = await stat(root).catch(() => null)
  if (!rootStat?.isDirectory()) throw rootNotDirectory(root, rootStat ? 'not a directory' : 'it does not exist or cannot be read')
  const pieceHash = options.pieceHash ?? 'sha256'
  const jobs = Math.max(1, options.jobs ?? availableParallelism())
  const batchSize = options.batchSize ?? 100
  const {db} = database
  const zsyncMinSize = options.zsyncMinSize ?? null
  const stale = dueCondition(pieceHash, zsyncMinSize, options)
  // Totals for progress, then the due files page by page (keyset on id), so that a tree of
  // a million files is never held in memory at once.
  const totals = await db
    .selectFrom('file')
    .select((eb) => [
      eb.fn.countAll<number>().as('n'),
      sql<number>`coalesce(sum(CASE WHEN ${stale} THEN 1 ELSE 0 END), 0)`.as('due'),
      sql<number>`coalesce(sum(CASE WHEN ${stale} THEN size ELSE 0 END), 0)`.as('bytes'),
    ])
    .executeTakeFirstOrThrow()
  const totalFiles = Number(totals.due)
  const totalBytes = Number(totals.bytes)
  const result: HashIndexResult = {hashed: 0, bytes: 0, current: Number(totals.n) - totalFiles, failed: [], seconds: 0}
  if (totalFiles === 0) {
    result.seconds = Number(process.hrtime.bigint() - started) / 1e9
    return result
  }

  const threads = Math.min(jobs, totalFiles)
  const pool = new HashPool(threads, pieceHash, zsyncMinSize)
  let batch: Array<{id: number; h: FileHashes}> = []
  let writing: Promise<void> = Promise.resolve()
  const flush = () => {
    const rows = batch
    batch = []
    if (rows.length === 0) return
    writing = writing.then(() => storeHashes(db, rows))
  }

  try {
    let lastId = 0
    for (;;) {
      const page = (await db
        .selectFrom('file')
        .select(['id', 'path', 'size'])
        .where(stale)
        .where('id', '>', lastId)
        .orderBy('id')
        .limit(options.pageRows ?? PAGE_ROWS)
        .execute()) as Todo[]
      if (page.length === 0) break
      lastId = page[page.length - 1].id
      let next = 0
      const runner = async () => {
        while (next < page.length) {
          const item = page[next++]
          try {
            const h = await pool.hash(join(root, item.path), Number(item.size))
            batch.push({id: item.id, h})
            result.hashed++
            result.bytes += h.size
            if (batch.length >= batchSize) flush()
          } catch (error) {
            result.failed.push({path: item.path, error: (error as Error).message})
          }
          options.onProgress?.({files: result.hashed + result.failed.length, totalFiles, bytes: result.bytes, totalBytes, path: item.path})
        }
      }
      await Promise.all(Array.from({length: Math.min(threads, page.length)}, runner))
    }
    flush()
    await writing
  } finally {
    await pool.close()
  }
  result.seconds = Number(process.hrtime.bigint() - started) / 1e9
  return result
}

/**
 * The SQL condition for a file {@link hashIndex} hashes: every file with `force`, else those
 * whose hashes are missing or stale, that lack SHA-1 pieces, or that lack zsync sums while
 * at least `zsyncMinSize` bytes long; under `subdir` when given.
 */
function dueCondition(pieceHash: PieceHash, zsyncMinSize: number | null, options: Pick<HashIndexOptions, 'force' | 'subdir'>) {
  const zsyncDue = zsyncMinSize === null ? sql<boolean>`false` : sql<boolean>`(zsync_block_size IS NULL AND size >= ${zsyncMinSize})`
  const due = options.force ? sql<boolean>`true` : sql<boolean>`(${hashesOutdatedSql()} OR piece_hash IS DISTINCT FROM ${pieceHash} OR sha1_pieces IS NULL OR ${zsyncDue})`
  const prefix = trimSlashes(options.subdir ?? '')
  return prefix ? sql<boolean>`(${due} AND ${inSubtree(prefix)})` : due
}

/**
 * Writes one batch of hashes, with the size and mtime of the bytes read, in one transaction:
 * the `file` columns, and the zsync sums in `file_zsync` (replaced, or dropped when this
 * version has none).
 */
export async function storeHashes(db: Database['db'], rows: Array<{id: number; h: FileHashes}>): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const withoutSums = rows.filter((r) => r.h.zsync === null).map((r) => r.id)
    if (withoutSums.length > 0) await trx.deleteFrom('file_zsync').where('file_id', 'in', withoutSums).execute()
    for (const {id, h} of rows) {
      await trx
        .updateTable('file')
        .set({
          md5: h.md5,
          sha1: h.sha1,
          sha256: h.sha256,
          piece_size: h.pieceSize,
          piece_hash: h.pieceHash,
          pieces: h.pieces.join(''),
          sha1_pieces: h.sha1Pieces.join(''),
          zsync_block_size: h.zsync?.blockSize ?? null,
          hashed_size: h.size,
          hashed_mtime: h.mtime,
        })
        .where('id', '=', id)
        .execute()
      if (h.zsync) {
        const sums = Buffer.from(h.zsync.sums.buffer, h.zsync.sums.byteOffset, h.zsync.sums.byteLength)
        await trx
          .insertInto('file_zsync')
          .values({file_id: id, hash_lengths: h.zsync.hashLengths, sums})
          .onConflict((oc) => oc.column('file_id').doUpdateSet({hash_lengths: h.zsync!.hashLengths, sums}))
          .execute()
      }
    }
  })
}

/**
 * Reads the hash columns of one file by origin-relative path; null when the path is not
 * indexed.
 */
export async function readStoredHashes(database: Database, path: string): Promise<StoredHashes | null> {
  const row = await database.db
    .selectFrom('file')
    .select(['size', 'mtime', 'md5', 'sha1', 'sha256', 'piece_size', 'piece_hash', 'pieces', 'sha1_pieces', 'hashed_size', 'hashed_mtime'])
    .where('path', '=', path)
    .executeTakeFirst()
  return row ?? null
}
