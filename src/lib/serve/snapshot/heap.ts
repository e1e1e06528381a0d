/**
 * One full, compacting garbage collection after a full snapshot load.
 *
 * Loading a snapshot parses every file row (arrays of strings, about as large again as the
 * snapshot itself) and, on a reload, drops the previous snapshot. V8 grows its old space to
 * that peak, and the entries that survive lie scattered over all of those pages, one among
 * the dead rows of its batch, so an ordinary full collection frees few whole pages: measured
 * on 1,000,000 files x 100 mirrors, old space went from 250 to 240 MB. A compacting one moves
 * the survivors together (old space 140 MB), and its freed pages go back to the system a
 * moment later (RSS 490 -> 380 MB within 3 s). Full loads are rare (start-up, and a reload
 * after heavy churn), so the pause is paid rarely and never per request.
 *
 * `global.gc` exists only with `--expose-gc`; the flag can be set at run time, and a new
 * V8 context then sees the function (node:v8 `setFlagsFromString`, node:vm). Whether a full
 * collection compacts every page is V8's `--compact-on-every-full-gc`, set for this one.
 */
import {getHeapStatistics, setFlagsFromString} from 'node:v8'
import {runInNewContext} from 'node:vm'

let collect: (() => void) | undefined

/** What one {@link collectGarbage} did. */
export interface Collection {
  /** How long the event loop was blocked, in seconds. */
  pauseSeconds: number
  /** V8's committed heap (`total_heap_size`) before and after, in bytes. */
  heapBytesBefore: number
  heapBytesAfter: number
}

/** Runs a full, compacting garbage collection now (synchronous; blocks the event loop while it runs). */
export function collectGarbage(): Collection {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as () => void
  }
  const heapBytesBefore = getHeapStatistics().total_heap_size
  const started = performance.now()
  setFlagsFromString('--compact-on-every-full-gc')
  try {
    collect()
  } finally {
    setFlagsFromString('--no-compact-on-every-full-gc')
  }
  return {pauseSeconds: (performance.now() - started) / 1000, heapBytesBefore, heapBytesAfter: getHeapStatistics().total_heap_size}
}
