/**
 * `mb serve --watch`: hears the events of the origin's directory watches (src/lib/origin/watch.ts,
 * shared with the disk check) and, when
 * an indexed file's size or mtime changes on disk, stops redirecting it at once: its entry in
 * the live snapshot gets the new size/mtime and an empty mirror set, so the origin delivers it
 * until `mb index` and a scan confirm mirrors hold the new version (the next snapshot refresh
 * of that row replaces the entry). Events are coalesced per path for 200 ms. Every event is
 * also passed to `hooks.onChange` (the `--push-after` quiet timer, src/lib/push/after.ts).
 * With `hooks.tracePath` (`sync.trace_path`), the watch also writes the origin's sync trace
 * every minute (src/lib/sync/trace.ts), and the trace's own writes are no change of the tree.
 */
import {stat} from 'node:fs/promises'
import {sep} from 'node:path'
import type {Logger} from 'pino'
import {isRepomdPath, type RepomdChange} from '../../origin/repomd.js'
import {OriginWatch} from '../../origin/watch.js'
import type {SnapshotKeeper} from './keeper.js'
import {unindexedVersion} from './file-entry.js'
import {isTraceFile, startTraceWriter} from '../../sync/trace.js'

/**
 * Starts watching `root` (its realpath), through `shared` (the disk check's watch) or a watch of
 * its own when there is none. Returns a function that stops watching.
 * `hooks.onRepomdChange` hears of every indexed `repodata/repomd.xml` that changed on disk, with
 * the mirrors that held the version it replaces (to record it, src/lib/origin/repomd.ts).
 */
export function watchOrigin(
  shared: OriginWatch | undefined,
  root: string,
  keeper: Pick<SnapshotKeeper, 'current'>,
  logger?: Logger,
  hooks: {onRepomdChange?: (change: RepomdChange) => void; onChange?: () => void; tracePath?: string} = {},
): () => void {
  const {onRepomdChange, onChange, tracePath} = hooks
  const stopTrace = tracePath === undefined ? undefined : startTraceWriter(root, tracePath, (error) => logger?.warn({err: error.message, trace: tracePath}, 'writing the sync trace failed'))
  const pending = new Map<string, NodeJS.Timeout>()
  const check = async (path: string) => {
    pending.delete(path)
    const entry = keeper.current.files.get(path)
    const repomd = onRepomdChange !== undefined && isRepomdPath(path)
    if (entry === undefined || (entry.mirrors.length === 0 && !repomd)) return
    let size = -1
    let mtime = -1
    try {
      const st = await stat(root + sep + path)
      size = st.size
      mtime = Math.floor(st.mtimeMs / 1000)
    } catch {
      /* gone: deliver (404) from the origin too */
    }
    if (size === entry.size && mtime === entry.mtime) return
    if (!keeper.current.files.isCurrent(path, entry)) return // a refresh replaced it meanwhile
    if (repomd && size >= 0) onRepomdChange({path, mtime, previousMirrors: Array.from(entry.mirrors)})
    if (entry.mirrors.length === 0) return
    keeper.current.files.set(path, unindexedVersion(entry, {size: size < 0 ? entry.size : size, mtime: mtime < 0 ? entry.mtime : mtime}))
    logger?.info({path, size, mtime}, 'origin file changed on disk; delivering it locally until it is re-indexed and rescanned')
  }
  const origin = shared ?? new OriginWatch(root, {logger})
  const stopListening = origin.onChange((path) => {
    if (tracePath !== undefined && isTraceFile(path, tracePath)) return // mb's own minute tick is no change of the tree
    onChange?.()
    clearTimeout(pending.get(path))
    pending.set(
      path,
      setTimeout(() => void check(path), 200),
    )
  })
  return () => {
    stopTrace?.()
    stopListening()
    if (shared === undefined) origin.close()
    for (const t of pending.values()) clearTimeout(t)
    pending.clear()
  }
}
