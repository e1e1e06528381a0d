/**
 * A MaxMind DB (`.mmdb`) reader that keeps the data section and the metadata in memory but reads
 * the search tree from the file as it walks it (MaxMind DB format 2.0,
 * https://maxmind.github.io/MaxMind-DB/, "Binary Search Tree Section").
 *
 * The tree is most of a City file (36 of the 45 MB of the bundled GeoLite2 City files) and a
 * lookup touches about 30 of its nodes, so holding it whole costs a server most of the GeoIP
 * files' memory for a few KB used per lookup. Tree pages (4 KB) are read with `pread` on a file
 * descriptor held open (a file replaced by geoipupdate's rename keeps being read whole and
 * consistent until the next reload) into a bounded page cache, cleared wholesale when full.
 * The rest of the lookup is `maxmind`'s own Reader: its buffer is the file's size but only the
 * data section and the metadata are written into it; the tree's pages of that buffer are never
 * touched, so the operating system never backs them (a zero-filled allocation of this size is
 * mapped on demand).
 */
import {closeSync, fstatSync, openSync, readSync} from 'node:fs'
import {Reader, type Response} from 'maxmind'

/** Tree page size in bytes; a power of two. */
const PAGE_BYTES = 4096
/** Tree pages cached per file: 4 MB. */
const CACHED_PAGES = 1024
/** The metadata sits in the last 128 KiB of a file (format 2.0, "Database Metadata"). */
const METADATA_MAX_BYTES = 128 * 1024
/** Bytes between the tree and the data section (format 2.0, "Data Section Separator"). */
const DATA_SECTION_SEPARATOR = 16

/** The fields of mmdb-lib's Reader (maxmind 5.x) this module sets; private in its typings. */
interface ReaderInternals {
  walker: {left: (offset: number) => number; right: (offset: number) => number}
  ipv4StartNodeNumber: number
  ipv4Start: () => number
  metadata: {searchTreeSize: number; nodeByteSize: number; recordSize: number}
}

/** Reads `length` bytes at `position` of `fd` into `target` at `at`; a short file is an error. */
function readFully(fd: number, target: Buffer, at: number, length: number, position: number): void {
  let done = 0
  while (done < length) {
    const n = readSync(fd, target, at + done, length - done, position + done)
    if (n === 0) throw new Error(`the file ends at byte ${position + done}, before the end of its search tree or data`)
    done += n
  }
}

/**
 * Node reads over the tree of `fd`, through a page cache.
 * @param treeBytes  the tree's size in bytes (metadata `node_count * record_size / 4`)
 */
function pagedWalker(fd: number, treeBytes: number, nodeBytes: number, recordSize: number): ReaderInternals['walker'] {
  const slab = Buffer.alloc(CACHED_PAGES * PAGE_BYTES)
  const slots = new Map<number, number>()
  const scratch = Buffer.alloc(8)
  function page(index: number): number {
    let slot = slots.get(index)
    if (slot === undefined) {
      if (slots.size >= CACHED_PAGES) slots.clear()
      slot = slots.size
      const start = index * PAGE_BYTES
      readFully(fd, slab, slot * PAGE_BYTES, Math.min(PAGE_BYTES, treeBytes - start), start)
      slots.set(index, slot)
    }
    return slot * PAGE_BYTES
  }
  // The node's bytes, at the returned offset of the returned buffer.
  function node(offset: number): [Buffer, number] {
    const within = offset & (PAGE_BYTES - 1)
    if (within + nodeBytes <= PAGE_BYTES) return [slab, page(offset >>> 12) + within]
    for (let i = 0; i < nodeBytes; i++) {
      const at = offset + i
      scratch[i] = slab[page(at >>> 12) + (at & (PAGE_BYTES - 1))]
    }
    return [scratch, 0]
  }
  const read = (right: boolean) => (offset: number) => {
    const [b, o] = node(offset)
    if (recordSize === 24) return b.readUIntBE(right ? o + 3 : o, 3)
    if (recordSize === 32) return b.readUInt32BE(right ? o + 4 : o)
    return right ? ((b[o + 3] & 0x0f) << 24) | b.readUIntBE(o + 4, 3) : ((b[o + 3] & 0xf0) << 20) | b.readUIntBE(o, 3)
  }
  return {left: read(false), right: read(true)}
}

/** Closes a reader's file once the reader is unreachable (a GeoIP reload drops the old ones). */
const closeWhenDropped = new FinalizationRegistry<number>((fd) => closeSync(fd))

/**
 * Opens `path` as a MaxMind DB whose search tree stays on disk (see the module comment).
 * Lookups (`get`) answer exactly as `maxmind.open`'s reader does.
 * @param cacheMax  decoded records kept by offset (maxmind's `cache.max`)
 * @throws Error when the file is not a MaxMind DB (no metadata, unsupported record size, a
 *         tree or data section past the end of the file) or cannot be read
 */
export function openPagedMmdb<T extends Response>(path: string, cacheMax: number): Reader<T> {
  const fd = openSync(path, 'r')
  try {
    const size = fstatSync(fd).size
    // Zero-filled, so untouched pages are never backed (calloc of fresh mapped memory).
    const image = Buffer.alloc(size)
    const tail = Math.min(size, METADATA_MAX_BYTES)
    readFully(fd, image, size - tail, tail, size - tail)
    const cache = new Map<number, unknown>()
    // The Reader parses the metadata from the tail; its own walker meanwhile sees a zero tree.
    const set = (key: number, value: unknown) => {
      if (cache.size >= cacheMax) cache.clear()
      cache.set(key, value)
    }
    const reader = new Reader<T>(image, {cache: {get: (key: number) => cache.get(key), set}})
    const {searchTreeSize, nodeByteSize, recordSize} = (reader as unknown as ReaderInternals).metadata
    if (![24, 28, 32].includes(recordSize)) throw new Error(`unsupported record size ${recordSize}`)
    const dataStart = searchTreeSize + DATA_SECTION_SEPARATOR
    if (dataStart > size) throw new Error(`the search tree (${searchTreeSize} bytes) is larger than the file (${size} bytes)`)
    // The data section, up to the part of the tail already read.
    readFully(fd, image, dataStart, Math.max(0, size - tail - dataStart), dataStart)
    const internals = reader as unknown as ReaderInternals
    internals.walker = pagedWalker(fd, searchTreeSize, nodeByteSize, recordSize)
    internals.ipv4StartNodeNumber = internals.ipv4Start()
    closeWhenDropped.register(reader, fd)
    return reader
  } catch (error) {
    closeSync(fd)
    throw error
  }
}
