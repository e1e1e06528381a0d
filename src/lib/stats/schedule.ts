/**
 * When download counts are written: by age. Several times per interval the flusher writes
 * the paths whose first unflushed count is older than most of the interval, oldest first
 * (paced, ./pacing.ts). Each path is still written about once per interval (the same
 * aggregation as one flush of everything per interval), no count waits longer than one
 * interval, and the database works as a steady trickle beside the requests instead of a
 * burst once per interval, which slowed the slowest requests.
 *
 * Each path falls due at its own share of a jitter window (a hash of the path): paths first
 * counted together (the busy ones, after a start) fall due spread over that window, and
 * since each path then keeps its own period, they drift apart instead of reaching the
 * database together at every interval.
 */
import type {Database} from '../db/index.js'
import {fnv1a32} from '../select/hash.js'
import type {FlushResult, StatsCollector} from './collector.js'
import type {Entry, PathCounts, PendingCounts, Taken} from './pending.js'

/** A hash of `path` scaled to [0, 1): where in a jitter window the path falls due. */
function pathPhase(path: string): number {
  return fnv1a32(path) / 4_294_967_296
}

/**
 * Takes out of `pending` the paths first counted at or before `cutoff` (Unix ms) less their
 * share of `jitterMs`, oldest first; later counts of those paths go with them.
 */
export function takeDue(pending: PendingCounts, cutoff: number, jitterMs: number): Taken {
  const entries: Entry[] = []
  const groups = new Map<string, PathCounts>()
  for (const [path, group] of pending.groups()) {
    if (group.since > cutoff) break // first-seen order: the rest are younger
    if (jitterMs > 0) {
      if (group.phase < 0) group.phase = pathPhase(path)
      if (group.since > cutoff - group.phase * jitterMs) continue // not due yet
    }
    const taken = pending.take(path, group)
    groups.set(path, taken)
    for (const e of taken.entries) entries.push(e)
  }
  return {entries, groups}
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
