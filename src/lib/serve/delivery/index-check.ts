/**
 * Whether the disk still holds the version of a file the index describes, checked on the
 * request path with a cached stat (src/lib/origin/disk.ts). A changed file is answered from
 * the origin at once and reported, so that the index and a scan catch up.
 */
import type {Logger} from 'pino'
import {sep} from 'node:path'
import {DiskVersions, statIfPresent} from '../../origin/disk.js'
import type {FileVersion} from '../../origin/freshness.js'
import {OriginWatch} from '../../origin/watch.js'
import {type FileEntry, unindexedVersion} from '../snapshot/file-entry.js'
import type {RequestContext, RouteServices} from './route.js'
import type {IndexStale, ServerOptions} from './settings.js'

/**
 * The disk check of origin root `rootReal` (its realpath) as `options` set it: a stat per
 * path and `diskCheckSeconds` (default 1), believed until an inotify event where the
 * directory is watched (`diskCheckWatch`, default true); undefined when `diskCheckSeconds` is 0.
 */
export function openIndexCheck(rootReal: string, options: Pick<ServerOptions, 'diskCheckSeconds' | 'diskCheckWatch' | 'logger' | 'onIndexStale'>): IndexCheck | undefined {
  const seconds = options.diskCheckSeconds ?? 1
  if (seconds <= 0) return undefined
  const watch = options.diskCheckWatch === false ? undefined : new OriginWatch(rootReal, {logger: options.logger})
  return new IndexCheck(new DiskVersions(rootReal, seconds, watch), options.logger, options.onIndexStale, watch)
}

/**
 * {@link RouteServices.fileOnDisk} of the origin root `root` (its realpath): from `check`'s
 * cached stats, or a stat of its own when the check is off (undefined).
 */
export function fileOnDisk(check: IndexCheck | undefined, root: string, ctx: RequestContext, path: string): boolean {
  return check === undefined ? statIfPresent(root + sep + path)?.isFile() === true : check.fileOnDisk(ctx, path)
}

/** The check of indexed files against the disk, for one origin root. */
export class IndexCheck {
  /**
   * @param disk the cached stats of the origin root
   * @param logger where `origin index stale: PATH` is logged
   * @param onIndexStale called once per stale entry found (it counts it and re-indexes the file)
   * @param watch the watch of the root's directories that `disk` believes, if any
   */
  constructor(
    private readonly disk: DiskVersions,
    private readonly logger: Logger | undefined,
    private readonly onIndexStale: ((stale: IndexStale) => void) | undefined,
    /** The watch of the root's directories that `disk` believes, closed with {@link close}. */
    readonly watch?: OriginWatch,
  ) {}

  /** Removes the directory watches. */
  close(): void {
    this.watch?.close()
  }

  /**
   * `file` as the disk has it now ({@link RouteServices.currentFile}): a stat at most `diskCheckSeconds` old (in a watched
   * directory: one that no inotify event has named since) vouches for a
   * match; a mismatch is confirmed by a stat of its own (the snapshot may have caught up with
   * the disk since the cached stat).
   */
  current(ctx: RequestContext, file: FileEntry): FileEntry {
    const versions = this.disk
    const cached = versions.version(file.path, ctx.startedMs)
    if (cached === null || (cached.size === file.size && cached.mtime === file.mtime)) return file
    versions.forget(file.path)
    const disk = versions.version(file.path, ctx.startedMs)
    if (disk === null || (disk.size === file.size && disk.mtime === file.mtime)) return file
    return this.stale(ctx, file, {size: disk.size, mtime: disk.mtime})
  }

  /** Whether root-relative `path` is a regular file on disk (a link to one counts), from a stat at most `diskCheckSeconds` old as in {@link current}. */
  fileOnDisk(ctx: RequestContext, path: string): boolean {
    return this.disk.version(path, ctx.startedMs) !== null
  }

  /**
   * The indexed `file` differs from the disk: logs `origin index stale: PATH`, puts an entry
   * with the disk's version and no mirrors into the snapshot (so that later requests, the
   * metalinks and the mirror list see it without another stat), and reports it to
   * `onIndexStale` (which counts it and re-indexes the file). A snapshot refresh of the row
   * replaces the entry.
   */
  private stale(ctx: RequestContext, file: FileEntry, disk: FileVersion): FileEntry {
    const entry = unindexedVersion(file, disk)
    const files = ctx.snapshot.files
    files.replaceIfCurrent(file.path, file, entry)
    const stale: IndexStale = {path: file.path, indexed: {size: file.size, mtime: file.mtime}, disk}
    this.logger?.warn(stale, `origin index stale: ${file.path}`)
    try {
      this.onIndexStale?.(stale)
    } catch (error) {
      this.logger?.error({err: error instanceof Error ? error.message : String(error), path: file.path}, 'handling a stale index entry failed')
    }
    return entry
  }
}
