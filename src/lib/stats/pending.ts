/**
 * The unflushed download counts of one `mb serve` process, in memory: by path, then a short
 * list of (day, mirror, country) entries. The path is the key because the request's path
 * string already carries its hash (the snapshot lookup computed it): a composite key string
 * would be built and hashed on every request. Paths keep their first-seen order: the flusher
 * takes the oldest first, and drop-oldest works on whole paths.
 */
import {addCounts, type StatsCounts} from './count.js'

/** The counts of one (day, path, mirror, country) key; the row of `stats_daily` it adds to. */
export interface Entry extends StatsCounts {
  /** UTC day, `YYYY-MM-DD`. */
  day: string
  path: string
  /** 0 = the origin. */
  mirrorId: number
  country: string
}

/** The unflushed entries of one path. */
export interface PathCounts {
  /** When the first of them was counted (the request's time, Unix ms). */
  since: number
  /** The path's place in [0, 1) among the due times (a hash of the path; -1 until computed, see ./schedule.ts). */
  phase: number
  entries: Entry[]
}

/** Entries taken out for a flush, and the path groups they came from (to put them back). */
export interface Taken {
  entries: Entry[]
  groups: ReadonlyMap<string, PathCounts>
}

/** Counts and entries lost. */
export type Lost = StatsCounts & {keys: number}

/**
 * The entries of `groups`, path by path in code-unit order of the paths (each path's entries
 * in the order they were first counted). Rows written in path order reach neighbouring index
 * and heap pages one after another: a flush alone cost PostgreSQL 20-30% less CPU per new
 * row than in arrival order, and about the same per row added to (bench/stats.ts); under
 * `mb serve`, whose requests cool the caches between paced batches, 11% less per row
 * (medians of four interleaved serve benchmarks, docs/benchmarks.md). Only the paths are sorted (a few ms per 20,000 paths on the event loop); sorting
 * every entry took ten times as long, and each upsert sorts its batch by the whole key
 * anyway (./flush.ts).
 */
export function inPathOrder(groups: ReadonlyMap<string, PathCounts>): Entry[] {
  const entries: Entry[] = []
  for (const path of [...groups.keys()].sort()) for (const e of groups.get(path)!.entries) entries.push(e)
  return entries
}

/** The pending counts (see the module doc). */
export class PendingCounts {
  private paths = new Map<string, PathCounts>()
  private count = 0

  /** Number of distinct keys pending. */
  get keys(): number {
    return this.count
  }

  /** The pending entry of a key, created (with zero counts) when the key is new; `since` dates a new path. */
  entry(day: string, path: string, mirrorId: number, country: string, since: number): Entry {
    let group = this.paths.get(path)
    if (group === undefined) {
      group = {since, phase: -1, entries: []}
      this.paths.set(path, group)
    }
    const list = group.entries
    for (let i = 0; i < list.length; i++) {
      const e = list[i]
      if (e.mirrorId === mirrorId && e.country === country && e.day === day) return e
    }
    const e: Entry = {day, path, mirrorId, country, downloads: 0, bytes: 0, otherRequests: 0}
    list.push(e)
    this.count += 1
    return e
  }

  /** Sum of the pending counts. */
  totals(): StatsCounts {
    const t = {downloads: 0, bytes: 0, otherRequests: 0}
    for (const group of this.paths.values()) for (const e of group.entries) addCounts(t, e)
    return t
  }

  /** The path groups, oldest first (a group may be removed with {@link remove} meanwhile). */
  groups(): IterableIterator<[string, PathCounts]> {
    return this.paths.entries()
  }

  /** Removes the group of `path`. */
  remove(path: string, group: PathCounts): void {
    this.paths.delete(path)
    this.count -= group.entries.length
  }

  /** Takes every pending entry out. */
  takeAll(): Taken {
    const groups = this.paths
    this.paths = new Map()
    this.count = 0
    const entries: Entry[] = []
    for (const group of groups.values()) for (const e of group.entries) entries.push(e)
    return {entries, groups}
  }

  /** Drops whole paths, oldest first, until at most `target` keys remain; returns what was dropped. */
  dropOldest(target: number): Lost {
    const lost = {keys: 0, downloads: 0, bytes: 0, otherRequests: 0}
    for (const [path, group] of this.paths) {
      if (this.count <= target) break
      this.remove(path, group)
      lost.keys += group.entries.length
      for (const e of group.entries) addCounts(lost, e)
    }
    return lost
  }

  /**
   * Puts the entries of a failed flush back, before what arrived since (they are older), each
   * path with the time it was first counted (`since`, from the groups they were taken with).
   * Whatever order `entries` come in (a flush writes them in path order), the paths go back
   * oldest `since` first: ./schedule.ts stops at the first path not yet due.
   */
  putBack(entries: readonly Entry[], taken: ReadonlyMap<string, PathCounts>): void {
    const arrived = this.paths
    this.paths = new Map()
    this.count = 0
    const since = (e: Entry) => taken.get(e.path)?.since ?? 0
    for (const e of [...entries].sort((a, b) => since(a) - since(b))) this.add(e, since(e))
    for (const group of arrived.values()) for (const e of group.entries) this.add(e, group.since)
  }

  /** Adds path groups counted elsewhere (another process's), summing keys already pending; a new path keeps its group's `since`. */
  merge(groups: readonly PathCounts[]): void {
    for (const group of groups) for (const e of group.entries) this.add(e, group.since)
  }

  /** Adds `e`'s counts to its key. */
  private add(e: Entry, since: number): void {
    addCounts(this.entry(e.day, e.path, e.mirrorId, e.country, since), e)
  }
}
