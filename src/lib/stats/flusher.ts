/**
 * The interval flusher of download counts in `mb serve`: it flushes the collector's due
 * counts several times per interval (what is due: ./schedule.ts) and everything at shutdown.
 */
import type {Database} from '../db/index.js'
import type {FlushResult, StatsCollector, StatsLogger} from './collector.js'

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
 * more than 0.8-0.9 of the interval ago (the share fixed per path, see the module doc). A
 * count is written within about one interval of its request, so a crash loses at most one
 * interval of counts. After a failed flush (database down) nothing is tried for one
 * interval; the counts are kept meanwhile.
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

/**
 * Logs a last flush (`stop()`'s result) that failed, with what it loses: the downloads,
 * bytes and other requests still pending in `collector`, and the keys (day x path x mirror x
 * country rows) they make up. Nothing is logged when the flush succeeded.
 */
export function reportLastFlush(last: FlushResult, collector: StatsCollector, logger: StatsLogger): void {
  if (last.ok) return
  const {downloads, bytes, otherRequests} = collector.pendingTotals()
  logger.error({downloads, bytes, otherRequests, keys: last.retained, err: last.error}, 'stats: the last flush at shutdown failed; these counts are lost')
}
