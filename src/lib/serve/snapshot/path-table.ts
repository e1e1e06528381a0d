/**
 * Origin path -> small integer, for millions of paths, with the paths outside the V8 heap.
 *
 * A `Map<string, number>` of 1,000,000 origin paths is a million heap strings (44 bytes each
 * for a 31-character path) and a 28 MB hash table, which every full garbage collection
 * marks. Here the paths are Latin-1 bytes in shared Buffer chunks, found through an
 * open-addressing hash table (linear probing) in an Int32Array: about 50 bytes a path, none
 * of them heap objects, so the heap that the collector walks is independent of the tree.
 * Paths with a character above U+00FF (or longer than {@link MAX_STORED_LENGTH}) are rare
 * and live in an ordinary Map beside it.
 *
 * A deleted path leaves its bytes in the chunk and a tombstone in the table; the table is
 * rebuilt without tombstones when it grows. The owner replaces the whole table on a full
 * snapshot load, which reclaims the bytes (the snapshot's churn accounting, snapshot.ts).
 */
import {resized} from './columns.js'

/** Bytes per path chunk (4 MiB); a path never spans two chunks. */
const CHUNK_SHIFT = 22
const CHUNK_BYTES = 1 << CHUNK_SHIFT
/** The longest path kept in the chunks, in characters (longer ones go to the side Map). */
const MAX_STORED_LENGTH = 0xffff
/** Table cells: 0 is empty, {@link TOMBSTONE} a deleted entry, else entry index + 1. */
const TOMBSTONE = -1
/** Entries and table cells to start with. */
const INITIAL_ENTRIES = 1024

/**
 * The hash under which `path` is stored in the chunks, or -1 when it cannot be (a character
 * above U+00FF, or longer than {@link MAX_STORED_LENGTH}).
 */
function storedHash(path: string): number {
  return path.length > MAX_STORED_LENGTH ? -1 : latin1Hash(path)
}

/** FNV-1a over the UTF-16 code units of `path` (the same as over its Latin-1 bytes); -1 when a unit is above 0xFF. */
function latin1Hash(path: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    if (c > 0xff) return -1
    h = Math.imul(h ^ c, 0x01000193)
  }
  return h & 0x7fffffff
}

/** A map of origin path -> non-negative integer (a snapshot slot), its paths stored as bytes. */
export class PathTable {
  private chunks: Buffer[] = [Buffer.allocUnsafe(CHUNK_BYTES)]
  /** Bytes used in the last chunk. */
  private chunkUsed = 0
  /** By entry: where its bytes start (chunk index * CHUNK_BYTES + offset), its length, its hash, its value (-1: deleted). */
  private starts = new Uint32Array(INITIAL_ENTRIES)
  private lengths = new Uint16Array(INITIAL_ENTRIES)
  private hashes = new Int32Array(INITIAL_ENTRIES)
  private values = new Int32Array(INITIAL_ENTRIES)
  private entries = 0
  private cells = new Int32Array(INITIAL_ENTRIES * 2)
  private tombstones = 0
  private live = 0
  /** Paths that cannot be stored as Latin-1 bytes. */
  private readonly others = new Map<string, number>()

  /** Paths held. */
  get size(): number {
    return this.live + this.others.size
  }

  /** The value of `path`, or undefined. */
  get(path: string): number | undefined {
    const hash = storedHash(path)
    if (hash < 0) return this.others.get(path)
    const cell = this.find(path, hash)
    return cell < 0 ? undefined : this.values[this.cells[cell] - 1]
  }

  has(path: string): boolean {
    return this.get(path) !== undefined
  }

  /**
   * Sets the value of `path`.
   * @param value a non-negative integer below 2^31
   * @returns the value it replaces, or undefined when `path` was not there
   */
  set(path: string, value: number): number | undefined {
    const hash = storedHash(path)
    if (hash < 0) {
      const previous = this.others.get(path)
      this.others.set(path, value)
      return previous
    }
    const cell = this.find(path, hash)
    if (cell >= 0) {
      const entry = this.cells[cell] - 1
      const previous = this.values[entry]
      this.values[entry] = value
      return previous
    }
    if ((this.live + this.tombstones + 1) * 2 > this.cells.length) this.rehash()
    const entry = this.append(path, hash, value)
    this.place(entry + 1, hash)
    this.live++
    return undefined
  }

  /** Deletes `path`; whether it was there. */
  delete(path: string): boolean {
    const hash = storedHash(path)
    if (hash < 0) return this.others.delete(path)
    const cell = this.find(path, hash)
    if (cell < 0) return false
    this.values[this.cells[cell] - 1] = -1
    this.cells[cell] = TOMBSTONE
    this.tombstones++
    this.live--
    return true
  }

  /** Makes room for `entries` paths in all without growing (a full load knows its count). */
  reserve(entries: number): void {
    if (entries > this.starts.length) this.resizeEntries(entries)
    if (entries * 2 > this.cells.length) this.rebuild(entries * 2)
  }

  /** The paths and their values: the stored ones in the order they were first set, then the others. */
  *[Symbol.iterator](): IterableIterator<[string, number]> {
    for (let entry = 0; entry < this.entries; entry++) {
      const value = this.values[entry]
      if (value >= 0) yield [this.pathOf(entry), value]
    }
    yield* this.others
  }

  /**
   * The paths that start with `prefix` (all by default), in the order of the iterator. The
   * stored ones are compared as bytes and only those that match are made into strings.
   */
  *keys(prefix = ''): IterableIterator<string> {
    if (storedHash(prefix) >= 0) {
      for (let entry = 0; entry < this.entries; entry++) if (this.values[entry] >= 0 && this.startsWith(entry, prefix)) yield this.pathOf(entry)
    }
    for (const path of this.others.keys()) if (path.startsWith(prefix)) yield path
  }

  /**
   * The paths that start with `prefix` and whose value passes `test`, with their values, in
   * the order of the iterator: only those that pass are made into strings.
   */
  *matching(prefix: string, test: (value: number) => boolean): IterableIterator<[string, number]> {
    if (storedHash(prefix) >= 0) {
      for (let entry = 0; entry < this.entries; entry++) {
        const value = this.values[entry]
        if (value >= 0 && this.startsWith(entry, prefix) && test(value)) yield [this.pathOf(entry), value]
      }
    }
    for (const [path, value] of this.others) if (path.startsWith(prefix) && test(value)) yield [path, value]
  }

  /**
   * The paths whose value `v` has `marked[v]` equal to 1, with their values, in the order of
   * the iterator: one pass over the stored values, making only those paths into strings.
   */
  withValues(marked: Uint8Array): Array<[string, number]> {
    const found: Array<[string, number]> = []
    const values = this.values
    for (let entry = 0; entry < this.entries; entry++) {
      const value = values[entry]
      if (value >= 0 && marked[value] === 1) found.push([this.pathOf(entry), value])
    }
    for (const [path, value] of this.others) if (marked[value] === 1) found.push([path, value])
    return found
  }

  /** The cell holding `path` (of hash `hash`), or -1. */
  private find(path: string, hash: number): number {
    const cells = this.cells
    const mask = cells.length - 1
    for (let cell = hash & mask; ; cell = (cell + 1) & mask) {
      const held = cells[cell]
      if (held === 0) return -1
      if (held > 0 && this.hashes[held - 1] === hash && this.holds(held - 1, path)) return cell
    }
  }

  /** Whether entry `entry` stores `path` (of a Latin-1 hash: every unit is at most 0xFF). */
  private holds(entry: number, path: string): boolean {
    if (this.lengths[entry] !== path.length) return false
    const start = this.starts[entry]
    const chunk = this.chunks[start >>> CHUNK_SHIFT]
    const at = start & (CHUNK_BYTES - 1)
    for (let i = 0; i < path.length; i++) if (chunk[at + i] !== path.charCodeAt(i)) return false
    return true
  }

  /** Whether entry `entry`'s path starts with `prefix` (of Latin-1 characters only). */
  private startsWith(entry: number, prefix: string): boolean {
    if (this.lengths[entry] < prefix.length) return false
    const start = this.starts[entry]
    const chunk = this.chunks[start >>> CHUNK_SHIFT]
    const at = start & (CHUNK_BYTES - 1)
    for (let i = 0; i < prefix.length; i++) if (chunk[at + i] !== prefix.charCodeAt(i)) return false
    return true
  }

  private pathOf(entry: number): string {
    const start = this.starts[entry]
    const at = start & (CHUNK_BYTES - 1)
    return this.chunks[start >>> CHUNK_SHIFT].toString('latin1', at, at + this.lengths[entry])
  }

  /** Stores the bytes of `path` as a new entry; its index. */
  private append(path: string, hash: number, value: number): number {
    if (this.chunkUsed + path.length > CHUNK_BYTES) {
      this.chunks.push(Buffer.allocUnsafe(CHUNK_BYTES))
      this.chunkUsed = 0
    }
    const start = (this.chunks.length - 1) * CHUNK_BYTES + this.chunkUsed
    if (start > 0xffffffff - CHUNK_BYTES) throw new RangeError('PathTable: more than 4 GiB of paths')
    this.chunks[this.chunks.length - 1].write(path, this.chunkUsed, 'latin1')
    this.chunkUsed += path.length
    if (this.entries === this.starts.length) this.resizeEntries(Math.ceil(this.entries * 1.5))
    const entry = this.entries++
    this.starts[entry] = start
    this.lengths[entry] = path.length
    this.hashes[entry] = hash
    this.values[entry] = value
    return entry
  }

  /** Puts `held` (entry index + 1) in the first free cell from `hash` on. */
  private place(held: number, hash: number): void {
    const cells = this.cells
    const mask = cells.length - 1
    let cell = hash & mask
    while (cells[cell] !== 0) cell = (cell + 1) & mask
    cells[cell] = held
  }

  /** Grows the table when the live entries fill a quarter of it, else rebuilds it at its size (dropping the tombstones). */
  private rehash(): void {
    this.rebuild(this.live * 4 >= this.cells.length ? this.cells.length * 2 : this.cells.length)
  }

  /** A table of at least `cells` cells (a power of two) holding the live entries. */
  private rebuild(cells: number): void {
    let size = this.cells.length
    while (size < cells) size *= 2
    this.cells = new Int32Array(size)
    this.tombstones = 0
    for (let entry = 0; entry < this.entries; entry++) if (this.values[entry] >= 0) this.place(entry + 1, this.hashes[entry])
  }

  private resizeEntries(entries: number): void {
    this.starts = resized(this.starts, entries)
    this.lengths = resized(this.lengths, entries)
    this.hashes = resized(this.hashes, entries)
    this.values = resized(this.values, entries)
  }
}
