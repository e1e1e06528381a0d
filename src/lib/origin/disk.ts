/**
 * The version of origin files as the disk has it now, for the request path of `mb serve`:
 * one `stat` per path at most every `maxAgeSeconds` (default 1 s), so that a file rewritten
 * at the origin is noticed within that time whether or not `mb index` or `--watch` ran,
 * while a path requested thousands of times a second costs one Map lookup per request.
 *
 * The stat is synchronous on purpose: a cached dentry answers in about a microsecond, less
 * than a round trip through libuv's thread pool, and the answer is needed before the
 * request can be answered. The cache is kept in two generations of `maxAgeSeconds` each
 * (the older one dropped whole), so it holds about twice the distinct paths requested per
 * `maxAgeSeconds`, and costs no sweep.
 */
import {type Stats, statSync} from 'node:fs'
import {sep} from 'node:path'
import {type FileVersion, mtimeSeconds} from './freshness.js'

/**
 * A synchronous `stat` (following symlinks) of absolute `path`, or undefined when it fails for
 * any reason: missing (ENOENT), a file where a directory was expected (ENOTDIR, as in
 * `file.iso/x`), a name too long, a symlink loop, no permission (EACCES). For the request path
 * each means there is nothing to serve under that name; `throwIfNoEntry: false` alone covers
 * only ENOENT.
 */
export function statIfPresent(path: string): Stats | undefined {
  try {
    return statSync(path, {throwIfNoEntry: false})
  } catch {
    return undefined
  }
}

interface Seen extends FileVersion {
  /** When the stat was made, ms since the epoch. */
  at: number
}

/** A missing path (or one that is not a regular file). */
const MISSING: FileVersion = {size: -1, mtime: -1}

/** Per-path cache of `stat` results of files below one origin root. */
export class DiskVersions {
  /** Stats made since `since`; the generation before it is kept one more period (`previous`). */
  private current = new Map<string, Seen>()
  private previous = new Map<string, Seen>()
  private since = 0
  private readonly maxAgeMs: number

  /**
   * @param root          the origin root's realpath (no trailing separator)
   * @param maxAgeSeconds how long one stat vouches for a path, seconds (0: every call stats)
   */
  constructor(
    private readonly root: string,
    maxAgeSeconds = 1,
  ) {
    this.maxAgeMs = maxAgeSeconds * 1000
  }

  /**
   * The size (bytes) and mtime (Unix seconds, UTC) of root-relative `path` on disk, from a
   * stat at most `maxAgeSeconds` old; null when it is missing or not a regular file.
   * @param now ms since the epoch (the request's start)
   */
  version(path: string, now: number): FileVersion | null {
    if (now - this.since >= this.maxAgeMs) {
      // A new generation each period: what the one before last holds is too old to use, and
      // goes without a sweep, so the cache holds about two periods' distinct paths.
      this.previous = this.current
      this.current = new Map()
      this.since = now
    }
    const seen = this.current.get(path) ?? this.previous.get(path)
    if (seen !== undefined && now - seen.at < this.maxAgeMs) return seen.size < 0 ? null : seen
    let version = MISSING
    const st = statIfPresent(this.root + sep + path)
    if (st?.isFile()) version = {size: st.size, mtime: mtimeSeconds(st)}
    if (this.maxAgeMs > 0) this.current.set(path, {at: now, size: version.size, mtime: version.mtime})
    return version.size < 0 ? null : version
  }

  /** Forgets what is known of `path` (its next {@link version} stats it). */
  forget(path: string): void {
    this.current.delete(path)
    this.previous.delete(path)
  }
}
