/**
 * When the index, the disk and the stored hashes describe the same version of a file.
 *
 * A version is a size in bytes and an mtime in Unix seconds (UTC, truncated), as the `file` row
 * holds them. Hashes describe the bytes that had `hashed_size` bytes and `hashed_mtime` when
 * they were read; they may be served only while they describe the row's current version
 * ({@link hashesMatchVersion}) and, where the disk is checked, the file on disk still has that
 * version ({@link diskMatches}). These predicates, and their SQL forms, are the only place the
 * rule is written.
 */
import {sql, type RawBuilder} from 'kysely'

/** One version of a file: size in bytes, mtime in Unix seconds. */
export interface FileVersion {
  size: number
  mtime: number
}

/** The version the stored hashes were read from (null: never hashed). Bigints may arrive as strings. */
export interface HashedVersion {
  hashed_size: number | string | null
  hashed_mtime: number | string | null
}

/** The three whole-file digests (null when not computed). */
export interface Digests {
  md5: string | null
  sha1: string | null
  sha256: string | null
}

/** Unix seconds (UTC) of a stat's mtime, the unit the index uses. */
export function mtimeSeconds(st: {mtimeMs: number}): number {
  return Math.floor(st.mtimeMs / 1000)
}

/** True when `a` and `b` are the same version (equal size and mtime). */
export function sameVersion(a: FileVersion, b: FileVersion): boolean {
  return a.size === b.size && a.mtime === b.mtime
}

/** True when a stat of the file on disk (undefined/null: gone) shows the version `file`. */
function diskMatches(st: {size: number; mtimeMs: number} | null | undefined, file: FileVersion): boolean {
  return st !== null && st !== undefined && st.size === file.size && mtimeSeconds(st) === file.mtime
}

/** True when the stored hashes were read from `version` (`hashed_size`/`hashed_mtime` equal its size/mtime). */
export function hashesMatchVersion(row: HashedVersion, version: FileVersion): boolean {
  return row.hashed_size !== null && row.hashed_mtime !== null && Number(row.hashed_size) === Number(version.size) && Number(row.hashed_mtime) === Number(version.mtime)
}

/** True when all three whole-file digests are present. */
export function hasDigests(row: Digests): boolean {
  return Boolean(row.md5 && row.sha1 && row.sha256)
}

/**
 * True when the stored hashes describe the file as the index and the disk know it now: all
 * three digests present, read from the row's version ({@link hashesMatchVersion}), and, when
 * `onDisk` (a stat of the origin file) is given, the disk has that version too.
 */
export function hashesFresh(row: (Digests & HashedVersion & FileVersion) | null | undefined, onDisk?: {size: number; mtimeMs: number} | null): boolean {
  if (!row || !hasDigests(row)) return false
  if (!hashesMatchVersion(row, {size: Number(row.size), mtime: Number(row.mtime)})) return false
  return !onDisk || diskMatches(onDisk, {size: Number(row.size), mtime: Number(row.mtime)})
}

/** {@link hashesMatchVersion} as SQL text on the `file` row, for hand-written statements. */
export const HASHES_MATCH_VERSION_SQL = 'hashed_size = size AND hashed_mtime = mtime'

/** SQL on the `file` row: the hashes are missing or were read from another version. */
export function hashesOutdatedSql(): RawBuilder<boolean> {
  return sql<boolean>`(sha256 IS NULL OR hashed_size IS DISTINCT FROM size OR hashed_mtime IS DISTINCT FROM mtime)`
}
