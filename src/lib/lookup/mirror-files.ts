/**
 * What one mirror lacks, holds stale or holds corrupt (`mb mirror show NAME --files KIND`):
 * the question an admin asks after the overview's share. Per folder with counts, or the files
 * of one folder, paged.
 *
 * - `missing`: origin files the mirror is meant to carry (under its base path, through the
 *   `scan.include`/`exclude` and its own globs, as the scans on demand decide) whose mirror
 *   set lacks it, and that it holds neither stale nor corrupt;
 * - `stale`: copies its last scan saw with another size or mtime (`mirror_file_stale`);
 * - `bad`: copies a content check found corrupt at the file's current version
 *   (`mirror_file_bad`).
 */
import {type Kysely, type RawBuilder, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import {folderSql, inFolder, inSubtree} from '../db/sql.js'
import {pathFilter} from '../glob.js'
import {folderOf} from '../text.js'
import {unixIso} from '../time.js'

/** The kinds of file `--files` lists. */
export const FILE_KINDS = ['missing', 'stale', 'bad'] as const
export type FileKind = (typeof FILE_KINDS)[number]

/** The mirror fields the listing reads. */
export interface MirrorScope {
  id: number
  base_path: string
  include_patterns: string[]
  exclude_patterns: string[]
}

/** One file of a listing: the origin's version, and the mirror's where it differs. */
export interface MirrorFile {
  path: string
  /** The origin's size (bytes) and mtime (ISO 8601 UTC). */
  size: number
  mtime: string
  /** `stale`: the mirror's copy as its last scan saw it (mtime null when the listing had none). */
  mirror_size?: number
  mirror_mtime?: string | null
  /** `bad`: the 0-based piece that did not match, and when that was found. */
  piece?: number
  found_at?: string
}

/** The files of one kind per folder ('' = the top of the tree), folders in path order. */
export interface FolderCount {
  folder: string
  files: number
  bytes: number
}

interface Row {
  path: string
  size: string | number
  mtime: string | number
  mirror_size?: string | number
  mirror_mtime?: string | number | null
  piece?: number
  found_at?: Date | string
}

/** The globs of a listing: `scan.include` and `scan.exclude`. */
export interface ScanGlobs {
  include: string[]
  exclude: string[]
}

/** Rows read per query where globs filter in JS: what a listing holds at once, whatever its size. */
const READ_ROWS = 10_000

/** The listings' options: `readRows` (rows per query where globs filter in JS, ≥ 1) is there for tests. */
export interface ListingOptions {
  readRows?: number
}

/** The columns of a row of `kind`, and its FROM and WHERE (the file aliased `f`), `inside` ANDed in. */
function source(mirror: MirrorScope, kind: FileKind, inside: RawBuilder<boolean>): {columns: RawBuilder<unknown>; from: RawBuilder<unknown>} {
  if (kind === 'stale') {
    return {
      columns: sql`f.path, f.size, f.mtime, s.size AS mirror_size, s.mtime AS mirror_mtime`,
      from: sql`FROM mirror_file_stale s JOIN file f ON f.id = s.file_id WHERE s.mirror_id = ${mirror.id}::smallint AND ${inside}`,
    }
  }
  if (kind === 'bad') {
    return {
      columns: sql`f.path, f.size, f.mtime, b.piece, b.found_at`,
      from: sql`FROM mirror_file_bad b JOIN file f ON f.id = b.file_id AND f.size = b.size AND f.mtime = b.mtime
        WHERE b.mirror_id = ${mirror.id}::smallint AND ${inside}`,
    }
  }
  const base = mirror.base_path ? `${mirror.base_path.replace(/\/+$/, '')}/` : ''
  return {
    columns: sql`f.path, f.size, f.mtime`,
    from: sql`FROM file f
      WHERE NOT (${mirror.id}::smallint = ANY(f.mirrors)) AND starts_with(f.path, ${base}) AND ${inside}
        AND NOT EXISTS (SELECT 1 FROM mirror_file_stale s WHERE s.file_id = f.id AND s.mirror_id = ${mirror.id}::smallint)
        AND NOT EXISTS (SELECT 1 FROM mirror_file_bad b WHERE b.file_id = f.id AND b.mirror_id = ${mirror.id}::smallint)`,
  }
}

/**
 * The glob test of a listing: `missing` passes the files the mirror is meant to carry by
 * `scanGlobs` and its own globs; undefined when no glob applies (every row counts, so SQL
 * can count and page alone).
 */
function globTest(mirror: MirrorScope, kind: FileKind, scanGlobs: ScanGlobs): ((path: string) => boolean) | undefined {
  const include = mirror.include_patterns ?? []
  const exclude = mirror.exclude_patterns ?? []
  if (kind !== 'missing' || scanGlobs.include.length + scanGlobs.exclude.length + include.length + exclude.length === 0) return undefined
  return pathFilter([scanGlobs.include, include], [...scanGlobs.exclude, ...exclude])
}

/** Every row of `from`, in path order, `readRows` per query (keyset on the path), one query's rows at a time. */
async function* keysetRows(db: Kysely<DB>, {columns, from}: ReturnType<typeof source>, readRows: number): AsyncGenerator<Row[]> {
  let after: string | undefined
  for (;;) {
    const past = after === undefined ? sql<boolean>`true` : sql<boolean>`f.path > ${after}`
    const rows = (await sql<Row>`SELECT ${columns} ${from} AND ${past} ORDER BY f.path LIMIT ${readRows}`.execute(db)).rows
    if (rows.length > 0) yield rows
    if (rows.length < readRows) return
    after = rows[rows.length - 1]!.path
  }
}

/** A row as the listing shows it. */
function fileOf(r: Row): MirrorFile {
  const file: MirrorFile = {path: r.path, size: Number(r.size), mtime: unixIso(Number(r.mtime))}
  if (r.mirror_size !== undefined) file.mirror_size = Number(r.mirror_size)
  if (r.mirror_mtime !== undefined) file.mirror_mtime = r.mirror_mtime === null ? null : unixIso(Number(r.mirror_mtime))
  if (r.piece !== undefined) file.piece = Number(r.piece)
  if (r.found_at !== undefined) file.found_at = new Date(r.found_at).toISOString()
  return file
}

/**
 * The files of `kind` for `mirror`, counted per folder (folders in path order), with
 * `scanGlobs` applied to `missing`. Counted by SQL where no glob applies, else read
 * `options.readRows` rows at a time and folded, so what it holds is the counts.
 * @throws whatever the driver throws
 */
export async function mirrorFileFolders(db: Kysely<DB>, mirror: MirrorScope, kind: FileKind, scanGlobs: ScanGlobs, options: ListingOptions = {}): Promise<FolderCount[]> {
  const passes = globTest(mirror, kind, scanGlobs)
  const src = source(mirror, kind, sql<boolean>`true`)
  let folders: FolderCount[]
  if (passes === undefined) {
    const rows = (
      await sql<{folder: string; files: string | number; bytes: string | number}>`SELECT ${folderSql('f.path')} AS folder, count(*) AS files, sum(f.size) AS bytes ${src.from} GROUP BY 1`.execute(db)
    ).rows
    folders = rows.map((r) => ({folder: r.folder, files: Number(r.files), bytes: Number(r.bytes)}))
  } else {
    const counts = new Map<string, FolderCount>()
    for await (const rows of keysetRows(db, src, options.readRows ?? READ_ROWS)) {
      for (const r of rows) {
        if (!passes(r.path)) continue
        const folder = folderOf(r.path)
        const count = counts.get(folder) ?? {folder, files: 0, bytes: 0}
        count.files++
        count.bytes += Number(r.size)
        counts.set(folder, count)
      }
    }
    folders = [...counts.values()]
  }
  return folders.sort((a, b) => (a.folder < b.folder ? -1 : a.folder > b.folder ? 1 : 0))
}

/**
 * The files of `kind` for `mirror` directly in `folder` ('' = the top), page `page` (1-based)
 * of `size` files in path order, and how many there are in all. Paged by SQL where no glob
 * applies, else the folder is read `options.readRows` rows at a time, keeping the page's.
 * @throws whatever the driver throws
 */
export async function mirrorFilesIn(
  db: Kysely<DB>,
  mirror: MirrorScope,
  kind: FileKind,
  scanGlobs: ScanGlobs,
  folder: string,
  page: number,
  size: number,
  options: ListingOptions = {},
): Promise<{total: number; files: MirrorFile[]}> {
  const passes = globTest(mirror, kind, scanGlobs)
  const src = source(mirror, kind, inFolder(folder, 'f.path'))
  const first = (page - 1) * size
  if (passes === undefined) {
    const count = await sql<{n: string | number}>`SELECT count(*) AS n ${src.from}`.execute(db)
    const rows = (await sql<Row>`SELECT ${src.columns} ${src.from} ORDER BY f.path LIMIT ${size} OFFSET ${first}`.execute(db)).rows
    return {total: Number(count.rows[0]!.n), files: rows.map(fileOf)}
  }
  let total = 0
  const files: MirrorFile[] = []
  for await (const rows of keysetRows(db, src, options.readRows ?? READ_ROWS)) {
    for (const r of rows) {
      if (!passes(r.path)) continue
      if (total >= first && total < first + size) files.push(fileOf(r))
      total++
    }
  }
  return {total, files}
}

/**
 * Whether the index holds a file in `folder` or below it (origin-relative, no leading or
 * trailing slash; '' = the whole tree): whether `--folder` names a folder of the tree.
 * @throws whatever the driver throws
 */
export async function folderHoldsFiles(db: Kysely<DB>, folder: string): Promise<boolean> {
  const row = await sql<{one: number}>`SELECT 1 AS one FROM file WHERE ${inSubtree(folder)} LIMIT 1`.execute(db)
  return row.rows.length > 0
}
