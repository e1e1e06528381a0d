/**
 * The snapshot's map of origin paths to files, stored by columns ({@link FileMap}).
 */
import {resized} from './columns.js'
import {DirectoryCounts} from './directory-counts.js'
import {EMPTY_DIGESTS, type FileEntry, IndexedFile} from './file-entry.js'
import {EMPTY} from './mirror-sets.js'
import {PathTable} from './path-table.js'
import {SetMembers} from './set-members.js'

/** Map operations per slice of a change set's merge, between yields to the event loop. */
const MERGE_SLICE = 1_000

/** Slots a {@link FileMap} starts with; it grows by half when they are used up. */
const INITIAL_SLOTS = 1024

/**
 * Origin path -> file, stored by columns: a {@link PathTable} maps the path to a slot (a
 * small integer), and each slot's size, mtime, packed bits and the indexes of its mirror set,
 * digest chunk and directory sit in typed arrays (32 bytes a slot), so no file is a heap object. That
 * keeps the old space small, and with it the time and the memory of every full garbage
 * collection: at 1,000,000 files x 100 mirrors the live heap after the load went from 120
 * MB (a Map of entry objects with boxed sizes and mtimes) to 33 MB.
 * {@link FileMap.get} makes a fresh {@link IndexedFile} from the slot. Entries of other
 * shapes (plain objects, from {@link fileWith} or tests) are kept as they are, by slot.
 *
 * A slot is written once: replacing a path's entry takes a new slot, so an entry handed out
 * before stays what it was. The slots of replaced and deleted entries are not reused until
 * the next full load ({@link Snapshot.churn}).
 *
 * Beside the columns, a table of which interned mirror sets hold which mirror
 * ({@link SetMembers}) lets a pass over every file ask whether its set holds a mirror with one
 * array read ({@link tallyLacking}, for the mirror pages).
 *
 * Change sets become visible all at once but are merged in slices. While a set is being
 * merged it sits in front of the map as `pending` (path -> entry, or null for a deleted
 * path), and `get`/`has` answer from it first, so a reader sees the whole set from the
 * moment it is published, whatever part is merged yet. Writes made meanwhile (`set`,
 * `delete`) go to both, so they are not shadowed by the pending set. Iteration and `size`
 * see the merged entries only (they are used for counts and loads), and so do the
 * per-directory {@link FileMap.counts}, which every store and removal keeps.
 */
export class FileMap {
  private readonly slots = new PathTable()
  private capacity = INITIAL_SLOTS
  private sizes = new Float64Array(INITIAL_SLOTS)
  private mtimes = new Float64Array(INITIAL_SLOTS)
  private packed = new Int32Array(INITIAL_SLOTS)
  /** By slot: the mirror set, as its index in `sets`. */
  private setRefs = new Int32Array(INITIAL_SLOTS)
  /** By slot: the digest chunk, as its index in `chunks`; {@link WHOLE} where the entry is kept whole in `whole`. */
  private chunkRefs = new Int32Array(INITIAL_SLOTS)
  /** By slot: the index of its directory in {@link counts}. */
  private directories = new Int32Array(INITIAL_SLOTS)
  /** The distinct mirror sets and digest chunks that slots refer to, and their indexes. */
  private readonly sets = new RefTable<Int16Array>(EMPTY)
  private readonly chunks = new RefTable<Buffer>(EMPTY_DIGESTS)
  /** Which of `sets` hold each mirror. */
  private readonly members = new SetMembers()
  /** Slots taken so far. */
  private used = 0
  /** Entries that are not {@link IndexedFile}s, by slot. */
  private readonly whole = new Map<number, FileEntry>()
  private pending: Map<string, FileEntry | null> | undefined
  /** Files, bytes and held files per directory subtree, of the merged entries. */
  readonly counts = new DirectoryCounts()

  /** Paths in the map (merged entries). */
  get size(): number {
    return this.slots.size
  }

  /** Slots taken so far, live or not: every slot is below it. */
  get slotCount(): number {
    return this.used
  }

  /** The entry at origin path `path` (root-relative, no leading slash), or undefined. */
  get(path: string): FileEntry | undefined {
    const pending = this.pending
    if (pending !== undefined) {
      const entry = pending.get(path)
      if (entry !== undefined) return entry ?? undefined
    }
    const slot = this.slots.get(path)
    return slot === undefined ? undefined : this.entryAt(path, slot)
  }

  /** Whether {@link get} finds an entry at `path`, without making one. */
  has(path: string): boolean {
    const pending = this.pending?.get(path)
    return pending !== undefined ? pending !== null : this.slots.has(path)
  }

  /** Puts `entry` at `path` in a new slot (an entry read before keeps its values). */
  set(path: string, entry: FileEntry): this {
    if (this.pending?.has(path)) this.pending.set(path, entry)
    this.store(path, entry)
    return this
  }

  /** Drops the entry at `path`; whether there was one. */
  delete(path: string): boolean {
    const existed = this.has(path)
    if (this.pending?.has(path)) this.pending.set(path, null)
    return this.remove(path) || existed
  }

  /** Whether `seen` (from {@link get}) is still the entry at `path`, not one that a refresh put there since. */
  isCurrent(path: string, seen: FileEntry): boolean {
    const pending = this.pending?.get(path)
    if (pending !== undefined) return pending === seen
    const slot = this.slots.get(path)
    if (slot === undefined) return false
    return seen instanceof IndexedFile && seen.map !== undefined ? seen.map === this && seen.slot === slot : this.whole.get(slot) === seen
  }

  /**
   * Sets `entry` at `path` only while {@link isCurrent} holds for `seen`.
   * @returns whether it was set
   */
  replaceIfCurrent(path: string, seen: FileEntry, entry: FileEntry): boolean {
    const current = this.isCurrent(path, seen)
    if (current) this.set(path, entry)
    return current
  }

  /** The paths that start with `prefix` (all by default), without making an entry of each. */
  keys(prefix = ''): IterableIterator<string> {
    return this.slots.keys(prefix)
  }

  /** Every entry, each made afresh (about 160 ms for 1,000,000: for counts and background work, not per request). */
  *values(): IterableIterator<FileEntry> {
    for (const [path, slot] of this.slots) yield this.entryAt(path, slot)
  }

  /** Every path with its entry, as {@link values} makes them. */
  *entries(): IterableIterator<[string, FileEntry]> {
    for (const [path, slot] of this.slots) yield [path, this.entryAt(path, slot)]
  }

  [Symbol.iterator](): IterableIterator<[string, FileEntry]> {
    return this.entries()
  }

  /**
   * The slot of merged file `path`, or undefined. A slot names one version of a file until
   * the next full load (a replaced entry takes a new slot); the accessors below read it
   * without making an entry, for passes over many files ({@link pathsWhere}, {@link tallyLacking}).
   */
  slotOf(path: string): number | undefined {
    return this.slots.get(path)
  }

  /** The mirror set of the file at `slot` (interned: files with the same holders share one array, so it can be compared by identity). */
  mirrorsAt(slot: number): Int16Array {
    return this.chunkRefs[slot] === WHOLE ? this.whole.get(slot)!.mirrors : this.sets.items[this.setRefs[slot]]
  }

  /** The size in bytes of the file at `slot`. */
  sizeAt(slot: number): number {
    return this.chunkRefs[slot] === WHOLE ? this.whole.get(slot)!.size : this.sizes[slot]
  }

  /** The index in {@link counts} of the directory holding the file at `slot` ({@link DirectoryCounts.nameOf}). */
  directoryAt(slot: number): number {
    return this.directories[slot]
  }

  /** The merged files under `prefix` whose slot passes `test`, path and slot; only those are made into path strings. */
  pathsWhere(prefix: string, test: (slot: number) => boolean): IterableIterator<[string, number]> {
    return this.slots.matching(prefix, test)
  }

  /**
   * A test of whether the file at a slot lacks mirror `id` (its mirror set does not hold it):
   * one read of the set membership table ({@link SetMembers}) per slot.
   */
  lacking(id: number): (slot: number) => boolean {
    return (slot) => {
      if (this.chunkRefs[slot] === WHOLE) return !this.whole.get(slot)!.mirrors.includes(id)
      const ref = this.setRefs[slot]
      return ((this.members.row(id)[ref >>> 5] >>> ref) & 1) === 0
    }
  }

  /**
   * Files and bytes per directory of the merged files that lack mirror `id` (their mirror set
   * does not hold it), whose directory's index `d` has `within[d]` set, and, when `carried` is
   * given, whose slot's bit is set in it: one pass over the slot columns, without a branch per
   * file, that makes no entry and no path string (a few ms for 1,000,000 files).
   * @param within by directory index ({@link DirectoryCounts.indexOf}), 1 where files count and 0 where not; `counts.size` long
   * @param carried a bitset by slot (bit `s` is `(carried[s >>> 5] >>> s) & 1`), {@link slotCount} bits long at least; all files count without it
   * @returns files, and their bytes (sizes), by directory index: arrays `counts.size` long, each directory's own files only (not those below it)
   */
  tallyLacking(id: number, within: Uint8Array, carried?: Uint32Array): {files: Int32Array; bytes: Float64Array} {
    const files = new Int32Array(this.counts.size)
    const bytes = new Float64Array(this.counts.size)
    const held = this.members.row(id)
    const mask = carried ?? new Uint32Array((this.used + 31) >>> 5).fill(0xffffffff)
    const refs = this.setRefs
    const directories = this.directories
    const sizes = this.sizes
    const used = this.used
    // Read before the loop: code after a loop that V8 optimizes mid-run has no type feedback yet.
    const whole = this.whole.size > 0
    for (let slot = 0; slot < used; slot++) {
      const ref = refs[slot]
      if (ref < 0) continue // dead, or kept whole (below)
      const d = directories[slot]
      const counted = (1 ^ ((held[ref >>> 5] >>> ref) & 1)) & within[d] & (mask[slot >>> 5] >>> slot)
      files[d] += counted
      bytes[d] += counted * sizes[slot]
    }
    if (whole) this.tallyWhole(id, within, mask, files, bytes)
    return {files, bytes}
  }

  /**
   * {@link tallyLacking} of the entries kept whole, apart, so that the pass above keeps its
   * optimized code (a loop it never enters has no type feedback, and leaving it deoptimized
   * the function on every call).
   */
  private tallyWhole(id: number, within: Uint8Array, mask: Uint32Array, files: Int32Array, bytes: Float64Array): void {
    for (const [slot, entry] of this.whole) {
      const d = this.directories[slot]
      if (within[d] === 0 || ((mask[slot >>> 5] >>> slot) & 1) === 0 || entry.mirrors.includes(id)) continue
      files[d]++
      bytes[d] += entry.size
    }
  }

  /**
   * The merged files directly in the directory of index `d` (not below it) that lack mirror
   * `id`, as path and slot, in no set order: a pass over the slot columns, then one over the
   * stored paths that makes only those into strings (a few ms for 1,000,000 files).
   */
  filesLacking(d: number, id: number): Array<[string, number]> {
    const marked = new Uint8Array(this.used)
    let found = this.markLacking(d, this.members.row(id), marked)
    if (this.whole.size > 0) {
      for (const [slot, entry] of this.whole) {
        if (this.directories[slot] !== d || entry.mirrors.includes(id)) continue
        marked[slot] = 1
        found++
      }
    }
    return found === 0 ? [] : this.slots.withValues(marked)
  }

  /** Sets `marked[slot]` for the slots (not kept whole) in directory `d` whose set's bit in `held` is clear; how many. */
  private markLacking(d: number, held: Uint32Array, marked: Uint8Array): number {
    const refs = this.setRefs
    const directories = this.directories
    const used = this.used
    let found = 0
    for (let slot = 0; slot < used; slot++) {
      if (directories[slot] !== d) continue
      const ref = refs[slot]
      if (ref < 0 || ((held[ref >>> 5] >>> ref) & 1) === 1) continue
      marked[slot] = 1
      found++
    }
    return found
  }

  /**
   * Applies a change set: `deleted` paths are dropped, then `entries` replace or add theirs.
   * The set is built aside and published in one step (`publish` runs at that moment, for
   * the changes that go with it, such as the mirror table), then merged into the map
   * {@link MERGE_SLICE} operations at a time with a yield to the event loop between slices.
   * @returns how many of the deleted paths were present
   */
  async applyChangeSet(deleted: string[], entries: FileEntry[], publish: () => void): Promise<number> {
    const set = new Map<string, FileEntry | null>()
    let removed = 0
    let n = 0
    for (const path of deleted) {
      if (this.slots.has(path)) removed++
      set.set(path, null)
      if (++n % MERGE_SLICE === 0) await yieldToEventLoop()
    }
    for (const entry of entries) {
      set.set(entry.path, entry)
      if (++n % MERGE_SLICE === 0) await yieldToEventLoop()
    }
    this.pending = set
    publish()
    try {
      n = 0
      for (const [path, entry] of set) {
        if (entry === null) this.remove(path)
        else this.store(path, entry)
        if (++n % MERGE_SLICE === 0) await yieldToEventLoop()
      }
    } finally {
      this.pending = undefined
    }
    return removed
  }

  private entryAt(path: string, slot: number): FileEntry {
    const chunk = this.chunkRefs[slot]
    if (chunk === WHOLE) return this.whole.get(slot)!
    return new IndexedFile(path, this.sizes[slot], this.mtimes[slot], this.sets.items[this.setRefs[slot]], this.chunks.items[chunk], this.packed[slot], this, slot)
  }

  /** Puts `entry` in a new slot and points `path` at it. */
  private store(path: string, entry: FileEntry): void {
    const slot = this.used++
    if (slot === this.capacity) this.grow()
    // An entry filed under another path than its own is kept as it is (a slot answers with its key).
    if (entry instanceof IndexedFile && entry.path === path) {
      this.sizes[slot] = entry.size
      this.mtimes[slot] = entry.mtime
      this.packed[slot] = entry.packed
      const sets = this.sets.items.length
      const ref = this.sets.ref(entry.mirrors)
      if (ref === sets) this.members.add(ref, entry.mirrors)
      this.setRefs[slot] = ref
      this.chunkRefs[slot] = this.chunks.ref(entry.digests)
    } else {
      this.chunkRefs[slot] = WHOLE
      this.setRefs[slot] = DEAD
      this.whole.set(slot, entry)
    }
    this.directories[slot] = this.counts.add(path, entry.size, entry.mirrors)
    const old = this.slots.set(path, slot)
    if (old !== undefined) this.release(path, old)
  }

  private remove(path: string): boolean {
    const slot = this.slots.get(path)
    if (slot === undefined) return false
    this.slots.delete(path)
    this.release(path, slot)
    return true
  }

  /** Uncounts the entry of a slot that `path` no longer points at, and drops it where it is kept whole (mirror sets and chunks are shared, and stay). */
  private release(path: string, slot: number): void {
    const whole = this.chunkRefs[slot] === WHOLE ? this.whole.get(slot) : undefined
    if (whole !== undefined) this.counts.remove(path, whole.size, whole.mirrors)
    else this.counts.remove(path, this.sizes[slot], this.sets.items[this.setRefs[slot]])
    this.whole.delete(slot)
    this.setRefs[slot] = DEAD
  }

  /**
   * Makes room for `slots` slots in all (a full load reserves its row count first: the
   * columns are then allocated once, rather than grown and copied, which would leave their
   * old copies as holes in the C heap).
   */
  reserve(slots: number): void {
    this.slots.reserve(slots)
    this.reserveColumns(slots)
  }

  private reserveColumns(slots: number): void {
    if (slots <= this.capacity) return
    this.capacity = slots
    this.sizes = resized(this.sizes, slots)
    this.mtimes = resized(this.mtimes, slots)
    this.packed = resized(this.packed, slots)
    this.setRefs = resized(this.setRefs, slots)
    this.chunkRefs = resized(this.chunkRefs, slots)
    this.directories = resized(this.directories, slots)
  }

  private grow(): void {
    this.reserveColumns(Math.ceil(this.capacity * 1.5))
  }
}

/** {@link FileMap} chunk reference of a slot whose entry is kept whole. */
const WHOLE = -1
/** {@link FileMap} set reference of a slot that no path points at any more, or whose entry is kept whole (its set is the entry's). */
const DEAD = -1

/**
 * Distinct objects by index, so that a column of small integers can refer to them (a few
 * hundred thousand mirror sets, a few hundred digest chunks, against millions of slots).
 */
class RefTable<T extends object> {
  readonly items: T[] = []
  private readonly indexes = new Map<T, number>()

  /** @param first the object at index 0 */
  constructor(first: T) {
    this.ref(first)
  }

  /** The index of `item`, given it now when it has none. */
  ref(item: T): number {
    let index = this.indexes.get(item)
    if (index === undefined) {
      index = this.items.push(item) - 1
      this.indexes.set(item, index)
    }
    return index
  }
}

/** Lets the event loop run (pending requests, timers) before the next slice of work. */
export function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}
