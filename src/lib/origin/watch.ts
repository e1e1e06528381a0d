/**
 * Watches the directories of the origin tree: one inotify watch per directory (`fs.watch`
 * without `recursive`, which on Linux is an inotify watch of that directory and reports every
 * entry of it that is created, written, renamed or removed), shared by the disk check of the
 * request path (./disk.ts) and `mb serve --watch` (src/lib/serve/snapshot/watch.ts).
 *
 * Node 20's `recursive: true` on Linux is no help at scale: it places a watch on every file as
 * well as every directory (a 1,000,000-file tree would need 1,000,000 watches) and stats each
 * file when it starts.
 *
 * A directory is watched or not. Each watch has a token (a number, new for every watch), so
 * that what was learnt under a watch is trusted only while that same watch is in place: a
 * directory renamed, removed or replaced loses its watch and its token, and what the disk
 * check knew of its files stops counting at once, without a sweep. Directories beyond the
 * watch limit (`maxWatches`, or the kernel's `fs.inotify.max_user_watches` when it refuses a
 * watch with ENOSPC) stay unwatched; their files keep the per-second stat. The root is not
 * watched at all on a network file system (NFS, SMB, Ceph, FUSE, …), where inotify does not
 * hear of writes made by other machines.
 *
 * Not heard by inotify, and so not covered: writes through a shared memory mapping, writes
 * through a hard link in another directory (./disk.ts does not trust files with more than one
 * link), and a kernel event queue overflow (`fs.inotify.max_queued_events`, which libuv drops
 * without telling).
 */
import {type Dirent, type FSWatcher, lstatSync, readFileSync, statfsSync, watch as fsWatch} from 'node:fs'
import {readdir} from 'node:fs/promises'
import {sep} from 'node:path'
import type {Logger} from 'pino'

/** `statfs` magic numbers of network and user-space file systems (linux/magic.h), where inotify misses remote writes. */
const REMOTE_FILE_SYSTEMS = new Set([0x6969, 0x517b, 0xff534d42, 0xfe534d42, 0x00c36400, 0x65735546, 0x01021997, 0x5346414f, 0x73757245, 0x01161970, 0x7461636f, 0x0bd00bd0])

/** What the watch covers, for logs and `mb serve`'s start line. */
export interface WatchReport {
  /** Directories with a watch now. */
  watched: number
  /** Directories seen but left unwatched (over the limit, or a watch failed). */
  unwatched: number
  /** The kernel's `fs.inotify.max_user_watches` (per user, all processes), when readable. */
  limit: number | undefined
  /** Whether a watch was refused for the limit (ENOSPC or `maxWatches`). */
  limitHit: boolean
  /** Why nothing is watched (a network file system), if so. */
  disabled?: string
}

/** How an {@link OriginWatch} is set up. */
export interface OriginWatchOptions {
  /** Watches at most this many directories (default: half the kernel's limit, leaving room for other programs). */
  maxWatches?: number
  logger?: Logger
  /** `fs.watch`, replaceable in tests (a watch that fails). */
  watch?: (path: string, listener: (event: string, name: string | null) => void) => FSWatcher
}

interface Watched {
  watcher: FSWatcher
  token: number
  /** The directory's inode when the watch was placed: another inode at the path is another directory. */
  ino: number
}

/** The kernel's per-user inotify watch limit, or undefined where it cannot be read (not Linux). */
function inotifyWatchLimit(): number | undefined {
  try {
    return Number(readFileSync('/proc/sys/fs/inotify/max_user_watches', 'utf8').trim()) || undefined
  } catch {
    return undefined
  }
}

/** Watches of the directories below one origin root (its realpath); see the module comment. */
export class OriginWatch {
  private readonly dirs = new Map<string, Watched>()
  private readonly listeners = new Set<(path: string) => void>()
  private readonly skipped = new Set<string>()
  private nextToken = 1
  /**
   * Counts the times watches were removed: while it stays the same, every token handed out is
   * still in place, so a token seen under the same count needs no look-up ({@link token}).
   */
  removals = 0
  private closed = false
  private limitHit = false
  private disabled: string | undefined
  readonly limit = inotifyWatchLimit()
  private readonly maxWatches: number
  /** Settles when the tree as it was at the start is watched (as far as the limit allows). */
  readonly ready: Promise<void>

  /** Starts watching every directory below `root` (absolute, a realpath, no trailing separator), walking it in the background. */
  constructor(
    private readonly root: string,
    private readonly options: OriginWatchOptions = {},
  ) {
    this.maxWatches = options.maxWatches ?? Math.floor((this.limit ?? 16384) / 2)
    const type = safeStatfsType(root)
    if (type !== undefined && REMOTE_FILE_SYSTEMS.has(type)) this.disabled = `network or user-space file system (statfs type 0x${type.toString(16)}): inotify misses remote writes`
    this.ready = (this.disabled === undefined ? this.addTree('', false) : Promise.resolve()).then(() => options.logger?.info({root, ...this.report()}, 'origin directories watched (inotify)'))
  }

  /** The token of the watch on root-relative directory `dir` ('' = the root), or undefined when it is not watched. */
  token(dir: string): number | undefined {
    return this.dirs.get(dir)?.token
  }

  /** Calls `listener` with the root-relative path (`/`-separated) of every entry an event names. */
  onChange(listener: (path: string) => void): () => void {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** The watch count, the limit and what was left out. */
  report(): WatchReport {
    return {watched: this.dirs.size, unwatched: this.skipped.size, limit: this.limit, limitHit: this.limitHit, ...(this.disabled ? {disabled: this.disabled} : {})}
  }

  /** Removes every watch. */
  close(): void {
    this.closed = true
    this.removals++
    for (const w of this.dirs.values()) w.watcher.close()
    this.dirs.clear()
    this.listeners.clear()
  }

  private abs(dir: string): string {
    return dir === '' ? this.root : this.root + sep + dir.split('/').join(sep)
  }

  /**
   * Watches `dir` and the directories below it (not following symlinks). With `announce`
   * (a directory that appeared after the start), every entry found is reported as changed.
   */
  private async addTree(dir: string, announce: boolean): Promise<void> {
    const queue = [dir]
    while (queue.length > 0 && !this.closed) {
      const next = queue.shift() as string
      if (!this.watchOne(next)) this.skipped.add(next)
      let entries: Dirent[]
      try {
        entries = await readdir(this.abs(next), {withFileTypes: true})
      } catch {
        continue // gone meanwhile: its parent's event says so
      }
      for (const e of entries) {
        const path = next === '' ? e.name : `${next}/${e.name}`
        if (announce) this.emit(path)
        if (e.isDirectory()) queue.push(path)
      }
    }
  }

  /** Places the watch on one directory; false when the limit or the kernel refuses it. */
  private watchOne(dir: string): boolean {
    if (this.closed || this.dirs.has(dir)) return true
    if (this.dirs.size >= this.maxWatches) return this.refuse(dir, undefined)
    try {
      const ino = lstatSync(this.abs(dir)).ino
      const watch = this.options.watch ?? ((path, listener) => fsWatch(path, {persistent: false}, listener))
      const watcher = watch(this.abs(dir), (event, name) => this.event(dir, event, name))
      watcher.on('error', () => {
        this.unwatchTree(dir)
        this.skipped.add(dir)
      })
      this.dirs.set(dir, {watcher, token: this.nextToken++, ino})
      this.skipped.delete(dir)
      return true
    } catch (error) {
      return this.refuse(dir, error as NodeJS.ErrnoException)
    }
  }

  private refuse(dir: string, error: NodeJS.ErrnoException | undefined): false {
    const first = !this.limitHit
    if (error === undefined || error.code === 'ENOSPC') this.limitHit = true
    if (first || (error !== undefined && error.code !== 'ENOSPC'))
      this.options.logger?.warn(
        {dir, err: error?.message ?? `maxWatches ${this.maxWatches}`, limit: this.limit},
        'cannot watch an origin directory; its files are stat()ed on each request instead (at most once per disk_check_seconds)',
      )
    return false
  }

  /**
   * One inotify event in `dir` about entry `name`. A rename or removal of a watched
   * subdirectory drops the watches below it (their tokens with them) and watches what is
   * there now; a change of `dir` itself (its own removal or rename) is checked by its inode.
   */
  private event(dir: string, event: string, name: string | null): void {
    if (this.closed) return
    if (name === null) {
      this.recheck(dir)
      return
    }
    const path = dir === '' ? name : `${dir}/${name}`
    this.emit(path)
    if (event !== 'rename') return
    if (this.dirs.has(path) || this.skipped.has(path)) this.unwatchTree(path)
    this.recheck(dir)
    let isDir = false
    try {
      isDir = lstatSync(this.abs(path), {throwIfNoEntry: false})?.isDirectory() === true
    } catch {
      /* gone again */
    }
    if (isDir && !this.dirs.has(path)) void this.addTree(path, true)
  }

  /** Drops `dir`'s watches when another directory (or nothing) is now at its path, and watches what is there. */
  private recheck(dir: string): void {
    const w = this.dirs.get(dir)
    if (w === undefined) return
    let ino: number | undefined
    try {
      ino = lstatSync(this.abs(dir), {throwIfNoEntry: false})?.ino
    } catch {
      ino = undefined
    }
    if (ino === w.ino) return
    this.unwatchTree(dir)
    if (ino !== undefined) void this.addTree(dir, true)
  }

  /** Removes the watches of `dir` and of every directory below it. */
  private unwatchTree(dir: string): void {
    this.removals++
    const prefix = `${dir}/`
    for (const [d, w] of this.dirs) {
      if (d === dir || d.startsWith(prefix) || dir === '') {
        w.watcher.close()
        this.dirs.delete(d)
      }
    }
    for (const d of this.skipped) if (d === dir || d.startsWith(prefix)) this.skipped.delete(d)
  }

  private emit(path: string): void {
    for (const l of this.listeners) l(path)
  }
}

/** The `statfs` type of `path`, or undefined when it cannot be read. */
function safeStatfsType(path: string): number | undefined {
  try {
    return statfsSync(path).type
  } catch {
    return undefined
  }
}
