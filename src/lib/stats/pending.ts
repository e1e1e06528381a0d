/**
 * The unflushed download counts of one `mb serve` process, in memory: by path, then a short
 * list of (day, mirror, country) keys. The path is the key because the request's path
 * string already carries its hash (the snapshot lookup computed it): a composite key string
 * would be built and hashed on every request. Paths keep their first-seen order: the flusher
 * takes the oldest first, and drop-oldest works on whole paths.
 *
 * A path's keys and counts are numbers in one flat array ({@link STRIDE} per key), not an
 * object per key: a count to a key already pending allocates nothing, and the collector has
 * no objects to copy and mark for the keys that wait in memory for most of an interval (in
 * the serve benchmark, about 1 µs of 37 per redirect and 10 MB of RSS less than an object
 * per key).
 * {@link Entry} objects, the rows written and the shape handed to the cluster primary, are
 * made only when counts are taken out.
 */
import {countedCountry, type StatsCounts} from './count.js'

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

/**
 * The layout of one key in {@link PendingPath.keys}: mirror id, country (its two character
 * codes as `c0 << 8 | c1`), day (an index into the days pending), then the counts.
 */
const MIRROR = 0
const COUNTRY = 1
const DAY = 2
const DOWNLOADS = 3
const BYTES = 4
const OTHER = 5
const STRIDE = 6

/** The pending keys of one path. */
export interface PendingPath {
  /** When its first pending count was counted (the request's time, Unix ms). */
  since: number
  /** The path's place in [0, 1) among the due times (-1 until ./schedule.ts computes it). */
  phase: number
  /** {@link STRIDE} numbers per key, in the order the keys were first counted. */
  keys: number[]
}

/** `country` (two characters, as ./count.ts normalises it) as one number. */
function countryCode(country: string): number {
  return (country.charCodeAt(0) << 8) | country.charCodeAt(1)
}

/** The countries decoded so far, by code (a flush decodes each key's). */
const countryNames = new Map<number, string>()

function countryName(code: number): string {
  let name = countryNames.get(code)
  if (name === undefined) {
    name = String.fromCharCode(code >> 8, code & 0xff)
    countryNames.set(code, name)
  }
  return name
}

/** The pending counts (see the module doc). */
export class PendingCounts {
  private paths = new Map<string, PendingPath>()
  /** The UTC days (`YYYY-MM-DD`) that keys refer to by index; emptied with the counts. */
  private days: string[] = []
  private count = 0

  /** Number of distinct keys pending. */
  get keys(): number {
    return this.count
  }

  /**
   * Adds `counts` to the key (day, path, mirror, country), created when new; `since` dates
   * a new path.
   * @param country two characters (`countedCountry`, ./count.ts)
   */
  add(day: string, path: string, mirrorId: number, country: string, since: number, counts: StatsCounts): void {
    let group = this.paths.get(path)
    if (group === undefined) {
      group = {since, phase: -1, keys: []}
      this.paths.set(path, group)
    }
    const d = this.dayIndex(day)
    const cc = countryCode(country)
    const keys = group.keys
    for (let i = 0; i < keys.length; i += STRIDE) {
      if (keys[i + MIRROR] === mirrorId && keys[i + COUNTRY] === cc && keys[i + DAY] === d) {
        keys[i + DOWNLOADS] += counts.downloads
        keys[i + BYTES] += counts.bytes
        keys[i + OTHER] += counts.otherRequests
        return
      }
    }
    keys.push(mirrorId, cc, d, counts.downloads, counts.bytes, counts.otherRequests)
    this.count += 1
  }

  /** The index of `day` in {@link days}, added when new (the current day is the last: found first). */
  private dayIndex(day: string): number {
    const days = this.days
    for (let i = days.length - 1; i >= 0; i--) if (days[i] === day) return i
    days.push(day)
    return days.length - 1
  }

  /** Sum of the pending counts. */
  totals(): StatsCounts {
    const t = {downloads: 0, bytes: 0, otherRequests: 0}
    for (const group of this.paths.values()) addKeyCounts(t, group.keys)
    return t
  }

  /** The path groups, oldest first (a group may be taken with {@link take} meanwhile). */
  groups(): IterableIterator<[string, PendingPath]> {
    return this.paths.entries()
  }

  /** Takes the group of `path` out, as the entries of one path. */
  take(path: string, group: PendingPath): PathCounts {
    this.paths.delete(path)
    this.count -= group.keys.length / STRIDE
    const taken = {since: group.since, phase: group.phase, entries: this.entries(path, group.keys)}
    if (this.count === 0) this.days = []
    return taken
  }

  /** Takes every pending entry out. */
  takeAll(): Taken {
    const groups = new Map<string, PathCounts>()
    const entries: Entry[] = []
    for (const [path, group] of this.paths) {
      const taken = this.take(path, group)
      groups.set(path, taken)
      for (const e of taken.entries) entries.push(e)
    }
    return {entries, groups}
  }

  /** The keys of `path` as entries. */
  private entries(path: string, keys: number[]): Entry[] {
    const entries: Entry[] = new Array(keys.length / STRIDE)
    for (let i = 0, n = 0; i < keys.length; i += STRIDE, n++) {
      entries[n] = {
        day: this.days[keys[i + DAY]],
        path,
        mirrorId: keys[i + MIRROR],
        country: countryName(keys[i + COUNTRY]),
        downloads: keys[i + DOWNLOADS],
        bytes: keys[i + BYTES],
        otherRequests: keys[i + OTHER],
      }
    }
    return entries
  }

  /** Drops whole paths, oldest first, until at most `target` keys remain; returns what was dropped. */
  dropOldest(target: number): Lost {
    const lost = {keys: 0, downloads: 0, bytes: 0, otherRequests: 0}
    for (const [path, group] of this.paths) {
      if (this.count <= target) break
      const n = group.keys.length / STRIDE
      this.paths.delete(path)
      this.count -= n
      lost.keys += n
      addKeyCounts(lost, group.keys)
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
    const arrived = this.takeAll()
    const since = (e: Entry) => taken.get(e.path)?.since ?? 0
    for (const e of [...entries].sort((a, b) => since(a) - since(b))) this.add(e.day, e.path, e.mirrorId, e.country, since(e), e)
    this.merge([...arrived.groups.values()])
  }

  /**
   * Adds path groups counted elsewhere (another process's), summing keys already pending; a
   * new path keeps its group's `since`. A country that is not two capital letters is counted
   * as unknown (`--`, as ./count.ts does), so a malformed message cannot mangle a key.
   */
  merge(groups: readonly PathCounts[]): void {
    for (const group of groups) for (const e of group.entries) this.add(e.day, e.path, e.mirrorId, countedCountry(e.country), group.since, e)
  }
}

/** Adds the counts of every key in `keys` (a {@link PendingPath}'s) to `target`. */
function addKeyCounts(target: StatsCounts, keys: readonly number[]): void {
  for (let i = 0; i < keys.length; i += STRIDE) {
    target.downloads += keys[i + DOWNLOADS]
    target.bytes += keys[i + BYTES]
    target.otherRequests += keys[i + OTHER]
  }
}
