/**
 * Per-directory counts of the snapshot's files ({@link DirectoryCounts}), kept as files are
 * stored and dropped, so that what a subtree holds, and what each mirror holds of it, is a
 * lookup: the network overview (`GET /mirrors`, ../../operator/network.ts) and the per-mirror
 * metrics read them instead of walking millions of files.
 */
import {resized} from './columns.js'

/** Directories the columns start with; they grow by half when used up. */
const INITIAL_DIRECTORIES = 256
/** Pending (mirror set, directory) groups that make a {@link DirectoryCounts.flush} happen on the spot. */
const MAX_PENDING_GROUPS = 200_000
/** Held counts of a directory that holds no file. */
const NONE = new Int32Array(0)

/** Files of one mirror set in one directory, not yet added to the counts. */
interface Group {
  files: number
  bytes: number
}

/**
 * Files and bytes per directory subtree, and per directory subtree and mirror id the files
 * whose mirror set names that mirror (its copies of the current version).
 *
 * A directory is a path prefix ending in '/' ('' is the whole tree); a file counts in every
 * directory above it. Each directory has its files and bytes (two Float64Array columns) and
 * one Int32Array of held files indexed by mirror id, as long as the highest id that holds
 * something there (none at all where no file is left); held bytes are kept for the whole
 * tree only (what the metrics' byte ratios need). The size follows the directories and
 * mirrors, not the files: 22.7 MB of heap for 10,102 directories on 500 mirrors
 * (`npm run bench -- overview`, 1,000,000 files).
 *
 * Changes are grouped before they are added: files of one mirror set in one directory cost
 * one addition per directory above them and mirror of the set, not one per file. The groups
 * are added on the next read (or when {@link MAX_PENDING_GROUPS} are waiting, or on
 * {@link flush}). Directories are never dropped; a full snapshot load starts afresh.
 */
export class DirectoryCounts {
  private readonly indexes = new Map<string, number>([['', 0]])
  /** By directory index: its path. */
  private readonly names: string[] = ['']
  /** By directory: the parent directory's index (-1 for the root), files and bytes below it, held files by mirror id. */
  private parents = new Int32Array(INITIAL_DIRECTORIES).fill(-1, 0, 1)
  private files = new Float64Array(INITIAL_DIRECTORIES)
  private bytes = new Float64Array(INITIAL_DIRECTORIES)
  private readonly held: Int32Array[] = [NONE]
  /** Bytes of the whole tree held, by mirror id. */
  private heldBytes = new Float64Array(0)
  private directories = 1
  /** Changes not yet added: by mirror set (interned, so compared by identity), then by directory index. */
  private readonly pending = new Map<Int16Array, Map<number, Group>>()
  private pendingGroups = 0
  /** The directory of the last path counted and its index (consecutive files often share one). */
  private lastDirectory = ''
  private lastIndex = 0
  /** {@link inPathOrder}, as last sorted. */
  private order = new Int32Array(0)

  /** Counts a file at `path` (root-relative) of `size` bytes held by the mirror ids `mirrors`; the index of its directory ({@link nameOf}). */
  add(path: string, size: number, mirrors: Int16Array): number {
    return this.change(path, size, mirrors, 1)
  }

  /** Uncounts a file that {@link add} counted with the same values. */
  remove(path: string, size: number, mirrors: Int16Array): void {
    this.change(path, size, mirrors, -1)
  }

  /** Files (and their bytes) under `directory` ('' or ending in '/'); zeros for one that holds none. */
  subtree(directory: string): {files: number; bytes: number} {
    this.flush()
    const d = this.indexes.get(directory)
    return d === undefined ? {files: 0, bytes: 0} : {files: this.files[d], bytes: this.bytes[d]}
  }

  /** Files under `directory` ('' or ending in '/') that mirror `id` holds. */
  heldFiles(directory: string, id: number): number {
    this.flush()
    const d = this.indexes.get(directory)
    return d === undefined ? 0 : (this.held[d][id] ?? 0)
  }

  /** Bytes of the whole tree that mirror `id` holds. */
  heldTreeBytes(id: number): number {
    this.flush()
    return this.heldBytes[id] ?? 0
  }

  /** The index of `directory` ('' or ending in '/'), or undefined when no file was ever counted under it. */
  indexOf(directory: string): number | undefined {
    return this.indexes.get(directory)
  }

  /** The directory of index `d` ('' or ending in '/'), as {@link add} numbered it. */
  nameOf(d: number): string {
    return this.names[d]
  }

  /**
   * Every directory's index, in the order of their paths without the trailing '/' (the order
   * in which folders are listed: 'a' < 'a-b' < 'a/b'). Sorted when first asked after a
   * directory was added (a few ms for 10,000 directories) and kept until the next one is.
   */
  inPathOrder(): Int32Array {
    if (this.order.length === this.directories) return this.order
    // The default sort compares strings by UTF-16 code units, as `<` does, and is several
    // times faster than a sort of indexes by a comparator; the names are unique.
    const index = new Map<string, number>()
    for (let d = 0; d < this.directories; d++) index.set(this.names[d].slice(0, -1), d)
    this.order = Int32Array.from([...index.keys()].sort(), (folder) => index.get(folder)!)
    return this.order
  }

  /**
   * What a full load does at its end, so that the first reads after it are lookups: adds the
   * pending changes ({@link flush}) and sorts the directories ({@link inPathOrder}).
   */
  settle(): void {
    this.flush()
    this.inPathOrder()
  }

  /** Directories known (those emptied since included). */
  get size(): number {
    return this.directories
  }

  /** Adds the pending changes to the counts (reads do it first; a full load does it at its end, so that the first read is quick). */
  flush(): void {
    if (this.pendingGroups === 0) return
    for (const [mirrors, byDirectory] of this.pending) {
      let top = -1
      for (let i = 0; i < mirrors.length; i++) if (mirrors[i] > top) top = mirrors[i]
      for (const [d, group] of byDirectory) this.apply(d, mirrors, top, group)
    }
    this.pending.clear()
    this.pendingGroups = 0
  }

  private change(path: string, size: number, mirrors: Int16Array, sign: number): number {
    const d = this.directoryOf(path)
    let byDirectory = this.pending.get(mirrors)
    if (byDirectory === undefined) {
      byDirectory = new Map()
      this.pending.set(mirrors, byDirectory)
    }
    const group = byDirectory.get(d)
    if (group !== undefined) {
      group.files += sign
      group.bytes += sign * size
      return d
    }
    byDirectory.set(d, {files: sign, bytes: sign * size})
    if (++this.pendingGroups >= MAX_PENDING_GROUPS) this.flush()
    return d
  }

  /** Adds `group` (files of set `mirrors`, whose highest id is `top`, in directory `d`) to `d` and every directory above it. */
  private apply(d: number, mirrors: Int16Array, top: number, group: Group): void {
    if (group.files === 0 && group.bytes === 0) return
    for (let at = d; at >= 0; at = this.parents[at]) {
      this.files[at] += group.files
      this.bytes[at] += group.bytes
      if (this.files[at] === 0) {
        this.held[at] = NONE // no file left, so no mirror holds one
        continue
      }
      let counts = this.held[at]
      if (top >= counts.length) counts = this.held[at] = resized(counts, top + 1)
      for (let i = 0; i < mirrors.length; i++) counts[mirrors[i]] += group.files
    }
    if (top >= this.heldBytes.length) this.heldBytes = resized(this.heldBytes, top + 1)
    for (let i = 0; i < mirrors.length; i++) this.heldBytes[mirrors[i]] += group.bytes
  }

  /** The index of the directory holding `path`, made with those above it when new. */
  private directoryOf(path: string): number {
    const slash = path.lastIndexOf('/')
    if (slash < 0) return 0
    if (slash + 1 === this.lastDirectory.length && path.startsWith(this.lastDirectory)) return this.lastIndex
    const directory = path.slice(0, slash + 1)
    this.lastDirectory = directory
    this.lastIndex = this.indexes.get(directory) ?? this.create(directory)
    return this.lastIndex
  }

  /** Makes directory `directory` (ending in '/'), and those above it that are missing; its index. */
  private create(directory: string): number {
    const slash = directory.lastIndexOf('/', directory.length - 2)
    const parentPath = directory.slice(0, slash + 1)
    const parent = this.indexes.get(parentPath) ?? this.create(parentPath)
    const d = this.directories++
    if (d === this.parents.length) {
      const length = Math.ceil(d * 1.5)
      this.parents = resized(this.parents, length)
      this.files = resized(this.files, length)
      this.bytes = resized(this.bytes, length)
    }
    this.parents[d] = parent
    this.held.push(NONE)
    this.names.push(directory)
    this.indexes.set(directory, d)
    return d
  }
}
