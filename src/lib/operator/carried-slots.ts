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

/** One glob set's bitset over the slots of one file map, made for slots below `covered`. */
interface Kept {
  files: FileMap
  covered: number
  bits: Uint32Array
}

/**
 * Bitsets of the slots whose paths pass a glob set, kept per glob set and file map. A slot
 * names one path until the next full load (a new file map), so its bit never changes: a
 * refresh that adds files costs the globs of its new slots only, and mirrors with the same
 * globs (all those with none of their own) share one bitset. Making one costs a path string
 * and a glob test per file (a few hundred ms for 1,000,000 files), once per glob set and load.
 */
export class CarriedSlots {
  private readonly kept = new Map<string, Kept>()

  /**
   * The bitset of the merged files of `files` that pass `include` (every non-empty list) and
   * no `exclude` glob ({@link pathFilter}): bit `s`, `(bits[s >>> 5] >>> s) & 1`, is 1 when
   * the file at slot `s` passes. Long enough for every slot taken so far; read it right away
   * (a later call may replace it).
   */
  of(files: FileMap, include: string[][], exclude: string[]): Uint32Array {
    const key = JSON.stringify([include, exclude])
    let kept = this.kept.get(key)
    this.kept.delete(key)
    if (kept === undefined || kept.files !== files) kept = {files, covered: 0, bits: new Uint32Array(0)}
    if (this.kept.size >= MAX_GLOB_SETS) this.kept.delete(this.kept.keys().next().value!)
    this.kept.set(key, kept)
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
}
