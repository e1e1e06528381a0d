/**
 * Re-indexing single origin files that `mb serve` found changed on disk (see
 * `MirrorServer.currentFile`): the row gets the disk's size and mtime (which empties its
 * mirror set, as `mb index` does, until a scan finds mirrors holding the new version), and,
 * when the file had hashes, it is hashed again on a worker thread (the thread serving
 * requests only waits for the database). The change reaches every `mb serve` through the
 * store's change notification (docs/change-tracking.md).
 *
 * Requests are coalesced per path (a path asked for again while it is being re-indexed is
 * done once more afterwards), and at most `concurrency` files are worked on at once.
 */
import {stat} from 'node:fs/promises'
import {join} from 'node:path'
import pLimit from 'p-limit'
import type {Logger} from 'pino'
import type {Database} from '../db/index.js'
import {errorMessage} from '../errors.js'
import {mtimeSeconds} from './freshness.js'
import {HashPool, type PieceHash, storeHashes} from './hash.js'
import {upsertOriginFiles} from './index.js'

/** What {@link reindexFile} did. */
export interface ReindexResult {
  /** The row now has the disk's size and mtime (false: the file is gone or not regular). */
  indexed: boolean
  /** The file was hashed again (it had hashes before). */
  hashed: boolean
}

/**
 * Brings the index row of root-relative `path` in step with the disk, hashes included when
 * the row had hashes (with the row's piece algorithm).
 * @throws the database's or the hashing thread's error (e.g. FILE_CHANGED while it was read)
 */
async function reindexFile(database: Database, root: string, path: string): Promise<ReindexResult> {
  const full = join(root, path)
  const st = await stat(full).catch(() => null)
  if (!st?.isFile()) return {indexed: false, hashed: false}
  const row = await database.db.selectFrom('file').select(['id', 'sha256', 'piece_hash']).where('path', '=', path).executeTakeFirst()
  await upsertOriginFiles(database.db, [{path, size: st.size, mtime: mtimeSeconds(st)}])
  if (!row?.sha256) return {indexed: true, hashed: false}
  const pool = new HashPool(1, (row.piece_hash ?? 'sha256') as PieceHash)
  try {
    const h = await pool.hash(full)
    await storeHashes(database.db, [{id: row.id, h}])
  } finally {
    await pool.close()
  }
  return {indexed: true, hashed: true}
}

/** Re-indexes changed files in the background, one request per path at a time. */
export class StaleReindexer {
  /** Paths being worked on → asked again meanwhile. */
  private readonly active = new Map<string, boolean>()
  private readonly limit: ReturnType<typeof pLimit>
  private readonly jobs = new Set<Promise<void>>()
  private closed = false

  /**
   * @param root the origin root (as `mb index` walks it)
   * @param concurrency files re-indexed at once (default 2)
   */
  constructor(
    private readonly database: Database,
    private readonly root: string,
    private readonly logger?: Logger,
    concurrency = 2,
  ) {
    this.limit = pLimit(concurrency)
  }

  /** Re-indexes `path` soon (coalesced with a run in progress). Never throws; failures are logged. */
  request(path: string): void {
    if (this.closed) return
    if (this.active.has(path)) {
      this.active.set(path, true)
      return
    }
    this.active.set(path, false)
    const job = this.limit(() => this.run(path))
    this.jobs.add(job)
    void job.finally(() => this.jobs.delete(job))
  }

  private async run(path: string): Promise<void> {
    try {
      do {
        if (this.closed) return
        this.active.set(path, false)
        const result = await reindexFile(this.database, this.root, path)
        this.logger?.info({path, ...result}, result.indexed ? `re-indexed ${path}` : `not re-indexed (gone from the origin): ${path}`)
      } while (this.active.get(path) === true)
    } catch (error) {
      this.logger?.warn({path, err: errorMessage(error)}, `re-indexing ${path} failed; \`mb index\` brings it in step`)
    } finally {
      this.active.delete(path)
    }
  }

  /** Takes no more requests, skips the queued ones and waits for those in progress (call before closing the database). */
  async close(): Promise<void> {
    this.closed = true
    await Promise.allSettled([...this.jobs])
  }
}
