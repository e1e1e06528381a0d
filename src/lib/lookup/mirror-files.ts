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
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import {inFolder} from '../db/sql.js'
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

/**
 * Every file of `kind` for `mirror`, in path order, with `scanGlobs` (`scan.include`,
 * `scan.exclude`) applied to `missing`; only those directly in `folder` when it is given.
 */
async function filesOf(db: Kysely<DB>, mirror: MirrorScope, kind: FileKind, scanGlobs: {include: string[]; exclude: string[]}, folder?: string): Promise<MirrorFile[]> {
  const inside = folder === undefined ? sql<boolean>`true` : inFolder(folder, 'f.path')
  let rows: Row[]
  if (kind === 'stale') {
    rows = (
      await sql<Row>`SELECT f.path, f.size, f.mtime, s.size AS mirror_size, s.mtime AS mirror_mtime
        FROM mirror_file_stale s JOIN file f ON f.id = s.file_id WHERE s.mirror_id = ${mirror.id}::smallint AND ${inside} ORDER BY f.path`.execute(db)
    ).rows
  } else if (kind === 'bad') {
    rows = (
      await sql<Row>`SELECT f.path, f.size, f.mtime, b.piece, b.found_at
        FROM mirror_file_bad b JOIN file f ON f.id = b.file_id AND f.size = b.size AND f.mtime = b.mtime
        WHERE b.mirror_id = ${mirror.id}::smallint AND ${inside} ORDER BY f.path`.execute(db)
    ).rows
  } else {
    const base = mirror.base_path ? `${mirror.base_path.replace(/\/+$/, '')}/` : ''
    rows = (
      await sql<Row>`SELECT f.path, f.size, f.mtime FROM file f
        WHERE NOT (${mirror.id}::smallint = ANY(f.mirrors)) AND starts_with(f.path, ${base}) AND ${inside}
          AND NOT EXISTS (SELECT 1 FROM mirror_file_stale s WHERE s.file_id = f.id AND s.mirror_id = ${mirror.id}::smallint)
          AND NOT EXISTS (SELECT 1 FROM mirror_file_bad b WHERE b.file_id = f.id AND b.mirror_id = ${mirror.id}::smallint)
        ORDER BY f.path`.execute(db)
    ).rows
    const carried = pathFilter([scanGlobs.include, mirror.include_patterns ?? []], [...scanGlobs.exclude, ...(mirror.exclude_patterns ?? [])])
    rows = rows.filter((r) => carried(r.path))
  }
  return rows.map((r) => {
    const file: MirrorFile = {path: r.path, size: Number(r.size), mtime: unixIso(Number(r.mtime))}
    if (r.mirror_size !== undefined) file.mirror_size = Number(r.mirror_size)
    if (r.mirror_mtime !== undefined) file.mirror_mtime = r.mirror_mtime === null ? null : unixIso(Number(r.mirror_mtime))
    if (r.piece !== undefined) file.piece = Number(r.piece)
    if (r.found_at !== undefined) file.found_at = new Date(r.found_at).toISOString()
    return file
  })
}

/**
 * The files of `kind` for `mirror`, counted per folder (folders in path order).
 * @throws whatever the driver throws
 */
export async function mirrorFileFolders(db: Kysely<DB>, mirror: MirrorScope, kind: FileKind, scanGlobs: {include: string[]; exclude: string[]}): Promise<FolderCount[]> {
  const folders = new Map<string, FolderCount>()
  for (const file of await filesOf(db, mirror, kind, scanGlobs)) {
    const folder = folderOf(file.path)
    const count = folders.get(folder) ?? {folder, files: 0, bytes: 0}
    count.files++
    count.bytes += file.size
    folders.set(folder, count)
  }
  return [...folders.values()].sort((a, b) => (a.folder < b.folder ? -1 : a.folder > b.folder ? 1 : 0))
}

/**
 * The files of `kind` for `mirror` directly in `folder` ('' = the top), page `page` (1-based)
 * of `size` files, and how many there are in all.
 */
export async function mirrorFilesIn(
  db: Kysely<DB>,
  mirror: MirrorScope,
  kind: FileKind,
  scanGlobs: {include: string[]; exclude: string[]},
  folder: string,
  page: number,
  size: number,
): Promise<{total: number; files: MirrorFile[]}> {
  const all = await filesOf(db, mirror, kind, scanGlobs, folder)
  return {total: all.length, files: all.slice((page - 1) * size, page * size)}
}
