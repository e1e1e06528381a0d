/**
 * The version of origin files as the disk has it now, for the request path of `mb serve`:
 * one `stat` per path at most every `maxAgeSeconds` (default 1 s), so that a file rewritten
 * at the origin is noticed within that time whether or not `mb index` or `--watch` ran,
 * while a path requested thousands of times a second costs one Map lookup per request.
 *
 * The stat is synchronous on purpose: a cached dentry answers in about a microsecond, less
 * than a round trip through libuv's thread pool, and the answer is needed before the
 * request can be answered. Entries older than `maxAgeSeconds` are swept out when the cache
 * holds `maxEntries` paths (a sweep per `maxEntries` insertions at most), so its size stays
 * about (distinct paths requested per second) × `maxAgeSeconds`.
 */
import {statSync} from 'node:fs'
import {sep} from 'node:path'
import {type FileVersion, mtimeSeconds} from './freshness.js'

interface Seen extends FileVersion {
  /** When the stat was made, ms since the epoch. */
  at: number
}

/** A missing path (or one that is not a regular file). */
const MISSING: FileVersion = {size: -1, mtime: -1}

/** Per-path cache of `stat` results of files below one origin root. */
export class DiskVersions {
  private readonly seen = new Map<string, Seen>()
  private readonly maxAgeMs: number

  /**
   * @param root          the origin root's realpath (no trailing separator)
   * @param maxAgeSeconds how long one stat vouches for a path, seconds (0: every call stats)
   * @param maxEntries    cache size that starts a sweep of expired entries
   */
  constructor(
    private readonly root: string,
    maxAgeSeconds = 1,
    private readonly maxEntries = 200_000,
  ) {
    this.maxAgeMs = maxAgeSeconds * 1000
  }

  /**
   * The size (bytes) and mtime (Unix seconds, UTC) of root-relative `path` on disk, from a
   * stat at most `maxAgeSeconds` old; null when it is missing or not a regular file.
   * @param now ms since the epoch (the request's start)
   */
  version(path: string, now: number): FileVersion | null {
    const seen = this.seen.get(path)
    if (seen !== undefined && now - seen.at < this.maxAgeMs) return seen.size < 0 ? null : seen
    let version = MISSING
    try {
      const st = statSync(this.root + sep + path, {throwIfNoEntry: false})
      if (st?.isFile()) version = {size: st.size, mtime: mtimeSeconds(st)}
    } catch {
      /* unreadable (EACCES, ENOTDIR): as missing */
    }
    if (this.maxAgeMs > 0) {
      if (seen === undefined && this.seen.size >= this.maxEntries) this.sweep(now)
      this.seen.set(path, {at: now, size: version.size, mtime: version.mtime})
    }
    return version.size < 0 ? null : version
  }

  /** Forgets what is known of `path` (its next {@link version} stats it). */
  forget(path: string): void {
    this.seen.delete(path)
  }

  /** Drops expired entries; everything when too few expired (a flood of distinct paths). */
  private sweep(now: number): void {
    for (const [path, s] of this.seen) if (now - s.at >= this.maxAgeMs) this.seen.delete(path)
    if (this.seen.size >= this.maxEntries / 2) this.seen.clear()
  }
}
