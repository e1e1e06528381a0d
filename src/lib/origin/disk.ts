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
 *
 * With an {@link OriginWatch} (./watch.ts), a file in a watched directory is stat()ed once and
 * then believed until an event names it or its directory loses that watch: inotify hears a
 * rename into place, an in-place rewrite (`cat >`, rsync `--inplace`) and a removal alike, so
 * the guarantee holds with no stat per period. Those entries sit in a map of their own, with
 * no expiry (cleared whole past {@link WATCHED_ENTRIES}). Symlinks and files with more than one
 * hard link are not believed this way: a write through another name is heard in another
 * directory, or not at all.
 */
import {lstatSync, type Stats, statSync} from 'node:fs'
import {sep} from 'node:path'
import {type FileVersion, mtimeSeconds} from './freshness.js'
import type {OriginWatch} from './watch.js'

/** Entries vouched for by a watch, at most (about 100 MB at 1,000,000 paths); the map is emptied whole past it. */
const WATCHED_ENTRIES = 2_000_000

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

interface Vouched extends FileVersion {
  /** The token of the directory's watch when the stat was made ({@link OriginWatch.token}). */
  token: number
  /** {@link OriginWatch.removals} when the token was last seen in place. */
  removals: number
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
  /** Files in watched directories, believed until an event or a new watch. */
  private vouched = new Map<string, Vouched>()
  /** Stats made so far (for tests and benchmarks). */
  stats = 0

  /**
   * @param root          the origin root's realpath (no trailing separator)
   * @param maxAgeSeconds how long one stat vouches for a path, seconds (0: every call stats)
   * @param watch         the watch of `root`'s directories, if any: see the module comment
   */
  constructor(
    private readonly root: string,
    maxAgeSeconds = 1,
    private readonly watch?: OriginWatch,
  ) {
    this.maxAgeMs = maxAgeSeconds * 1000
    watch?.onChange((path) => this.forget(path))
  }

  /**
   * The size (bytes) and mtime (Unix seconds, UTC) of root-relative `path` on disk, from a
   * stat at most `maxAgeSeconds` old, or in a watched directory from a stat that no event has
   * named since; null when it is missing or not a regular file.
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
    const watch = this.watch
    if (watch === undefined || this.maxAgeMs === 0) return this.cachedOrStat(path, now, undefined)
    const v = this.vouched.get(path)
    // No watch removed since the token was seen: it is still in place, without a look-up of the directory.
    if (v !== undefined && v.removals === watch.removals) return v.size < 0 ? null : v
    const token = watch.token(dirOf(path))
    if (v !== undefined && v.token === token) {
      v.removals = watch.removals
      return v.size < 0 ? null : v
    }
    return this.cachedOrStat(path, now, token)
  }

  /** The answer of a stat at most `maxAgeSeconds` old, or of a new one ({@link stat}). */
  private cachedOrStat(path: string, now: number, token: number | undefined): FileVersion | null {
    const seen = this.current.get(path) ?? this.previous.get(path)
    if (seen === undefined || now - seen.at >= this.maxAgeMs) return this.stat(path, now, token)
    return seen.size < 0 ? null : seen
  }

  /** Stats `path` and caches the answer: vouched for by the watch `token` when the file may be, else for `maxAgeSeconds`. */
  private stat(path: string, now: number, token: number | undefined): FileVersion | null {
    this.stats++
    let version = MISSING
    let believable = token !== undefined
    const absolute = this.root + sep + path
    let st = token === undefined ? statIfPresent(absolute) : lstatIfPresent(absolute)
    if (st?.isSymbolicLink()) {
      believable = false
      st = statIfPresent(absolute)
    }
    if (st?.isFile()) {
      version = {size: st.size, mtime: mtimeSeconds(st)}
      if (st.nlink > 1) believable = false
    }
    if (believable) {
      if (this.vouched.size >= WATCHED_ENTRIES) this.vouched = new Map()
      this.vouched.set(path, {token: token as number, removals: (this.watch as OriginWatch).removals, size: version.size, mtime: version.mtime})
    } else if (this.maxAgeMs > 0) this.current.set(path, {at: now, size: version.size, mtime: version.mtime})
    return version.size < 0 ? null : version
  }

  /** Forgets what is known of `path` (its next {@link version} stats it). */
  forget(path: string): void {
    this.current.delete(path)
    this.previous.delete(path)
    this.vouched.delete(path)
  }
}

/** The root-relative directory of root-relative `path` ('' for the root). */
function dirOf(path: string): string {
  const slash = path.lastIndexOf('/')
  return slash < 0 ? '' : path.slice(0, slash)
}

/** {@link statIfPresent} without following a final symlink (`lstat`). */
function lstatIfPresent(path: string): Stats | undefined {
  try {
    return lstatSync(path, {throwIfNoEntry: false})
  } catch {
    return undefined
  }
}
