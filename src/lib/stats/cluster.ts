/**
 * Download counting under `mb serve --workers N` (src/lib/redirector/cluster.ts): the workers
 * count as a single process does, but hand their counts over the cluster IPC channel to the
 * primary instead of writing them; the primary sums them by key (the same pending counts,
 * ./pending.ts) and alone writes `stats_daily`, so each (day, path, mirror, country) is
 * written once per interval however many workers counted it.
 *
 * Timing: a worker hands a path over once it is 0.4-0.5 of the flush interval old (its
 * first count's request time, carried along), the primary writes it at 0.8-0.9 as a single
 * process would (./schedule.ts): a count still reaches the database within about one
 * interval, and each worker serializes a path about twice per interval.
 *
 * Nothing is lost at a worker's stop (SIGTERM, or SIGUSR2 replacing it): its last hand-off
 * is sent before it closes the IPC channel, and the primary waits for that channel to close
 * (every message read) before it counts the worker as stopped; at its own stop the primary
 * writes what it holds. A database outage is the primary's to ride out: it keeps the counts
 * and retries, as a single process does (./collector.ts).
 */
import cluster, {type Worker} from 'node:cluster'
import {type Database, openDatabase} from '../db/index.js'
import type {FlushResult, StatsLogger} from './collector.js'
import {StatsCollector} from './collector.js'
import type {StatsConfig} from './config.js'
import type {PathCounts} from './pending.js'
import {reportLastFlush, type StatsFlusher, startStatsFlusher} from './flusher.js'

/** The IPC message of a worker's hand-off: path groups of (day, path, mirror, country) counts. */
interface StatsMessage {
  type: 'mb:stats'
  groups: PathCounts[]
}

function isStatsMessage(message: unknown): message is StatsMessage {
  return typeof message === 'object' && message !== null && (message as {type?: unknown}).type === 'mb:stats' && Array.isArray((message as {groups?: unknown}).groups)
}

/** Sends `groups` to the cluster primary; resolves once the message is written to the channel. */
function sendToPrimary(groups: PathCounts[]): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (!process.send || !process.connected) return reject(new Error('the IPC channel to the cluster primary is closed'))
    const message: StatsMessage = {type: 'mb:stats', groups}
    process.send(message, undefined, {}, (error) => (error ? reject(error) : resolve()))
  })
}

/**
 * In a `--workers` worker: hands `collector`'s counts to the cluster primary until stopped
 * (the module doc's timing; every tenth of the interval, at least 50 ms, at most 1 s,
 * unref'd). `stop()` hands over everything left, and must run before the IPC channel is
 * closed. The same interface as the single process's {@link startStatsFlusher}.
 * @param options.send how a batch travels (default: the cluster IPC channel; tests pass their own)
 * @param options.logger told at `stop()` how many keys this worker handed over in all
 * @param options.database where the worker writes its countme and origin counts itself, once per interval
 *        and at `stop()` (few keys per day: summing them in the primary would save nothing)
 */
export function startStatsForwarder(
  collector: StatsCollector,
  intervalSeconds: number,
  options: {send?: (groups: PathCounts[]) => Promise<void>; logger?: StatsLogger; database?: Pick<Database, 'db'>} = {},
): StatsFlusher {
  const send = options.send ?? sendToPrimary
  const tickSeconds = Math.min(1, Math.max(0.05, intervalSeconds / 10))
  const due = {olderThanSeconds: intervalSeconds * 0.4, jitterSeconds: intervalSeconds * 0.1}
  const timer = setInterval(() => {
    if (!collector.flushInProgress) void collector.handOff(send, due)
  }, tickSeconds * 1000)
  timer.unref()
  const {database} = options
  const dayCountsTimer = database && setInterval(() => void collector.flushDayCounts(database), intervalSeconds * 1000)
  dayCountsTimer?.unref()
  const all = () => collector.handOff(send)
  return {
    collector,
    flush: all,
    stop: async () => {
      clearInterval(timer)
      clearInterval(dayCountsTimer)
      const last = await all()
      if (database) await collector.flushDayCounts(database)
      options.logger?.info?.({keysHandedOff: collector.status.keysHandedOff, handOffs: collector.status.flushes}, 'stats: handed the counts to the cluster primary')
      return last
    },
  }
}

/** The cluster primary's counting: its collector (the workers' sum) and flusher. */
export interface ClusterCounting {
  collector: StatsCollector
  /** Stops listening, writes what is pending, closes the database; resolves with the last flush. Call after every worker has stopped. */
  stop(): Promise<FlushResult>
}

/**
 * In the `--workers` cluster primary: opens PostgreSQL at `url`, sums every worker's
 * hand-offs and writes them on the interval of `stats.flush_interval_seconds`. Call before
 * the first worker is forked.
 * @throws MbError when the database cannot be opened
 */
export async function startClusterCounting(url: string, stats: StatsConfig, logger: StatsLogger & {info(obj: object, msg?: string): void}): Promise<ClusterCounting> {
  const database = await openDatabase({url, poolSize: 2})
  const collector = new StatsCollector({maxPendingKeys: stats.max_pending_keys, logger})
  const onMessage = (_worker: Worker, message: unknown) => {
    if (isStatsMessage(message)) collector.merge(message.groups)
  }
  cluster.on('message', onMessage)
  const flusher = startStatsFlusher(collector, database, stats.flush_interval_seconds)
  return {
    collector,
    stop: async () => {
      cluster.off('message', onMessage)
      const last = await flusher.stop()
      const {rowsWritten, statements, flushes, flushFailures} = collector.status
      reportLastFlush(last, collector, logger)
      logger.info({rowsWritten, statements, flushes, flushFailures}, "stats: the primary wrote the workers' summed counts")
      await database.close()
      return last
    },
  }
}
