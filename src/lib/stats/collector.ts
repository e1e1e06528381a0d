/**
 * Download counting for `mb serve`: a {@link RequestObserver} that adds each answered
 * request to in-memory aggregates (UTC day x path x mirror x client country), and a flusher
 * that writes them to `stats_daily` in batches of 500 keys, one multi-row upsert per batch
 * (`INSERT … SELECT FROM json_to_recordset(…) ON CONFLICT DO UPDATE SET downloads =
 * stats_daily.downloads + EXCLUDED.downloads`). There is never a database write per request;
 * upserts add, so several replicas flushing into one PostgreSQL add up.
 *
 * The interval flusher writes by age: several times per interval it writes the paths whose
 * first unflushed count is older than most of the interval, oldest first, paced so that it
 * takes at most half of the database's time. Each path is still written about once per
 * interval (the same aggregation as one flush of everything per interval), no count waits
 * longer than one interval, and the database works as a steady trickle beside the requests
 * instead of a burst once per interval, which slowed the slowest requests.
 *
 * What counts (issue 7):
 * - a download is a GET answered by a redirect or by local delivery, unless it is a Range
 *   continuation (a Range whose first byte is not 0);
 * - `other_requests` are HEADs, metalinks (meta4/metalink), hashes, mirror lists, 304s and
 *   Range continuations; 404s, bad requests, errors, directories and `other` are not stored
 *   here (the metrics count them), so junk paths cannot grow the table;
 * - `bytes`: for local delivery the body bytes the origin sent (continuations included), for
 *   a counted redirect the file size (what the mirror is expected to deliver).
 *
 * When a flush fails (database down) the batch is merged back and retried at the next
 * interval. A row PostgreSQL refuses for its values (a data error, which would fail again at
 * every retry) is isolated by splitting its batch, dropped, and reported as lost; the rest of
 * the batch is written. Memory stays bounded by `maxPendingKeys`: beyond it the oldest keys are dropped
 * and their counts reported as lost.
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import {errorMessage} from '../errors.js'
import {fnv1a32} from '../select/hash.js'
import type {RequestObserver, RequestOutcome} from '../serve/types.js'
import {isoDay} from '../time.js'

/** Counts for one (day, path, mirror, country) key. */
export interface StatsCounts {
  downloads: number
  bytes: number
  otherRequests: number
}

interface Entry extends StatsCounts {
  day: string
  path: string
  mirrorId: number
  country: string
}

/** What {@link StatsCollector.writeAround} did with a batch PostgreSQL partly refused. */
interface WrittenAround {
  /** Rows written. */
  written: number
  /** Rows refused alone (dropped), and the last such refusal. */
  rejected: Entry[]
  rowError: unknown
  /** Rows not tried because `failure` (not a row error) stopped the batch. */
  retained: Entry[]
  failure?: unknown
}

/** The unflushed entries of one path. */
interface PathCounts {
  /** When the first of them was counted (the request's time, Unix ms). */
  since: number
  /** The path's place in [0, 1) among the due times (a hash of the path; -1 until computed). */
  phase: number
  entries: Entry[]
}

/** A hash of `path` scaled to [0, 1): where in a jitter window the path falls due. */
function pathPhase(path: string): number {
  return fnv1a32(path) / 4_294_967_296
}

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
  onLoss?: (lost: StatsCounts & {keys: number}) => void
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
  lastFlushAt?: Date
  lastError?: string
}

const DAY_MS = 86_400_000
/** Normalises a country code to two upper-case letters, or '--' when unknown. */
function normCountry(country: string | undefined): string {
  if (!country) return '--'
  if (isUpperPair(country)) return country // what GeoIP and `?country=` give: no copy, no regex
  const upper = country.toUpperCase()
  return isUpperPair(upper) ? upper : '--'
}

function isUpperPair(text: string): boolean {
  if (text.length !== 2) return false
  const a = text.charCodeAt(0)
  const b = text.charCodeAt(1)
  return a >= 65 && a <= 90 && b >= 65 && b <= 90
}

/**
 * Classifies a request for the statistics: 'download', 'other', or undefined when it is not
 * recorded (404s, errors, directories, requests without a file path).
 */
export function classifyRequest(o: RequestOutcome): 'download' | 'other' | undefined {
  if (!o.path) return undefined
  switch (o.outcome) {
    case 'redirect':
    case 'local': {
      if (o.method !== 'GET') return o.method === 'HEAD' ? 'other' : undefined
      if (o.rangeStart !== undefined && o.rangeStart !== 0) return 'other'
      return 'download'
    }
    case 'not_modified':
    case 'meta4':
    case 'metalink':
    case 'hash':
    case 'mirrorlist':
      return 'other'
    default:
      return undefined
  }
}

/**
 * The in-memory side of download statistics: `observer` counts, `flush(db)` writes.
 * Use {@link startStatsFlusher} to flush on an interval and at shutdown.
 */
export class StatsCollector {
  /**
   * Unflushed counts by path, then a short list of (day, mirror, country) entries. The
   * path is the key because the request's path string already carries its hash (the
   * snapshot lookup computed it): a composite key string would be built and hashed on every
   * request. Paths keep their first-seen order: the flusher takes the oldest first, and
   * drop-oldest works on whole paths.
   */
  private pending = new Map<string, PathCounts>()
  private keys = 0
  private flushing?: Promise<FlushResult>
  /** Set by an unpaced flush: a paced flush in progress stops waiting between batches. */
  private hurry = true
  private dayStart = 0
  private dayEnd = 0
  private dayText = ''
  private readonly maxPendingKeys: number
  private readonly batchSize: number
  readonly status: CollectorStatus = {flushes: 0, flushFailures: 0, lostKeys: 0, lostDownloads: 0}

  constructor(private readonly options: StatsCollectorOptions = {}) {
    this.maxPendingKeys = options.maxPendingKeys ?? 200_000
    this.batchSize = options.batchSize ?? 500
  }

  /** The observer to register with `mb serve` (synchronous, memory only). */
  readonly observer: RequestObserver = (o) => {
    this.record(o)
  }

  /** Counts one answered request (see the module doc for what counts). */
  record(o: RequestOutcome): void {
    const kind = classifyRequest(o)
    if (kind === undefined) return
    const time = o.time
    if (time < this.dayStart || time >= this.dayEnd) {
      this.dayStart = Math.floor(time / DAY_MS) * DAY_MS
      this.dayEnd = this.dayStart + DAY_MS
      this.dayText = isoDay(this.dayStart)
    }
    const day = this.dayText
    const mirrorId = o.outcome === 'redirect' && o.mirrorId ? o.mirrorId : 0
    const country = normCountry(o.country)
    const entry = this.entry(day, o.path!, mirrorId, country, time)
    if (kind === 'download') {
      entry.downloads += 1
      entry.bytes += o.outcome === 'local' ? o.bytesSent : o.fileSize ?? 0
    } else {
      entry.otherRequests += 1
      if (o.outcome === 'local' && o.method === 'GET') entry.bytes += o.bytesSent
    }
    // After counting: the drop may take this very entry (with its path), and then reports it.
    if (this.keys > this.maxPendingKeys) this.dropOldest()
  }

  /** True while a flush is writing to the database. */
  get flushInProgress(): boolean {
    return this.flushing !== undefined
  }

  /** Number of distinct keys waiting to be flushed. */
  get pendingKeys(): number {
    return this.keys
  }

  /** Sum of the unflushed counts (for tests and shutdown messages). */
  pendingTotals(): StatsCounts {
    const t = {downloads: 0, bytes: 0, otherRequests: 0}
    for (const group of this.pending.values()) {
      for (const e of group.entries) {
        t.downloads += e.downloads
        t.bytes += e.bytes
        t.otherRequests += e.otherRequests
      }
    }
    return t
  }

  private dropOldest(): void {
    const lost = {keys: 0, downloads: 0, bytes: 0, otherRequests: 0}
    // Drop a tenth of the bound at once so that the warning is not logged per request.
    const target = Math.max(1, Math.floor(this.maxPendingKeys * 0.9))
    for (const [path, group] of this.pending) {
      if (this.keys <= target) break
      this.pending.delete(path)
      this.keys -= group.entries.length
      for (const e of group.entries) {
        lost.keys += 1
        lost.downloads += e.downloads
        lost.bytes += e.bytes
        lost.otherRequests += e.otherRequests
      }
    }
    this.status.lostKeys += lost.keys
    this.status.lostDownloads += lost.downloads
    this.options.logger?.warn({lost, maxPendingKeys: this.maxPendingKeys}, 'stats: too many unflushed keys (is the database down?); dropped the oldest counts')
    this.options.onLoss?.(lost)
  }

  /**
   * Puts the entries of a failed flush back, before what arrived since (they are older), each
   * path with the time it was first counted (`since`, from the groups the flush took).
   */
  private mergeBack(entries: Entry[], taken: ReadonlyMap<string, PathCounts>): void {
    const arrived = this.pending
    this.pending = new Map()
    this.keys = 0
    for (const e of entries) this.add(e, taken.get(e.path)?.since ?? 0)
    for (const group of arrived.values()) for (const e of group.entries) this.add(e, group.since)
    if (this.keys > this.maxPendingKeys) this.dropOldest()
  }

  /** The pending entry of a key, created (with zero counts) when the key is new; `since` dates a new path. */
  private entry(day: string, path: string, mirrorId: number, country: string, since: number): Entry {
    let group = this.pending.get(path)
    if (group === undefined) {
      group = {since, phase: -1, entries: []}
      this.pending.set(path, group)
    }
    const list = group.entries
    for (let i = 0; i < list.length; i++) {
      const e = list[i]
      if (e.mirrorId === mirrorId && e.country === country && e.day === day) return e
    }
    const e: Entry = {day, path, mirrorId, country, downloads: 0, bytes: 0, otherRequests: 0}
    list.push(e)
    this.keys += 1
    return e
  }

  /** Adds `e`'s counts to its key. */
  private add(e: Entry, since: number): void {
    const entry = this.entry(e.day, e.path, e.mirrorId, e.country, since)
    entry.downloads += e.downloads
    entry.bytes += e.bytes
    entry.otherRequests += e.otherRequests
  }

  /**
   * After `batch` failed with `rowError` ({@link isRowError}): writes it in halves, and halves
   * of halves, around the rows PostgreSQL refuses; a refused single row is rejected. Stops at
   * the first error that is not a row error: what was not written yet is then `retained`,
   * with that error as `failure`.
   */
  private async writeAround(database: Pick<Database, 'db'>, batch: Entry[], rowError: unknown): Promise<WrittenAround> {
    const out: WrittenAround = {written: 0, rejected: [], rowError, retained: []}
    const split = (part: Entry[]) => [part.slice(part.length >> 1), part.slice(0, part.length >> 1)]
    if (batch.length === 1) out.rejected.push(batch[0])
    const stack: Entry[][] = batch.length > 1 ? split(batch) : []
    while (stack.length > 0) {
      const part = stack.pop()!
      if (out.failure !== undefined) {
        out.retained.push(...part)
        continue
      }
      try {
        await upsertDaily(database, part)
        out.written += part.length
      } catch (error) {
        if (!isRowError(error)) {
          out.failure = error
          out.retained.push(...part)
        } else if (part.length === 1) {
          out.rejected.push(part[0])
          out.rowError = error
        } else {
          stack.push(...split(part))
        }
      }
    }
    return out
  }

  /** Drops rows PostgreSQL refuses, reporting them as lost (log, status, `onLoss`). */
  private reject(rows: Entry[], error: unknown): void {
    const lost = {keys: rows.length, downloads: 0, bytes: 0, otherRequests: 0}
    for (const e of rows) {
      lost.downloads += e.downloads
      lost.bytes += e.bytes
      lost.otherRequests += e.otherRequests
    }
    this.status.lostKeys += lost.keys
    this.status.lostDownloads += lost.downloads
    const paths = rows.slice(0, 5).map((e) => JSON.stringify(e.path))
    this.options.logger?.error({err: errorMessage(error), lost, paths}, 'stats: PostgreSQL refused these rows; dropped them and wrote the rest of their batch')
    this.options.onLoss?.(lost)
  }

  /**
   * Writes every pending count to `stats_daily` (adding to existing rows), in batches of
   * `batchSize` rows, one upsert statement each. Batches that fail stay pending (merged
   * back) for the next flush; the failure is logged and reported to `onFlushFailure`.
   * Concurrent calls share one flush. Never throws.
   *
   * `olderThanSeconds` (the interval flusher's mode) writes only the paths whose first
   * unflushed count is at least that old (request time), oldest first; later counts of
   * those paths go with them. `jitterSeconds` adds to that age a fixed share of its own per
   * path (a hash of the path): paths first counted together (the busy ones, after a start)
   * fall due spread over that window, and since each path then keeps its own period, they
   * drift apart instead of reaching the database together at every interval.
   *
   * `paced` (the interval flusher's mode) waits after each batch as long as the batch took,
   * so that a large flush takes at most half of the database's time instead of a burst that
   * starves the requests served beside it (PostgreSQL often shares the host). An unpaced
   * call (shutdown, tests) ends the pacing of a flush in progress.
   */
  flush(database: Pick<Database, 'db'>, options: {paced?: boolean; olderThanSeconds?: number; jitterSeconds?: number} = {}): Promise<FlushResult> {
    if (!options.paced) this.hurry = true
    if (this.flushing) return this.flushing.then(() => this.flush(database, options))
    this.hurry = !options.paced
    this.flushing = this.doFlush(database, options.olderThanSeconds === undefined ? undefined : Date.now() - options.olderThanSeconds * 1000, (options.jitterSeconds ?? 0) * 1000).finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  /**
   * Writes the pending paths first counted at or before `cutoff` (Unix ms) less their share
   * of `jitterMs`, or all of them.
   */
  private async doFlush(database: Pick<Database, 'db'>, cutoff: number | undefined, jitterMs: number): Promise<FlushResult> {
    if (this.keys === 0) return {rows: 0, retained: 0, ok: true}
    const entries: Entry[] = []
    let taken: Map<string, PathCounts>
    if (cutoff === undefined) {
      taken = this.pending
      this.pending = new Map()
      this.keys = 0
      for (const group of taken.values()) for (const e of group.entries) entries.push(e)
    } else {
      taken = new Map()
      for (const [path, group] of this.pending) {
        if (group.since > cutoff) break // first-seen order: the rest are younger
        if (jitterMs > 0) {
          if (group.phase < 0) group.phase = pathPhase(path)
          if (group.since > cutoff - group.phase * jitterMs) continue // not due yet
        }
        this.pending.delete(path)
        this.keys -= group.entries.length
        taken.set(path, group)
        for (const e of group.entries) entries.push(e)
      }
      if (entries.length === 0) return {rows: 0, retained: 0, ok: true}
    }
    // Each batch is upserted in primary-key order (ORDER BY in the statement), which keeps
    // concurrent replicas from deadlocking without sorting on the event loop here.
    let written = 0
    for (let i = 0; i < entries.length; i += this.batchSize) {
      const batch = entries.slice(i, i + this.batchSize)
      const started = performance.now()
      try {
        await upsertDaily(database, batch)
        written += batch.length
      } catch (first) {
        let error = first
        let rest = entries.slice(i)
        if (isRowError(first)) {
          // PostgreSQL refused a value of some row (not the connection): write the batch
          // around the rows it refuses, and drop those alone (reported as lost).
          const split = await this.writeAround(database, batch, first)
          written += split.written
          if (split.rejected.length > 0) this.reject(split.rejected, split.rowError)
          if (split.failure === undefined) continue
          error = split.failure
          rest = [...split.retained, ...entries.slice(i + this.batchSize)]
        }
        this.mergeBack(rest, taken)
        this.status.flushFailures += 1
        this.status.lastError = errorMessage(error)
        this.options.logger?.error({err: errorMessage(error), retained: rest.length}, 'stats: flush to the database failed; counts kept for the next flush')
        this.options.onFlushFailure?.(error)
        return {rows: written, retained: rest.length, ok: false, error: errorMessage(error)}
      }
      if (!this.hurry && i + this.batchSize < entries.length) await sleep(Math.min(1000, performance.now() - started))
    }
    this.status.flushes += 1
    this.status.lastFlushAt = new Date()
    return {rows: written, retained: 0, ok: true}
  }
}

/**
 * True for an error PostgreSQL raised about a value of the statement (SQLSTATE class 22, data
 * exception, e.g. a string JSON cannot carry; class 23, integrity constraint violation): the
 * same rows would fail again. Connection, resource and server errors are not row errors:
 * those counts are kept and retried.
 */
export function isRowError(error: unknown): boolean {
  const code = (error as {code?: unknown} | null)?.code
  return typeof code === 'string' && code.length === 5 && (code.startsWith('22') || code.startsWith('23'))
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

/**
 * One multi-row upsert of aggregated counts into `stats_daily` (adds, never overwrites). The
 * batch travels as one JSON array of the entries (`json_to_recordset`): `JSON.stringify` is
 * native, about a third of what building seven PostgreSQL array literals cost per key.
 */
async function upsertDaily(database: Pick<Database, 'db'>, batch: Entry[]): Promise<void> {
  const rows = JSON.stringify(batch)
  await sql`
    INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes, other_requests)
    SELECT day, path, "mirrorId", country, downloads, bytes, "otherRequests"
    FROM json_to_recordset(${rows}::json) AS x(day date, path text, "mirrorId" smallint, country char(2), downloads bigint, bytes bigint, "otherRequests" bigint)
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, path, mirror_id, country) DO UPDATE SET
      downloads = stats_daily.downloads + EXCLUDED.downloads,
      bytes = stats_daily.bytes + EXCLUDED.bytes,
      other_requests = stats_daily.other_requests + EXCLUDED.other_requests`.execute(database.db)
}

/** A running flusher; `stop()` flushes one last time (at shutdown). */
export interface StatsFlusher {
  collector: StatsCollector
  /** Flushes now (e.g. before a test reads the tables). */
  flush(): Promise<FlushResult>
  /** Stops the timer and flushes what is pending; resolves with the last flush's result. */
  stop(): Promise<FlushResult>
}

/**
 * Writes `collector` into `database` by age until stopped: every tenth of `intervalSeconds`
 * (at least 50 ms, at most 1 s; unref'd timer) it flushes, paced, the paths first counted
 * more than 0.8-0.9 of the interval ago (the share fixed per path, see
 * {@link StatsCollector.flush}). A count is written within about one interval of its
 * request, so a crash loses at most one interval of counts. After a failed flush (database
 * down) nothing is tried for one interval; the counts are kept meanwhile.
 */
export function startStatsFlusher(collector: StatsCollector, database: Pick<Database, 'db'>, intervalSeconds: number): StatsFlusher {
  const tickSeconds = Math.min(1, Math.max(0.05, intervalSeconds / 10))
  const olderThanSeconds = intervalSeconds * 0.8
  const jitterSeconds = intervalSeconds * 0.1
  let retryAt = 0
  const timer = setInterval(() => {
    // While a flush still runs (a slow database), skip this tick: the next one takes what
    // became due meanwhile, and flushes never queue up behind each other.
    if (collector.flushInProgress || Date.now() < retryAt) return
    void collector.flush(database, {paced: true, olderThanSeconds, jitterSeconds}).then((result) => {
      if (!result.ok) retryAt = Date.now() + intervalSeconds * 1000
    })
  }, tickSeconds * 1000)
  timer.unref()
  return {
    collector,
    flush: () => collector.flush(database),
    stop: async () => {
      clearInterval(timer)
      return collector.flush(database)
    },
  }
}
