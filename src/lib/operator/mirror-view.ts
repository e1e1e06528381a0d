/**
 * What one mirror lacks, holds stale or holds corrupt, for its page on `mb serve`
 * (`GET /mirrors/NAME`, ./mirror-page.ts), computed from the in-memory snapshot rather than
 * by SQL per request. The kinds mean what `mb mirror show NAME --files KIND` says
 * (../lookup/mirror-files.ts, the SQL listing of the same question):
 *
 * - `missing`: files under the mirror's base path, through `scan.include`/`exclude` and its
 *   own globs, whose mirror set lacks it, and that it holds neither stale nor corrupt. One
 *   pass over the file map's columns (../serve/snapshot/file-map.ts `tallyLacking`)
 *   tests each file's mirror set with one read of the snapshot's set membership table
 *   (../serve/snapshot/set-members.ts) and counts per directory by index, making no path
 *   string; globs are read from a bitset by slot made once per glob set and full load
 *   (./carried-slots.ts; the one of `scan.include`/`exclude` alone is made in idle time
 *   after each full load, {@link MirrorFilesView.warmAfterLoads}); a folder's files are found when it is first listed, by a pass over
 *   the same columns;
 * - `stale`: copies its last scan saw with another size or mtime: not in the snapshot, so read
 *   from `mirror_file_stale` for that mirror, with its globs, in one database read kept for
 *   {@link EXTRA_TTL_MS};
 * - `bad`: copies content checks found corrupt at the files' current versions (the snapshot's
 *   bad copies).
 *
 * A mirror's files of one kind are grouped per folder once ({@link MirrorFileIndex}) and kept
 * per mirror and kind while the snapshot's mirror table is the same one (a refresh that
 * changed anything replaces it) and at most {@link INDEX_TTL_MS}; a page is then a slice.
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import type {FileKind, FolderCount, MirrorFile} from '../lookup/mirror-files.js'
import type {SelectMirror} from '../select/types.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import {folderOf} from '../text.js'
import {unixIso} from '../time.js'
import {CarriedSlots} from './carried-slots.js'

/** How long a mirror's globs and stale copies are kept (ms), as the overview's database record is. */
const EXTRA_TTL_MS = 10_000
/** How long a mirror's grouped files are kept at most (ms), as the overview's pages are. */
const INDEX_TTL_MS = 30_000
/** Mirror-and-kind indexes kept at once (the oldest goes first). */
const MAX_INDEXES = 16

/** A mirror's copy as its last scan saw it: size in bytes, mtime in Unix seconds (null when the listing had none). */
interface Copy {
  size: number
  mtime: number | null
}

/** What the page needs of a mirror from the database: its own globs and its stale copies by origin path. */
interface MirrorExtra {
  include: string[]
  exclude: string[]
  stale: Map<string, Copy>
}

/** One mirror's files of one kind, grouped per folder ('' = the top of the tree). */
export interface MirrorFileIndex {
  kind: FileKind
  /** Files and their bytes (the origin's sizes) in all folders. */
  files: number
  bytes: number
  /** Folders in path order, with their counts. */
  folders: FolderCount[]
  /** Path and size of each file of a folder, in path order (made when the folder is first listed, and kept). */
  list: (folder: string) => ReadonlyArray<readonly [string, number]>
  /** `stale`: the mirror's copies by path. */
  copies: Map<string, Copy>
}

/** One page of a folder's files, and how many the folder has. */
export interface FolderPage {
  total: number
  files: MirrorFile[]
}

/** Sorts path-and-size pairs by path. */
function byPath(files: Array<[string, number]>): Array<[string, number]> {
  return files.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
}

/** Folders most recently listed whose sorted files an index keeps. */
const MAX_FOLDER_LISTS = 64

/** `make(folder)`, kept for the last {@link MAX_FOLDER_LISTS} folders asked. */
function folderFiles(make: (folder: string) => Array<[string, number]>): (folder: string) => Array<[string, number]> {
  const kept = new Map<string, Array<[string, number]>>()
  return (folder) => {
    let list = kept.get(folder)
    if (list === undefined) {
      if (kept.size >= MAX_FOLDER_LISTS) kept.delete(kept.keys().next().value!)
      list = make(folder)
      kept.set(folder, list)
    }
    return list
  }
}

/** Groups `files` (path, size) per folder into an index of `kind` (the few stale and corrupt copies). */
function grouped(kind: FileKind, files: Iterable<[string, number]>, copies: Map<string, Copy>): MirrorFileIndex {
  const byFolder = new Map<string, Array<[string, number]>>()
  const counts = new Map<string, FolderCount>()
  let total = 0
  let bytes = 0
  for (const file of files) {
    const folder = folderOf(file[0])
    let list = byFolder.get(folder)
    if (list === undefined) {
      list = []
      byFolder.set(folder, list)
      counts.set(folder, {folder, files: 0, bytes: 0})
    }
    list.push(file)
    const count = counts.get(folder)!
    count.files++
    count.bytes += file[1]
    total++
    bytes += file[1]
  }
  const folders = [...counts.values()].sort((a, b) => (a.folder < b.folder ? -1 : a.folder > b.folder ? 1 : 0))
  return {kind, files: total, bytes, folders, list: folderFiles((folder) => byPath(byFolder.get(folder) ?? [])), copies}
}

/** The copies at `paths` that `snapshot` still indexes, path and origin size. */
function copiesOf(snapshot: Snapshot, paths: Iterable<string>): Array<[string, number]> {
  const found: Array<[string, number]> = []
  for (const path of paths) {
    const entry = snapshot.files.get(path)
    if (entry !== undefined) found.push([path, entry.size])
  }
  return found
}

/**
 * The files `m` lacks in `snapshot` (see the module doc), counted per folder in one pass over
 * the file map's columns (../serve/snapshot/file-map.ts `tallyLacking`): a file's mirror set
 * is tested with one read of the set membership table, folders outside the base path are
 * skipped by index, globs by the bitset of the slots they keep (./carried-slots.ts), and the
 * stale and corrupt copies are taken off afterwards. A folder's files are found when it is
 * first listed, by a pass over the same columns.
 */
function missingOf(snapshot: Snapshot, m: SelectMirror, extra: MirrorExtra, scanGlobs: {include: string[]; exclude: string[]}, carriedSlots: CarriedSlots): MirrorFileIndex {
  const files = snapshot.files
  const counts = files.counts
  const lacks = files.lacking(m.id)
  const globs = globSet(scanGlobs, extra)
  const bits = globs === undefined ? undefined : carriedSlots.of(files, globs.include, globs.exclude)
  const carried = (slot: number): boolean => bits === undefined || ((bits[slot >>> 5] >>> slot) & 1) === 1
  const within = new Uint8Array(counts.size)
  for (let d = 0; d < within.length; d++) if (counts.nameOf(d).startsWith(m.basePath)) within[d] = 1
  const tally = files.tallyLacking(m.id, within, bits)
  const excluded = new Set<number>()
  for (const path of [...extra.stale.keys(), ...(snapshot.badCopies.get(m.id) ?? [])]) {
    const slot = files.slotOf(path)
    if (slot === undefined || excluded.has(slot) || !lacks(slot) || !carried(slot)) continue
    excluded.add(slot)
    const d = files.directoryAt(slot)
    if (within[d] === 0) continue
    tally.files[d]--
    tally.bytes[d] -= files.sizeAt(slot)
  }
  const {folders, total, bytes} = foldersOf(snapshot, tally)
  const list = folderFiles((folder) => {
    const prefix = folder === '' ? '' : `${folder}/`
    const d = counts.indexOf(prefix)
    if (d === undefined || within[d] === 0) return []
    const found: Array<[string, number]> = []
    for (const [path, slot] of files.filesLacking(d, m.id)) if (!excluded.has(slot) && carried(slot)) found.push([path, files.sizeAt(slot)])
    return byPath(found)
  })
  return {kind: 'missing', files: total, bytes, folders, list, copies: new Map()}
}

/**
 * The glob set of a mirror with its own globs `own` ({@link CarriedSlots}: the include lists,
 * the exclude globs), or undefined when no glob applies.
 */
function globSet(scanGlobs: {include: string[]; exclude: string[]}, own: {include: string[]; exclude: string[]}): {include: string[][]; exclude: string[]} | undefined {
  if (scanGlobs.include.length + scanGlobs.exclude.length + own.include.length + own.exclude.length === 0) return undefined
  return {include: [scanGlobs.include, own.include], exclude: [...scanGlobs.exclude, ...own.exclude]}
}

/** The folders with files in `tally` (by directory index), in path order, and the totals. */
function foldersOf(snapshot: Snapshot, tally: {files: Int32Array; bytes: Float64Array}): {folders: FolderCount[]; total: number; bytes: number} {
  const counts = snapshot.files.counts
  const folders: FolderCount[] = []
  let total = 0
  let bytes = 0
  for (const d of counts.inPathOrder()) {
    if (tally.files[d] === 0) continue
    folders.push({folder: counts.nameOf(d).slice(0, -1), files: tally.files[d], bytes: tally.bytes[d]})
    total += tally.files[d]
    bytes += tally.bytes[d]
  }
  return {folders, total, bytes}
}

/**
 * One `mb serve` process's view of what each mirror lacks, holds stale or corrupt (see the
 * module doc), over the current snapshot and the database (a read replica when there is one).
 */
export class MirrorFilesView {
  private readonly extras = new Map<number, {at: number; value: Promise<MirrorExtra>}>()
  private readonly indexes = new Map<string, {at: number; snapshot: Snapshot; mirrors: Snapshot['mirrors']; value: Promise<MirrorFileIndex>}>()
  private readonly carriedSlots = new CarriedSlots()

  /** @param scanGlobs  `scan.include` and `scan.exclude`, which bound what a mirror is meant to carry */
  constructor(
    private readonly database: Pick<Database, 'db'>,
    private readonly scanGlobs: {include: string[]; exclude: string[]},
  ) {}

  /**
   * Mirror `m`'s files of `kind` in `snapshot`, grouped per folder; computed once per
   * snapshot change, mirror and kind (see the module doc).
   * @throws what the database driver throws (nothing is kept then)
   */
  index(snapshot: Snapshot, m: SelectMirror, kind: FileKind): Promise<MirrorFileIndex> {
    const key = `${m.id}:${kind}`
    const now = Date.now()
    const cached = this.indexes.get(key)
    if (cached && cached.snapshot === snapshot && cached.mirrors === snapshot.mirrors && now - cached.at < INDEX_TTL_MS) return cached.value
    this.indexes.delete(key)
    if (this.indexes.size >= MAX_INDEXES) this.indexes.delete(this.indexes.keys().next().value!)
    const value = this.extra(m.id).then((extra) => {
      if (kind === 'missing') return missingOf(snapshot, m, extra, this.scanGlobs, this.carriedSlots)
      if (kind === 'stale') return grouped(kind, copiesOf(snapshot, extra.stale.keys()), extra.stale)
      return grouped(kind, copiesOf(snapshot, snapshot.badCopies.get(m.id) ?? []), new Map())
    })
    this.indexes.set(key, {at: now, snapshot, mirrors: snapshot.mirrors, value})
    value.catch(() => this.indexes.delete(key))
    return value
  }

  /**
   * Makes, in idle time, the bitset of the files that `scan.include`/`exclude` keep, which
   * the pages of mirrors without globs of their own share ({@link CarriedSlots.warm}), for
   * `keeper`'s snapshot now and after each full load (a new file map); without scan globs,
   * nothing.
   * @returns resolves when the bitset of the current snapshot is made (or its warm dropped); never rejects
   */
  warmAfterLoads(keeper: {current: Snapshot; onChange(fn: (snapshot: Snapshot) => void): void}): Promise<void> {
    const globs = globSet(this.scanGlobs, {include: [], exclude: []})
    if (globs === undefined) return Promise.resolve()
    let warmed: Snapshot['files'] | undefined
    const warm = (snapshot: Snapshot) => {
      if (snapshot.files === warmed) return Promise.resolve() // a refresh: its new slots are tested when a page asks
      warmed = snapshot.files
      return this.carriedSlots.warm(snapshot.files, globs.include, globs.exclude)
    }
    keeper.onChange((snapshot) => void warm(snapshot))
    return warm(keeper.current)
  }

  /**
   * Page `page` (1-based) of `size` files of `index` directly in `folder`, in path order, with
   * the origin's version of each (and, for `stale`, the mirror's copy) as `snapshot` has it.
   */
  folderPage(snapshot: Snapshot, index: MirrorFileIndex, folder: string, page: number, size: number): FolderPage {
    const list = index.list(folder)
    const files: MirrorFile[] = []
    for (const [path] of list.slice((page - 1) * size, page * size)) {
      const entry = snapshot.files.get(path)
      if (entry === undefined) continue // gone since the index was made
      const file: MirrorFile = {path, size: entry.size, mtime: unixIso(entry.mtime)}
      const copy = index.copies.get(path)
      if (copy !== undefined) {
        file.mirror_size = copy.size
        file.mirror_mtime = copy.mtime === null ? null : unixIso(copy.mtime)
      }
      files.push(file)
    }
    return {total: list.length, files}
  }

  /** Mirror `id`'s globs and stale copies, read at most every {@link EXTRA_TTL_MS}. */
  private extra(id: number): Promise<MirrorExtra> {
    const now = Date.now()
    const cached = this.extras.get(id)
    if (cached && now - cached.at < EXTRA_TTL_MS) return cached.value
    if (this.extras.size >= MAX_INDEXES * 4) this.extras.clear()
    const value = this.readExtra(id)
    this.extras.set(id, {at: now, value})
    value.catch(() => this.extras.delete(id))
    return value
  }

  private async readExtra(id: number): Promise<MirrorExtra> {
    const db = this.database.db
    const globs = await sql<{include_patterns: string[] | null; exclude_patterns: string[] | null}>`SELECT include_patterns, exclude_patterns FROM mirror WHERE id = ${id}`.execute(db)
    const rows = await sql<{path: string; size: string | number; mtime: string | number | null}>`SELECT f.path, s.size, s.mtime
      FROM mirror_file_stale s JOIN file f ON f.id = s.file_id WHERE s.mirror_id = ${id}::smallint`.execute(db)
    const stale = new Map<string, Copy>()
    for (const r of rows.rows) stale.set(r.path, {size: Number(r.size), mtime: r.mtime === null ? null : Number(r.mtime)})
    const row = globs.rows[0]
    return {include: row?.include_patterns ?? [], exclude: row?.exclude_patterns ?? [], stale}
  }
}
