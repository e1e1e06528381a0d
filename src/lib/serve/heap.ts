/**
 * One full, compacting garbage collection after a full snapshot load.
 *
 * Loading a snapshot parses every file row (arrays of strings, about as large again as the
 * snapshot itself) and, on a reload, drops the previous snapshot. V8 grows its old space to
 * that peak and keeps the pages after the garbage is gone until its memory reducer runs,
 * which an allocating server may never let it do: measured on 1,000,000 files x 100
 * mirrors, RSS stayed at 547 MB after the load, and one collection brought it to 408 MB.
 * Full loads are rare (start-up, and a reload after heavy churn), so the pause (about a
 * tenth of a second per 200 MB of heap) is paid rarely and never per request.
 *
 * `global.gc` exists only with `--expose-gc`; the flag can be set at run time, and a new
 * V8 context then sees the function (node:v8 `setFlagsFromString`, node:vm).
 */
import {setFlagsFromString} from 'node:v8'
import {runInNewContext} from 'node:vm'

let collect: (() => void) | undefined

/** Runs a full garbage collection now (synchronous; blocks the event loop while it runs). */
export function collectGarbage(): void {
  if (collect === undefined) {
    setFlagsFromString('--expose-gc')
    collect = runInNewContext('gc') as () => void
  }
  collect()
}
