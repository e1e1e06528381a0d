/**
 * Download counting for `mb serve`: an observer of answered requests that adds each to
 * in-memory aggregates (UTC day x path x mirror x client country), and flushes that write
 * them to `stats_daily`. There is never a database write per request.
 *
 * The parts, one job each:
 * - ./count.ts: what counts (which requests, which bytes, which key);
 * - ./pending.ts: the unflushed counts in memory;
 * - ./schedule.ts: when paths are written (by age); ./flusher.ts: the interval flusher;
 * - ./pacing.ts: the waits between batches of a paced flush;
 * - ./flush.ts: the batched upserts, and the bisection of a batch PostgreSQL partly refuses.
 * This module ties them together and reports: when a flush fails (database down) the
 * entries not written are put back and retried at the next flush; rows PostgreSQL refuses
 * are dropped and reported as lost. Memory stays bounded by `maxPendingKeys`: beyond it the
 * oldest keys are dropped and their counts reported as lost.
 */
import type {Database} from '../db/index.js'
import {errorMessage} from '../errors.js'
import {isoDay} from '../time.js'
import {addCounts, classifyRequest, type CountedRequest, countedCountry, countedMirror, countRequest, type StatsCounts} from './count.js'
import {CountmeCounts} from './countme.js'
import {OriginCounts} from './origin.js'
import {writeBatches} from './flush.js'
import {Pacer} from './pacing.js'
import {type Entry, inPathOrder, type Lost, type PathCounts, PendingCounts, type Taken} from './pending.js'
import {takeDue} from './schedule.js'

/** A minimal logger (pino fits). */
export interface StatsLogger {
  warn(obj: object, msg?: string): void
  error(obj: object, msg?: string): void
  info?(obj: object, msg?: string): void
}

export interface StatsCollectorOptions {
  /** Max distinct unflushed keys kept (default 200,000). */
  maxPendingKeys?: number
  /** Rows per upsert statement (default 500: each batch is serialized on the event loop, about 1-2 ms here, so requests are not held up behind a flush). */
  batchSize?: number
  logger?: StatsLogger
  /** Called after each failed flush, with the error (e.g. to count it in the metrics). */
  onFlushFailure?: (error: unknown) => void
  /** Called when keys are dropped beyond `maxPendingKeys`, with the counts lost. */
  onLoss?: (lost: Lost) => void
}

/** What one flush did. */
export interface FlushResult {
  /** Keys (rows) written. */
  rows: number
  /** Keys kept for the next flush because the database refused them. */
  retained: number
  ok: boolean
  error?: string
}

/** Running totals of a collector, for metrics and tests. */
export interface CollectorStatus {
  flushes: number
  flushFailures: number
  lostKeys: number
  lostDownloads: number
  /** Rows (keys) written to `stats_daily`, and the upsert statements that wrote them. */
  rowsWritten: number
  statements: number
  /** Keys handed to the cluster primary (a `--workers` worker, ./cluster.ts). */
  keysHandedOff: number
  lastFlushAt?: Date
  lastError?: string
}

/** When a flush writes, and at what pace (see {@link StatsCollector.flush}). */
export interface FlushOptions {
  paced?: boolean
  olderThanSeconds?: number
  jitterSeconds?: number
}

const DAY_MS = 86_400_000

/**
 * The in-memory side of download statistics: `observer` counts, `flush(db)` writes.
 * Use `startStatsFlusher` (./flusher.ts) to flush on an interval and at shutdown.
 */
export class StatsCollector {
  private readonly pending = new PendingCounts()
  private readonly countme = new CountmeCounts()
  private readonly origin = new OriginCounts()
  private readonly pacer = new Pacer()
  private flushing?: Promise<FlushResult>
  private dayStart = 0
  private dayEnd = 0
  private dayText = ''
  /** One request's counts, reused for every request. */
  private readonly counts: StatsCounts = {downloads: 0, bytes: 0, otherRequests: 0}
  private readonly maxPendingKeys: number
  private readonly batchSize: number
  readonly status: CollectorStatus = {flushes: 0, flushFailures: 0, lostKeys: 0, lostDownloads: 0, rowsWritten: 0, statements: 0, keysHandedOff: 0}

  constructor(private readonly options: StatsCollectorOptions = {}) {
    this.maxPendingKeys = options.maxPendingKeys ?? 200_000
    this.batchSize = options.batchSize ?? 500
  }

  /**
   * The observer to register with `mb serve` (synchronous, memory only). Generic so that it
   * takes any record carrying the counted fields, such as serve's `RequestOutcome`.
   */
  readonly observer = <T extends CountedRequest>(o: T): void => {
    this.record(o)
  }

  /** Counts one answered request (see ./count.ts for what counts). */
  record(o: CountedRequest): void {
    if (o.countme !== undefined) this.countme.add(o.time, o.countme)
    if (o.originReason !== undefined) this.origin.add(o.time, o.originReason, o.bytesSent)
    const kind = classifyRequest(o)
    if (kind === undefined) return
    const time = o.time
    if (time < this.dayStart || time >= this.dayEnd) {
      this.dayStart = Math.floor(time / DAY_MS) * DAY_MS
      this.dayEnd = this.dayStart + DAY_MS
      this.dayText = isoDay(this.dayStart)
    }
    const counts = this.counts
    counts.downloads = 0
    counts.bytes = 0
    counts.otherRequests = 0
    countRequest(counts, o, kind)
    this.pending.add(this.dayText, o.path!, countedMirror(o), countedCountry(o.country), time, counts)
    // After counting: the drop may take this very entry (with its path), and then reports it.
    if (this.pending.keys > this.maxPendingKeys) this.dropOldest()
  }

  /** True while a flush is writing to the database. */
  get flushInProgress(): boolean {
    return this.flushing !== undefined
  }

  /** Number of distinct keys waiting to be flushed. */
  get pendingKeys(): number {
    return this.pending.keys
  }

  /** Sum of the unflushed counts (for tests and shutdown messages). */
  pendingTotals(): StatsCounts {
    return this.pending.totals()
  }

  /** Drops the oldest paths (a tenth of the bound at once, so that the warning is not logged per request) and reports them. */
  private dropOldest(): void {
    const lost = this.pending.dropOldest(Math.max(1, Math.floor(this.maxPendingKeys * 0.9)))
    this.status.lostKeys += lost.keys
    this.status.lostDownloads += lost.downloads
    this.options.logger?.warn({lost, maxPendingKeys: this.maxPendingKeys}, 'stats: too many unflushed keys (is the database down?); dropped the oldest counts')
    this.options.onLoss?.(lost)
  }

  /** Drops rows PostgreSQL refuses, reporting them as lost (log, status, `onLoss`). */
  private reject(rows: Entry[], error: unknown): void {
    const lost = {keys: rows.length, downloads: 0, bytes: 0, otherRequests: 0}
    for (const e of rows) addCounts(lost, e)
    this.status.lostKeys += lost.keys
    this.status.lostDownloads += lost.downloads
    const paths = rows.slice(0, 5).map((e) => JSON.stringify(e.path))
    this.options.logger?.error({err: errorMessage(error), lost, paths}, 'stats: PostgreSQL refused these rows; dropped them and wrote the rest of their batch')
    this.options.onLoss?.(lost)
  }

  /**
   * Writes every pending count to `stats_daily` (adding to existing rows), in batches of
   * `batchSize` rows, one upsert statement each. Batches that fail stay pending (put back)
   * for the next flush; the failure is logged and reported to `onFlushFailure`. Concurrent
   * calls share one flush. Never throws.
   *
   * `olderThanSeconds` (the interval flusher's mode) writes only the paths whose first
   * unflushed count is at least that old (request time), oldest first; later counts of
   * those paths go with them. `jitterSeconds` adds to that age a fixed share of its own per
   * path (./schedule.ts).
   *
   * `paced` (the interval flusher's mode) waits after each batch as long as the batch took
   * (./pacing.ts). An unpaced call (shutdown, tests) ends the pacing of a flush in progress.
   */
  flush(database: Pick<Database, 'db'>, options: FlushOptions = {}): Promise<FlushResult> {
    if (!options.paced) this.pacer.hurryUp()
    if (this.flushing) return this.flushing.then(() => this.flush(database, options))
    this.pacer.start(options.paced === true)
    return this.exclusive(
      this.doFlush(database, options).then(async (result) => {
        await this.flushDayCounts(database)
        return result
      }),
    )
  }

  /**
   * Writes the few-keys-a-day counts to `database`: dnf's countme (./countme.ts) and the
   * origin's meter (./origin.ts); on failure they are kept for the next call. Never throws.
   */
  async flushDayCounts(database: Pick<Database, 'db'>): Promise<void> {
    await this.countme.flush(database, (error) => this.options.logger?.error({err: errorMessage(error)}, 'stats: writing the countme counts failed; kept for the next flush'))
    await this.origin.flush(database, (error) => this.options.logger?.error({err: errorMessage(error)}, 'stats: writing the origin counts failed; kept for the next flush'))
  }

  /**
   * A `--workers` worker's flush (./cluster.ts): takes the paths due as `flush` does (all of
   * them without `olderThanSeconds`) and hands them to `send`, which resolves once they are
   * on their way to the cluster primary. When `send` fails they are put back for the next
   * hand-off. Shares the one-at-a-time rule of `flush`. Never throws.
   */
  handOff(send: (groups: PathCounts[]) => Promise<void>, options: Omit<FlushOptions, 'paced'> = {}): Promise<FlushResult> {
    if (this.flushing) return this.flushing.then(() => this.handOff(send, options))
    return this.exclusive(this.doHandOff(send, options))
  }

  /**
   * Adds path groups counted by another process (a worker's hand-off, in the cluster
   * primary) to the pending counts: keys already pending are summed, so each key is written
   * once per flush whichever workers counted it. A path already pending keeps its `since`.
   */
  merge(groups: readonly PathCounts[]): void {
    this.pending.merge(groups)
    if (this.pending.keys > this.maxPendingKeys) this.dropOldest()
  }

  /** Marks `work` as the flush in progress until it settles. */
  private exclusive(work: Promise<FlushResult>): Promise<FlushResult> {
    this.flushing = work.finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  /** Takes what `options` says is due (everything without `olderThanSeconds`). */
  private take(options: FlushOptions): Taken {
    return options.olderThanSeconds === undefined ? this.pending.takeAll() : takeDue(this.pending, Date.now() - options.olderThanSeconds * 1000, (options.jitterSeconds ?? 0) * 1000)
  }

  /** Takes what is due and sends it; puts it back when `send` fails. */
  private async doHandOff(send: (groups: PathCounts[]) => Promise<void>, options: FlushOptions): Promise<FlushResult> {
    if (this.pending.keys === 0) return {rows: 0, retained: 0, ok: true}
    const taken = this.take(options)
    if (taken.entries.length === 0) return {rows: 0, retained: 0, ok: true}
    try {
      await send([...taken.groups.values()])
    } catch (error) {
      this.pending.putBack(taken.entries, taken.groups)
      if (this.pending.keys > this.maxPendingKeys) this.dropOldest()
      this.status.flushFailures += 1
      this.status.lastError = errorMessage(error)
      this.options.logger?.error({err: errorMessage(error), retained: taken.entries.length}, 'stats: handing the counts to the cluster primary failed; counts kept for the next try')
      return {rows: 0, retained: taken.entries.length, ok: false, error: errorMessage(error)}
    }
    this.status.keysHandedOff += taken.entries.length
    this.status.flushes += 1
    this.status.lastFlushAt = new Date()
    return {rows: taken.entries.length, retained: 0, ok: true}
  }

  /** Takes what `options` says is due, writes it, and puts back what could not be written. */
  private async doFlush(database: Pick<Database, 'db'>, options: FlushOptions): Promise<FlushResult> {
    if (this.pending.keys === 0) return {rows: 0, retained: 0, ok: true}
    const taken = this.take(options)
    if (taken.entries.length === 0) return {rows: 0, retained: 0, ok: true}
    const result = await writeBatches(database, inPathOrder(taken.groups), this.batchSize, this.pacer, (rows, error) => this.reject(rows, error))
    this.status.rowsWritten += result.written
    this.status.statements += result.statements
    if (result.failure !== undefined) {
      const {error, rest} = result.failure
      this.pending.putBack(rest, taken.groups)
      if (this.pending.keys > this.maxPendingKeys) this.dropOldest()
      this.status.flushFailures += 1
      this.status.lastError = errorMessage(error)
      this.options.logger?.error({err: errorMessage(error), retained: rest.length}, 'stats: flush to the database failed; counts kept for the next flush')
      this.options.onFlushFailure?.(error)
      return {rows: result.written, retained: rest.length, ok: false, error: errorMessage(error)}
    }
    this.status.flushes += 1
    this.status.lastFlushAt = new Date()
    return {rows: result.written, retained: 0, ok: true}
  }
}
