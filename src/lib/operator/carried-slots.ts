/**
 * Which of the snapshot's files a mirror is meant to carry by globs (`scan.include` and
 * `scan.exclude`, then its own `include_patterns` and `exclude_patterns`), as a bitset by
 * file map slot ({@link CarriedSlots}), so that a mirror's page (./mirror-view.ts) counts
 * what it lacks in one pass over the columns even where globs apply.
 */
import {pathFilter} from '../glob.js'
import {resized} from '../serve/snapshot/columns.js'
import type {FileMap} from '../serve/snapshot/file-map.js'

/** Glob sets kept at once (the least recently used goes first): 125 KB each at 1,000,000 files. */
const MAX_GLOB_SETS = 16

/** How long one turn of {@link CarriedSlots.warm} runs at most (ms) before it yields to the event loop. */
const WARM_SLICE_MS = 3

/** Files a turn of {@link CarriedSlots.warm} tests between two reads of the clock. */
const WARM_CLOCK_EVERY = 256

/** One glob set's bitset over the slots of one file map, made for slots below `covered`. */
interface Kept {
  files: FileMap
  covered: number
  bits: Uint32Array
}

/** A bitset being made in idle time: the slots below `covered` of `files`, read from `paths` (which yields no other). */
interface Warming {
  key: string
  kept: Kept
  paths: Iterator<[string, number]>
  passes: (path: string) => boolean
}

/**
 * Bitsets of the slots whose paths pass a glob set, kept per glob set and file map. A slot
 * names one path until the next full load (a new file map), so its bit never changes: a
 * refresh that adds files costs the globs of its new slots only, and mirrors with the same
 * globs (all those with none of their own) share one bitset. Making one costs a path string
 * and a glob test per file (a few hundred ms for 1,000,000 files), once per glob set and load;
 * {@link warm} makes one in slices in idle time, so that the first page finds it made.
 */
export class CarriedSlots {
  private readonly kept = new Map<string, Kept>()
  private warming: Warming | undefined

  /**
   * The bitset of the merged files of `files` that pass `include` (every non-empty list) and
   * no `exclude` glob ({@link pathFilter}): bit `s`, `(bits[s >>> 5] >>> s) & 1`, is 1 when
   * the file at slot `s` passes. Long enough for every slot taken so far; read it right away
   * (a later call may replace it). A bitset being warmed for the same files is finished first.
   */
  of(files: FileMap, include: string[][], exclude: string[]): Uint32Array {
    const key = keyOf(include, exclude)
    if (this.warming?.key === key) this.finishWarming(files)
    let kept = this.kept.get(key)
    if (kept === undefined || kept.files !== files) kept = {files, covered: 0, bits: new Uint32Array(0)}
    this.keep(key, kept)
    const used = files.slotCount
    if (kept.covered < used) {
      const words = (used + 31) >>> 5
      if (kept.bits.length < words) kept.bits = resized(kept.bits, Math.max(words, Math.ceil(kept.bits.length * 1.5)))
      const passes = pathFilter(include, exclude)
      const from = kept.covered
      const bits = kept.bits
      for (const [path, slot] of files.pathsWhere('', (slot) => slot >= from)) if (passes(path)) bits[slot >>> 5] |= 1 << (slot & 31)
      kept.covered = used
    }
    return kept.bits
  }

  /**
   * Makes the bitset {@link of} gives for `files`, `include` and `exclude`, for the slots taken
   * now, in turns of at most `sliceMs` (ms) between which the event loop runs (each turn a
   * `setImmediate`, which does not keep the process alive). Nothing to do when that bitset is
   * kept or being made already; a warm of other globs or another file map is dropped for it.
   * Files replaced or added meanwhile take new slots, which {@link of} tests when it is asked.
   * @returns resolves when the bitset is kept, or when the warm was dropped or failed (a bad
   *          glob: {@link of} then throws as it would have); never rejects
   */
  warm(files: FileMap, include: string[][], exclude: string[], sliceMs = WARM_SLICE_MS): Promise<void> {
    const key = keyOf(include, exclude)
    if (this.kept.get(key)?.files === files || (this.warming?.key === key && this.warming.kept.files === files)) return Promise.resolve()
    const covered = files.slotCount
    let warming: Warming
    try {
      const kept = {files, covered, bits: new Uint32Array((covered + 31) >>> 5)}
      warming = {key, kept, paths: files.pathsWhere('', (slot) => slot < covered), passes: pathFilter(include, exclude)}
    } catch {
      return Promise.resolve()
    }
    this.warming = warming
    return new Promise((resolve) => {
      const turn = () => {
        try {
          if (this.warming !== warming) return resolve() // dropped, or finished by `of`
          if (!this.warmSlice(warming, performance.now() + sliceMs)) {
            setImmediate(turn).unref()
            return
          }
          this.warming = undefined
          this.keep(warming.key, warming.kept)
        } catch {
          if (this.warming === warming) this.warming = undefined
        }
        resolve()
      }
      setImmediate(turn).unref()
    })
  }

  /** Tests paths of `warming` until they are all tested (true) or the clock passes `deadline` (ms, `performance.now()`). */
  private warmSlice(warming: Warming, deadline: number): boolean {
    const {paths, passes} = warming
    const bits = warming.kept.bits
    for (let n = 1; ; n++) {
      const next = paths.next()
      if (next.done) return true
      const [path, slot] = next.value
      if (passes(path)) bits[slot >>> 5] |= 1 << (slot & 31)
      if (n % WARM_CLOCK_EVERY === 0 && performance.now() >= deadline) return false
    }
  }

  /** Finishes the warm under way at once when it is of `files` (keeping its bitset), else drops it. */
  private finishWarming(files: FileMap): void {
    const warming = this.warming!
    this.warming = undefined
    if (warming.kept.files !== files) return
    this.warmSlice(warming, Number.POSITIVE_INFINITY)
    this.keep(warming.key, warming.kept)
  }

  /** Keeps `kept` as the most recently used bitset of `key`, dropping the least recently used beyond {@link MAX_GLOB_SETS}. */
  private keep(key: string, kept: Kept): void {
    this.kept.delete(key)
    if (this.kept.size >= MAX_GLOB_SETS) this.kept.delete(this.kept.keys().next().value!)
    this.kept.set(key, kept)
  }
}

/** The key of a glob set in {@link CarriedSlots}. */
function keyOf(include: string[][], exclude: string[]): string {
  return JSON.stringify([include, exclude])
}
