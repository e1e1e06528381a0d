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
 *
 * The timer that flushes on an interval is ./flusher.ts.
 */
import {fnv1a32} from '../select/hash.js'
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
