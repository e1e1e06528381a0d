/**
 * Notices when database files are replaced on disk, as Mirrorbits does for its GeoIP files:
 * geoipupdate (like most tools that update a file whole) writes a new file beside the old one
 * and renames it over it, so the old file's inode never changes and a watch on the file alone
 * would miss the new one. The directory is watched instead (inotify through `fs.watch`), and
 * events on the names of the watched files count.
 */
import {type FSWatcher, watch} from 'node:fs'
import {basename, dirname} from 'node:path'

/** Quiet time after the last event before `onChange` runs (ms): a rename, or a copy written in several steps, is one change. */
const SETTLE_MS = 500

/**
 * Watches `paths` (files) through their directories, and calls `onChange` once their events
 * have been quiet for {@link SETTLE_MS}. Watch errors (a directory removed, no inotify
 * instance left) go to `onError`; the other directories stay watched.
 * @returns a function that stops watching
 */
export function watchFiles(paths: readonly string[], onChange: () => void, onError: (error: Error, directory: string) => void, settleMs = SETTLE_MS): () => void {
  const names = new Map<string, Set<string>>()
  for (const path of paths) {
    const directory = dirname(path)
    const set = names.get(directory) ?? new Set<string>()
    set.add(basename(path))
    names.set(directory, set)
  }
  let timer: NodeJS.Timeout | undefined
  const changed = () => {
    clearTimeout(timer)
    timer = setTimeout(onChange, settleMs)
  }
  const watchers: FSWatcher[] = []
  for (const [directory, files] of names) {
    try {
      const watcher = watch(directory, {persistent: false}, (_event, filename) => {
        // Without a name (some platforms), any event of the directory may be one of ours.
        if (filename === null || files.has(filename.toString())) changed()
      })
      watcher.on('error', (error) => onError(error, directory))
      watchers.push(watcher)
    } catch (error) {
      onError(error as Error, directory)
    }
  }
  return () => {
    clearTimeout(timer)
    for (const watcher of watchers) watcher.close()
  }
}
