/**
 * The in-memory snapshot `mb serve` answers from: compiled mirrors, and origin path ->
 * {size, mtime, mirror set, hashes}. The hot path only reads it; it never waits on the
 * database.
 *
 * Loading: one REPEATABLE READ transaction reads all mirrors and streams the `file` table in
 * id-ordered batches (keyset pagination), with `array_to_string(mirrors, ',')` parsed by hand
 * and interned into shared Int16Array chunks (files on the same mirrors share one subarray
 * view, {@link MirrorSetPool}), the digests stored as bytes ({@link DigestArena}), and each
 * file's fields kept in columns by slot ({@link FileMap}) behind a table of its path's bytes
 * (./path-table.ts), so millions of files stay compact and are not heap objects. Batches
 * are small enough that a batch's rows die young (in V8's new space).
 *
 * Incremental refresh: rows that the previous refresh's transaction snapshot could not see
 * (by their `txid`), plus the paths tombstoned since, as docs/change-tracking.md sets out.
 * Mirrors (a few hundred rows) are reloaded every time; the origin's symlinks (`file_link`, a
 * small table) whenever it changed.
 */
import type {Database, ReadView} from '../../db/index.js'
import type {MirrorRow} from '../../db/schema.js'
import {compileMirror, MirrorTable} from '../../select/mirror.js'
import type {SelectFile, SelectMirror} from '../../select/types.js'
import {HASHES_MATCH_VERSION_SQL} from '../../origin/freshness.js'
import {compileRules, NO_RULES, RULES_SQL, type RuleSet, ruleFromJson} from '../../rules/rule.js'
import {type LinkTarget, resolveLinks} from '../../origin/links.js'
import {resized} from './columns.js'
import {PathTable} from './path-table.js'
import {snapshotBounds, unseenCondition} from './unseen.js'

/** One origin file as the snapshot holds it. Size in bytes, mtime in Unix seconds (UTC). */
export interface FileEntry extends SelectFile {
  path: string
  size: number
  mtime: number
  /** Ids of the mirrors holding this exact version (a view into a shared chunk). */
  mirrors: Int16Array
  /** Hex digests from the index, null when not hashed (for metalinks and hash routes). */
  md5: string | null
  sha1: string | null
  sha256: string | null
  /** `.asc` or `.sig` when that detached signature is indexed beside the file (src/lib/origin/signatures.ts). */
  signature?: string | null
  /**
   * Which client formats have current data in the store ({@link FORMAT_TORRENT},
   * {@link FORMAT_ZSYNC}, {@link FORMAT_SHA256_PIECES} bits); absent or 0: none.
   */
  formats?: number
  /**
   * Names the digests without reading them: two entries with the same id hold the same
   * digests (0: none at all). Absent: compare the digests themselves. A cache of what a file
   * version's digests produce compares this first, so that a hit costs no hex decoding.
   */
  readonly digestId?: number
}

/** {@link FileEntry.formats} bit: current SHA-1 pieces (`.torrent`, `.magnet`, `.btih`). */
export const FORMAT_TORRENT = 1
/** {@link FileEntry.formats} bit: current zsync block sums (`.zsync`). */
export const FORMAT_ZSYNC = 2
/**
 * {@link FileEntry.formats} bit: the current piece hashes are SHA-256 (`mb index --piece-hash
 * sha256`, the metalinks' second `<pieces>`). It names the piece algorithm in the snapshot, so
 * that a cache of documents keyed by the entry misses after a re-index with another one.
 */
const FORMAT_SHA256_PIECES = 4
/** Every {@link FileEntry.formats} bit. */
const FORMAT_BITS = 3

const CHUNK_ENTRIES = 1 << 20
const EMPTY = new Int16Array(0)
/** Rows per keyset batch. */
const BATCH_ROWS = 5_000

/**
 * Mirror-id sets, interned: identical sets (the same ids in the same order) are one shared
 * Int16Array view, allocated out of large shared chunks (no per-file ArrayBuffer). The files
 * of a directory are usually on the same mirrors, so a tree of millions of files holds a few
 * hundred thousand sets at most.
 *
 * A file whose set changes gets the interned new set; the files that shared its old set keep
 * theirs (views are never written after they are interned). A set no file uses any more stays
 * in its chunk until the next full load: {@link Snapshot.churn} counts the replaced rows, and
 * the keeper (keeper.ts) reloads in full when they pass its limit.
 */
export class MirrorSetPool {
  private chunk = new Int16Array(CHUNK_ENTRIES)
  private used = 0
  /** Interned sets by {@link setHash}; a bucket is an array when hashes collide. */
  private readonly interned = new Map<number, Int16Array | Int16Array[]>()
  /** Where a set is parsed before it is looked up (grows to the largest set seen). */
  private scratch = new Int16Array(256)
  /** Entries allocated in total, in int16 slots (only distinct sets take slots). */
  allocated = 0
  /** Distinct sets interned. */
  sets = 0

  /**
   * The interned set for `array_to_string(mirrors, ',')` output (`"3,17,42"`, or '' / null
   * for none). Non-digit characters other than ',' are ignored.
   */
  fromText(text: string | null): Int16Array {
    if (!text) return EMPTY
    let n = 1
    for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 44) n++
    if (n > this.scratch.length) this.scratch = new Int16Array(n * 2)
    const ids = this.scratch
    let k = 0
    let value = 0
    for (let i = 0; i < text.length; i++) {
      const c = text.charCodeAt(i)
      if (c === 44) {
        ids[k++] = value
        value = 0
      } else if (c >= 48 && c <= 57) {
        value = value * 10 + (c - 48)
      }
    }
    ids[k] = value
    return this.intern(ids, n)
  }

  /** The interned set of a list of ids (in this order). */
  fromArray(ids: ArrayLike<number>): Int16Array {
    if (ids.length === 0) return EMPTY
    if (ids.length > this.scratch.length) this.scratch = new Int16Array(ids.length * 2)
    for (let i = 0; i < ids.length; i++) this.scratch[i] = ids[i]
    return this.intern(this.scratch, ids.length)
  }

  /** The interned copy of `ids[0 .. n)`, made when there is none yet. */
  private intern(ids: Int16Array, n: number): Int16Array {
    const hash = setHash(ids, n)
    const bucket = this.interned.get(hash)
    if (bucket !== undefined) {
      if (!Array.isArray(bucket)) {
        if (sameIds(bucket, ids, n)) return bucket
      } else {
        for (const set of bucket) if (sameIds(set, ids, n)) return set
      }
    }
    const view = this.take(n)
    view.set(ids.subarray(0, n))
    this.sets++
    if (bucket === undefined) this.interned.set(hash, view)
    else if (Array.isArray(bucket)) bucket.push(view)
    else this.interned.set(hash, [bucket, view])
    return view
  }

  private take(n: number): Int16Array {
    if (this.used + n > this.chunk.length) {
      this.chunk = new Int16Array(Math.max(CHUNK_ENTRIES, n))
      this.used = 0
    }
    const view = this.chunk.subarray(this.used, this.used + n)
    this.used += n
    this.allocated += n
    return view
  }
}

/** FNV-1a over `ids[0 .. n)`, kept to 30 bits so that it is a small integer Map key. */
function setHash(ids: Int16Array, n: number): number {
  let h = 0x811c9dc5
  for (let i = 0; i < n; i++) h = Math.imul(h ^ ids[i], 0x01000193)
  return (h ^ n) & 0x3fffffff
}

function sameIds(set: Int16Array, ids: Int16Array, n: number): boolean {
  if (set.length !== n) return false
  for (let i = 0; i < n; i++) if (set[i] !== ids[i]) return false
  return true
}

/** Offsets of the digests in a {@link DigestArena} record: MD5 (16 bytes), SHA-1 (20), SHA-256 (32). */
const MD5_AT = 0
const SHA1_AT = 16
const SHA256_AT = 36
/** Bytes of one record. */
const DIGEST_RECORD = 68
/** Records per chunk (1.1 MB); the first one holds the chunk's serial instead of digests. */
const DIGEST_CHUNK_RECORDS = 1 << 14
/**
 * Serial of the last digest chunk allocated, in this process, across snapshots: a record's
 * {@link FileEntry.digestId} is `serial * DIGEST_CHUNK_RECORDS + index`, and records are never
 * rewritten, so an id is never given to other digests.
 */
let lastDigestChunk = 0

/** A fresh digest chunk, its serial in the first 4 bytes and record 0 taken by it. */
function digestChunk(): Buffer {
  const chunk = Buffer.alloc(DIGEST_CHUNK_RECORDS * DIGEST_RECORD)
  chunk.writeUInt32LE(++lastDigestChunk, 0)
  return chunk
}
/**
 * {@link IndexedFile} `packed` bits: which of the record's digests are present, the
 * signature's suffix, the client formats; the record's byte offset lies above them.
 */
const HAS_MD5 = 1
const HAS_SHA1 = 2
const HAS_SHA256 = 4
const SIGNATURE_SHIFT = 3
const FORMATS_SHIFT = 5
const OFFSET_SHIFT = FORMATS_SHIFT + FORMAT_BITS
/** The signature suffixes by their 2-bit code (0: none). */
const SIGNATURES = [null, '.asc', '.sig'] as const

/**
 * The files' digests as raw bytes, one {@link DIGEST_RECORD}-byte record per hashed file
 * version, in shared Buffer chunks: 68 bytes a file instead of three hex strings (about 200
 * bytes of heap). A replaced file's record is not reused (like its mirror slots; see
 * {@link Snapshot.churn}).
 */
export class DigestArena {
  private chunk = digestChunk()
  private used = 1
  /** Records allocated in total. */
  records = 0

  /**
   * A file entry holding these digests (lowercase hex, or null when absent), or, when one of
   * them is not lowercase hex of its digest's length, the signature is not `.asc`/`.sig`/null
   * or the formats have bits beyond the {@link FORMAT_BITS} known ones (never so
   * for what mb indexes), a plain object that keeps the values as they are.
   */
  entry(fields: Omit<FileEntry, 'md5' | 'sha1' | 'sha256'>, md5: string | null, sha1: string | null, sha256: string | null): FileEntry {
    const signature = SIGNATURES.indexOf((fields.signature ?? null) as (typeof SIGNATURES)[number])
    const formats = fields.formats ?? 0
    const plain = signature < 0 || formats >>> FORMAT_BITS !== 0 || !(isDigestHex(md5, 32) && isDigestHex(sha1, 40) && isDigestHex(sha256, 64))
    if (plain) return {...fields, md5, sha1, sha256}
    const flags = (signature << SIGNATURE_SHIFT) | (formats << FORMATS_SHIFT)
    if (md5 === null && sha1 === null && sha256 === null) return new IndexedFile(fields.path, fields.size, fields.mtime, fields.mirrors, EMPTY_DIGESTS, flags)
    if (this.used === DIGEST_CHUNK_RECORDS) {
      this.chunk = digestChunk()
      this.used = 1
    }
    const at = this.used++ * DIGEST_RECORD
    this.records++
    let bits = 0
    if (md5 !== null) {
      this.chunk.write(md5, at + MD5_AT, 'hex')
      bits |= HAS_MD5
    }
    if (sha1 !== null) {
      this.chunk.write(sha1, at + SHA1_AT, 'hex')
      bits |= HAS_SHA1
    }
    if (sha256 !== null) {
      this.chunk.write(sha256, at + SHA256_AT, 'hex')
      bits |= HAS_SHA256
    }
    return new IndexedFile(fields.path, fields.size, fields.mtime, fields.mirrors, this.chunk, (at << OFFSET_SHIFT) | flags | bits)
  }
}

const EMPTY_DIGESTS = Buffer.alloc(0)

/** `hex` is null or `length` lowercase hex digits. */
function isDigestHex(hex: string | null, length: number): boolean {
  if (hex === null) return true
  if (hex.length !== length) return false
  for (let i = 0; i < length; i++) {
    const c = hex.charCodeAt(i)
    if (!((c >= 48 && c <= 57) || (c >= 97 && c <= 102))) return false
  }
  return true
}

/**
 * A file entry as the snapshot hands it out: the mirror set interned ({@link MirrorSetPool}),
 * the digests as bytes in a {@link DigestArena} chunk, read back as hex on access. The
 * {@link FileMap} keeps none of these objects: it stores their fields in columns and makes
 * one on each lookup (a short-lived object, collected young). Its digests are prototype
 * getters: copy an entry with {@link fileWith} or {@link unindexedVersion}, never with object
 * spread (that would drop them).
 */
class IndexedFile implements FileEntry {
  constructor(
    readonly path: string,
    readonly size: number,
    readonly mtime: number,
    readonly mirrors: Int16Array,
    /** The chunk holding this file's digest record (empty: no digests). */
    readonly digests: Buffer,
    /** The record's byte offset in `digests`, the signature, the formats, the digests present (see {@link OFFSET_SHIFT}). */
    readonly packed: number,
    /** The {@link FileMap} that made this entry, and where it stores it (undefined and -1: made outside a map). */
    readonly map: FileMap | undefined = undefined,
    readonly slot = -1,
  ) {}

  get signature(): string | null {
    return SIGNATURES[(this.packed >>> SIGNATURE_SHIFT) & 3]
  }

  get formats(): number {
    return (this.packed >>> FORMATS_SHIFT) & ((1 << FORMAT_BITS) - 1)
  }

  get md5(): string | null {
    return this.packed & HAS_MD5 ? this.hex(MD5_AT, SHA1_AT) : null
  }

  get sha1(): string | null {
    return this.packed & HAS_SHA1 ? this.hex(SHA1_AT, SHA256_AT) : null
  }

  get sha256(): string | null {
    return this.packed & HAS_SHA256 ? this.hex(SHA256_AT, DIGEST_RECORD) : null
  }

  get digestId(): number {
    const digests = this.digests
    return digests.length === 0 ? 0 : digests.readUInt32LE(0) * DIGEST_CHUNK_RECORDS + (this.packed >>> OFFSET_SHIFT) / DIGEST_RECORD
  }

  private hex(from: number, to: number): string {
    const at = this.packed >>> OFFSET_SHIFT
    return this.digests.toString('hex', at + from, at + to)
  }
}

/**
 * A plain copy of `file` (every {@link FileEntry} field read out, so the digest getters of a
 * snapshot entry are kept) with `changes` laid over it. Use it instead of `{...file, ...}`.
 */
export function fileWith<T extends Partial<FileEntry> & object>(file: FileEntry, changes: T): FileEntry & T {
  const copy: FileEntry = {
    path: file.path,
    size: file.size,
    mtime: file.mtime,
    mirrors: file.mirrors,
    md5: file.md5,
    sha1: file.sha1,
    sha256: file.sha256,
    signature: file.signature,
    formats: file.formats,
  }
  if (file.stale !== undefined) copy.stale = file.stale
  return Object.assign(copy, changes)
}

/**
 * The entry for `file`'s path at another version (`size` bytes, `mtime` Unix seconds) that
 * the index does not describe yet: no mirrors, no digests, no client formats, delivered from
 * the origin until it is re-indexed and rescanned.
 */
export function unindexedVersion(file: FileEntry, version: {size: number; mtime: number}): FileEntry {
  const signature = SIGNATURES.indexOf((file.signature ?? null) as (typeof SIGNATURES)[number])
  const fields = {path: file.path, size: version.size, mtime: version.mtime, mirrors: EMPTY, signature: file.signature ?? null, formats: 0}
  return signature < 0 ? {...fields, md5: null, sha1: null, sha256: null} : new IndexedFile(fields.path, fields.size, fields.mtime, fields.mirrors, EMPTY_DIGESTS, signature << SIGNATURE_SHIFT)
}

/** Map operations per slice of a change set's merge, between yields to the event loop. */
const MERGE_SLICE = 1_000

/** Slots a {@link FileMap} starts with; it grows by half when they are used up. */
const INITIAL_SLOTS = 1024

/**
 * Origin path -> file, stored by columns: a {@link PathTable} maps the path to a slot (a
 * small integer), and each slot's size, mtime, packed bits and the indexes of its mirror set
 * and digest chunk sit in typed arrays (28 bytes a slot), so no file is a heap object. That
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
 * Change sets become visible all at once but are merged in slices. While a set is being
 * merged it sits in front of the map as `pending` (path -> entry, or null for a deleted
 * path), and `get`/`has` answer from it first, so a reader sees the whole set from the
 * moment it is published, whatever part is merged yet. Writes made meanwhile (`set`,
 * `delete`) go to both, so they are not shadowed by the pending set. Iteration and `size`
 * see the merged entries only (they are used for counts and loads).
 */
class FileMap {
  private readonly slots = new PathTable()
  private capacity = INITIAL_SLOTS
  private sizes = new Float64Array(INITIAL_SLOTS)
  private mtimes = new Float64Array(INITIAL_SLOTS)
  private packed = new Int32Array(INITIAL_SLOTS)
  /** By slot: the mirror set, as its index in `sets`. */
  private setRefs = new Int32Array(INITIAL_SLOTS)
  /** By slot: the digest chunk, as its index in `chunks`; {@link WHOLE} where the entry is kept whole in `whole`. */
  private chunkRefs = new Int32Array(INITIAL_SLOTS)
  /** The distinct mirror sets and digest chunks that slots refer to, and their indexes. */
  private readonly sets = new RefTable<Int16Array>(EMPTY)
  private readonly chunks = new RefTable<Buffer>(EMPTY_DIGESTS)
  /** Slots taken so far. */
  private used = 0
  /** Entries that are not {@link IndexedFile}s, by slot. */
  private readonly whole = new Map<number, FileEntry>()
  private pending: Map<string, FileEntry | null> | undefined

  /** Paths in the map (merged entries). */
  get size(): number {
    return this.slots.size
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
      this.setRefs[slot] = this.sets.ref(entry.mirrors)
      this.chunkRefs[slot] = this.chunks.ref(entry.digests)
    } else {
      this.chunkRefs[slot] = WHOLE
      this.whole.set(slot, entry)
    }
    const old = this.slots.set(path, slot)
    if (old !== undefined) this.release(old)
  }

  private remove(path: string): boolean {
    const slot = this.slots.get(path)
    if (slot === undefined) return false
    this.slots.delete(path)
    this.release(slot)
    return true
  }

  /** Drops the entry an unused slot keeps whole (mirror sets and chunks are shared, and stay). */
  private release(slot: number): void {
    this.whole.delete(slot)
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
  }

  private grow(): void {
    this.reserveColumns(Math.ceil(this.capacity * 1.5))
  }
}

/** {@link FileMap} chunk reference of a slot whose entry is kept whole. */
const WHOLE = -1

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

/** A consistent picture of mirrors and files. Replaced wholesale on a full load. */
export class Snapshot {
  readonly files = new FileMap()
  /** Compiled mirrors by id: read-only once built; a refresh assigns a new table. */
  mirrors: MirrorTable = new MirrorTable()
  /** The enabled redirect rules (src/lib/rules), compiled against `mirrors`; replaced with them. */
  rules: RuleSet = NO_RULES
  /** Where the files' mirror sets live (interned). */
  readonly mirrorSets = new MirrorSetPool()
  /** Where the files' digests live. */
  readonly digests = new DigestArena()
  /** The last refresh's transaction snapshot (`pg_snapshot` text, `xmin:xmax:xip,...`). */
  xmin: string | null = null
  /** Unix ms (UTC) of the last successful load or refresh. */
  refreshedAt = 0
  /** File rows replaced since the full load (their old digest records, and mirror sets no other file shares, are garbage). */
  churn = 0
  /** The origin's symlinks (`file_link`): link path → canonical target. Replaced whole when it changes. */
  links: ReadonlyMap<string, LinkTarget> = new Map()

  /**
   * The indexed file at `path`, or else, when links lie on `path`, the indexed file at its
   * canonical path (origin/links.ts). Links are looked at only on a miss, so a request for an
   * indexed path pays nothing for them.
   */
  lookup(path: string): FileEntry | undefined {
    const entry = this.files.get(path)
    if (entry !== undefined || this.links.size === 0) return entry
    const canonical = resolveLinks(this.links, path)
    return canonical === undefined ? undefined : this.files.get(canonical)
  }
}

function str(value: unknown): string | null {
  return value === null || value === undefined ? null : String(value)
}

function fileFromRow(snapshot: Snapshot, row: unknown[]): FileEntry {
  // id, path, size, mtime, mirrors, md5, sha1, sha256, signature, formats
  return snapshot.digests.entry(
    {path: row[1] as string, size: Number(row[2]), mtime: Number(row[3]), mirrors: snapshot.mirrorSets.fromText(row[4] as string | null), signature: str(row[8]), formats: Number(row[9])},
    str(row[5]),
    str(row[6]),
    str(row[7]),
  )
}

// Hashes only while they describe the row's version (origin/freshness.ts).
const FRESH = HASHES_MATCH_VERSION_SQL
const FORMATS = `CASE WHEN ${FRESH} THEN (CASE WHEN sha1_pieces IS NOT NULL THEN ${FORMAT_TORRENT} ELSE 0 END) + (CASE WHEN zsync_block_size IS NOT NULL THEN ${FORMAT_ZSYNC} ELSE 0 END) + (CASE WHEN piece_hash = 'sha256' AND pieces IS NOT NULL THEN ${FORMAT_SHA256_PIECES} ELSE 0 END) ELSE 0 END`
const FILE_COLUMNS = `id, path, size, mtime, array_to_string(mirrors, ','), CASE WHEN ${FRESH} THEN md5 END, CASE WHEN ${FRESH} THEN sha1 END, CASE WHEN ${FRESH} THEN sha256 END, signature, ${FORMATS}`

async function readMirrors(view: ReadView): Promise<MirrorTable> {
  const result = await view.query(`SELECT row_to_json(m)::text FROM mirror m ORDER BY id`)
  const compiled: SelectMirror[] = []
  for (const [json] of result) {
    const row = JSON.parse(json as string) as MirrorRow
    for (const key of ['status_changed_at', 'last_scan_at', 'last_scan_ok_at', 'created_at', 'updated_at'] as const) {
      if (row[key]) (row as unknown as Record<string, unknown>)[key] = new Date(row[key] as unknown as string)
    }
    compiled.push(compileMirror(row))
  }
  return new MirrorTable(compiled)
}

/** Reads every redirect rule (a handful of rows, re-read on every refresh like the mirrors) and compiles them against `mirrors`. */
async function readRules(view: ReadView, mirrors: MirrorTable): Promise<RuleSet> {
  const rows = await view.query(RULES_SQL)
  return compileRules(
    rows.map(([json]) => ruleFromJson(json as string)),
    mirrors,
  )
}

/** Every row of `file_link`, as the snapshot holds them. */
async function readLinkRows(view: ReadView): Promise<Map<string, LinkTarget>> {
  const links = new Map<string, LinkTarget>()
  for (const [path, target, directory] of await view.query(`SELECT path, target, directory FROM file_link`)) links.set(path as string, {target: target as string, directory: Boolean(directory)})
  return links
}

/**
 * The links again when `file_link` changed since a transaction snapshot, else undefined
 * (`unseen`: its {@link unseenCondition}). The table is small and has no tombstones: it
 * changed when a row is newer than that snapshot could see, or else its row count differs from `known` (only deletions leave no
 * newer row, and a set of old rows that differs from the old set is a smaller one).
 */
async function readLinksIfChanged(view: ReadView, unseen: string, known: number): Promise<Map<string, LinkTarget> | undefined> {
  const [[count, newer]] = await view.query(`SELECT count(*)::int, coalesce(bool_or(${unseen}), false) FROM file_link`)
  return newer || Number(count) !== known ? readLinkRows(view) : undefined
}

async function currentXmin(view: ReadView): Promise<string> {
  const [[snapshot]] = await view.query(`SELECT pg_current_snapshot()::text`)
  return snapshot as string
}

/** Reads the files with lo < id <= hi in keyset batches into `snapshot`. */
async function readFileRange(view: ReadView, snapshot: Snapshot, lo: number, hi: number, onProgress?: (files: number) => void): Promise<void> {
  let lastId = lo
  for (;;) {
    const rows = await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${BATCH_ROWS}`, [lastId, hi])
    for (const row of rows) {
      const entry = fileFromRow(snapshot, row)
      snapshot.files.set(entry.path, entry)
    }
    if (rows.length === 0) break
    lastId = Number(rows.at(-1)![0])
    onProgress?.(snapshot.files.size)
    if (rows.length < BATCH_ROWS) break
  }
}

/**
 * Reads a complete snapshot in one consistent view. With more than 200,000 files, the id range
 * is read in two halves through {@link ReadView.parallel}: on PostgreSQL the server then
 * produces one half while this process parses the other.
 * @param onProgress called after each batch with the number of files read so far
 * @throws whatever the database driver throws (unreachable, schema missing)
 */
export async function loadSnapshot(database: Database, onProgress?: (files: number) => void): Promise<Snapshot> {
  const snapshot = new Snapshot()
  await database.readSnapshot(async (view) => {
    snapshot.xmin = await currentXmin(view)
    snapshot.mirrors = await readMirrors(view)
    snapshot.rules = await readRules(view, snapshot.mirrors)
    snapshot.links = await readLinkRows(view)
    const [[minId, maxId, count]] = await view.query(`SELECT coalesce(min(id), 0), coalesce(max(id), 0), count(*)::int FROM file`)
    const lo = Number(minId) - 1
    const hi = Number(maxId)
    snapshot.files.reserve(Number(count))
    if (Number(count) < 200_000) return readFileRange(view, snapshot, lo, hi, onProgress)
    const mid = Math.floor((lo + hi) / 2)
    await view.parallel([(half) => readFileRange(half, snapshot, lo, mid, onProgress), (half) => readFileRange(half, snapshot, mid, hi, onProgress)])
  })
  snapshot.refreshedAt = Date.now()
  return snapshot
}

/** What one incremental refresh changed. */
export interface RefreshResult {
  mirrors: number
  updated: number
  deleted: number
  /** Too many rows changed for an incremental refresh: nothing was applied, reload in full. */
  reload?: boolean
}

/** Changed file rows read and parsed per slice of a refresh, between yields to the event loop. */
const REFRESH_SLICE_ROWS = 2_000

/** Lets the event loop run (pending requests, timers) before the next slice of work. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve))
}

/**
 * Applies the changes committed since the snapshot's xmin: all mirrors are re-read, changed
 * file rows replace their entries, tombstoned paths are dropped (tombstones first, then rows,
 * so a delete-then-recreate ends with the file present).
 *
 * A large change set must neither block the event loop nor show readers half of it. The
 * changed rows are read and parsed aside, {@link REFRESH_SLICE_ROWS} at a time with a yield
 * to the event loop before each slice (requests are answered meanwhile, from the unchanged
 * snapshot); then {@link FileMap.applyChangeSet} publishes the whole set at once, with the
 * new mirror table, and merges it in slices, so a request sees every change of the set or
 * none, and no request waits for more than a slice.
 * @throws whatever the database driver throws; the snapshot is then unchanged
 */
export async function refreshSnapshot(database: Database, snapshot: Snapshot): Promise<RefreshResult> {
  const changes = await database.readSnapshot((view) => readChanges(view, snapshot.xmin ?? '1:1:', Math.max(50_000, snapshot.files.size / 10), snapshot))
  if (!changes) {
    snapshot.churn = Number.POSITIVE_INFINITY // the keeper reloads in full
    return {mirrors: 0, updated: 0, deleted: 0, reload: true}
  }
  // Applied after the transaction, so a failed read changes nothing.
  const result: RefreshResult = {mirrors: changes.mirrors.size, updated: changes.entries.length, deleted: 0}
  result.deleted = await snapshot.files.applyChangeSet(changes.tombstones, changes.entries, () => {
    snapshot.mirrors = changes.mirrors
    snapshot.rules = changes.rules
    if (changes.links !== undefined) snapshot.links = changes.links
    snapshot.xmin = changes.xmin
  })
  snapshot.churn += result.updated
  snapshot.refreshedAt = Date.now()
  return result
}

/** What changed since a transaction snapshot, read in one view. */
interface Changes {
  /** This view's own transaction snapshot, the next refresh's `since`. */
  xmin: string
  mirrors: MirrorTable
  rules: RuleSet
  /** All links, when `file_link` changed since (else undefined: keep the snapshot's). */
  links: Map<string, LinkTarget> | undefined
  /** Paths deleted since, to drop before applying `entries`. */
  tombstones: string[]
  /** Changed files, parsed (their mirror sets and digests in the snapshot's pools), not yet in its map. */
  entries: FileEntry[]
}

/**
 * Reads the mirrors and the file rows and tombstones that the transaction snapshot `since`
 * (`pg_snapshot` text) could not see, parsed into `snapshot`'s mirror-set pool and digest
 * arena (its map is left as it is; `snapshot.links.size` tells whether the links changed).
 *
 * Its cost follows the change, never the size of `file`: the bounds are literals
 * ({@link unseenCondition}) and sequential scans are off for this transaction's file
 * queries, so `file` and `file_tombstone` are read through their txid indexes whatever the
 * statistics say (missing, stale, or one txid for every row). An idle refresh reads no file
 * row. A set of at most {@link REFRESH_SLICE_ROWS} rows is one query; a larger one reads the
 * changed ids first (from the txid index) and then the rows by primary key, that many at a
 * time, with a yield to the event loop before each page.
 * @returns null when more than `limit` file rows changed (the caller reloads in full instead)
 */
async function readChanges(view: ReadView, since: string, limit: number, snapshot: Snapshot): Promise<Changes | null> {
  const unseen = unseenCondition(snapshotBounds(since))
  const xmin = await currentXmin(view)
  const mirrors = await readMirrors(view)
  const rules = await readRules(view, mirrors)
  const links = await readLinksIfChanged(view, unseen, snapshot.links.size)
  // Ends with the transaction. Every file query below has its txid index to go by.
  await view.query('SET LOCAL enable_seqscan = off')
  const tombstones = (await view.query(`SELECT path FROM file_tombstone WHERE ${unseen}`)).map(([path]) => path as string)
  const [[count]] = await view.query(`SELECT count(*)::int FROM file WHERE ${unseen}`)
  if (Number(count) > limit) return null
  const entries: FileEntry[] = []
  if (Number(count) <= REFRESH_SLICE_ROWS) {
    const rows = Number(count) > 0 ? await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE ${unseen}`) : []
    for (const row of rows) entries.push(fileFromRow(snapshot, row))
  } else {
    // On the embedded store a query runs on this event loop: short pages keep it free.
    const ids = (await view.query(`SELECT id FROM file WHERE ${unseen}`)).map(([id]) => Number(id))
    for (let at = 0; at < ids.length; at += REFRESH_SLICE_ROWS) {
      await yieldToEventLoop()
      const page = `{${ids.slice(at, at + REFRESH_SLICE_ROWS).join(',')}}`
      for (const row of await view.query(`SELECT ${FILE_COLUMNS} FROM file WHERE id = ANY($1::int[])`, [page])) entries.push(fileFromRow(snapshot, row))
    }
  }
  return {xmin, mirrors, rules, links, tombstones, entries}
}
