/**
 * One origin file as the snapshot holds it ({@link FileEntry}), and how its digests are kept:
 * as bytes in shared chunks ({@link DigestArena}), read back as hex on access
 * ({@link IndexedFile}), so that millions of files are not millions of strings.
 */
import type {SelectFile} from '../../select/types.js'
import {EMPTY} from './mirror-sets.js'

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
export const FORMAT_SHA256_PIECES = 4
/** Every {@link FileEntry.formats} bit. */
const FORMAT_BITS = 3

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

export const EMPTY_DIGESTS = Buffer.alloc(0)

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
export class IndexedFile implements FileEntry {
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
    readonly map: object | undefined = undefined,
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
