/**
 * The history of a package repository's `repodata/repomd.xml` (createrepo's index of a dnf/yum
 * repository), kept in `repomd_history` (migration 0015) so that a metalink can list the
 * versions mirrors may still serve (MirrorManager's `mm0:alternates`).
 *
 * `mb index` records a version when it finds a repomd.xml added or changed, and marks the
 * version it replaces with the time and the mirrors that held it (`mb serve --watch` does
 * the same when it sees the file change on disk). What a version records is what
 * MirrorManager's `make_file_details` does: size, MD5, SHA-1, SHA-256, SHA-512 and the
 * repository's own timestamp.
 */
import {createHash} from 'node:crypto'
import {readFile} from 'node:fs/promises'
import {sep} from 'node:path'
import {type Kysely, sql} from 'kysely'
import {create} from 'xmlbuilder2'
import type {DB} from '../db/schema.js'

/** The file name a dnf/yum repository's index has, in its `repodata/` directory. */
const REPOMD_SUFFIX = 'repodata/repomd.xml'

/** True for the origin path (relative, '/'-separated) of a repository index `…/repodata/repomd.xml`. */
export function isRepomdPath(path: string): boolean {
  return path.endsWith(REPOMD_SUFFIX) && (path.length === REPOMD_SUFFIX.length || path.charCodeAt(path.length - REPOMD_SUFFIX.length - 1) === 47)
}

/** One version of a repomd.xml. Size in bytes; timestamps in Unix seconds (UTC); hashes lower-case hex. */
export interface RepomdVersion {
  size: number
  /** The repository's own timestamp ({@link repomdTimestamp}). */
  timestamp: number
  md5: string
  sha1: string
  sha256: string
  sha512: string
}

function asArray(value: unknown): unknown[] {
  if (value === undefined || value === null) return []
  return Array.isArray(value) ? value : [value]
}

function integerText(value: unknown): number | undefined {
  const text = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)['#'] : value
  if (typeof text !== 'string' && typeof text !== 'number') return undefined
  const n = Number(String(text).trim())
  return Number.isSafeInteger(n) && n > 0 ? n : undefined
}

/**
 * The repository's timestamp as MirrorManager computes it (`set_repomd_timestamp` in
 * mirrormanager2/lib/umdl.py): the largest `<data><timestamp>` of the repomd.xml; else its
 * `<revision>` when that is a number; else `fallback` (the file's mtime). Unix seconds.
 */
export function repomdTimestamp(text: string, fallback: number): number {
  let root: Record<string, unknown> | undefined
  try {
    const doc = create(text).end({format: 'object'}) as Record<string, unknown>
    root = doc.repomd as Record<string, unknown> | undefined
  } catch {
    return fallback
  }
  if (!root || typeof root !== 'object') return fallback
  let newest = 0
  for (const data of asArray(root.data)) {
    const t = typeof data === 'object' && data !== null ? integerText((data as Record<string, unknown>).timestamp) : undefined
    if (t !== undefined && t > newest) newest = t
  }
  return newest > 0 ? newest : (integerText(root.revision) ?? fallback)
}

/** The {@link RepomdVersion} of repomd.xml bytes (`mtime`, Unix seconds, is the timestamp's fallback). */
export function repomdVersion(bytes: Buffer, mtime: number): RepomdVersion {
  const hex = (algorithm: string) => createHash(algorithm).update(bytes).digest('hex')
  return {size: bytes.length, timestamp: repomdTimestamp(bytes.toString('utf8'), mtime), md5: hex('md5'), sha1: hex('sha1'), sha256: hex('sha256'), sha512: hex('sha512')}
}

/** A repomd.xml that an index run or the watcher found added or changed. */
export interface RepomdChange {
  /** Origin-relative path. */
  path: string
  /** Unix seconds (UTC) of the new version on disk. */
  mtime: number
  /** Mirror ids that held the version it replaces (empty when it is new, or nothing held it). */
  previousMirrors: readonly number[]
}

/**
 * Records the versions of changed repomd.xml files: reads each from under `root`, inserts
 * it as the current version of its path (or makes an earlier row of the same content
 * current again), and marks the version it replaces `replaced_at = now()` with the mirrors
 * that held it. A file that cannot be read any more is skipped (the next run records it).
 * Runs on `db`, which may be the index's transaction.
 * @returns the number of versions recorded
 */
export async function recordRepomdChanges(db: Kysely<DB>, root: string, changes: readonly RepomdChange[]): Promise<number> {
  let recorded = 0
  for (const change of changes) {
    let bytes: Buffer
    try {
      bytes = await readFile(root + sep + change.path)
    } catch {
      continue
    }
    const v = repomdVersion(bytes, change.mtime)
    const mirrors = `{${change.previousMirrors.join(',')}}`
    await sql`UPDATE repomd_history SET replaced_at = now(), mirrors = ${mirrors}::smallint[]
      WHERE path = ${change.path} AND replaced_at IS NULL AND sha256 <> ${v.sha256}`.execute(db)
    await sql`INSERT INTO repomd_history (path, sha256, size, mtime, repo_timestamp, md5, sha1, sha512)
      VALUES (${change.path}, ${v.sha256}, ${v.size}, ${change.mtime}, ${v.timestamp}, ${v.md5}, ${v.sha1}, ${v.sha512})
      ON CONFLICT (path, sha256) DO UPDATE SET replaced_at = NULL, mtime = excluded.mtime`.execute(db)
    recorded++
  }
  return recorded
}

/** An earlier version of a repomd.xml still inside the alternates window, with the mirrors that held it. */
export interface RepomdAlternate extends RepomdVersion {
  mirrors: number[]
}

/**
 * The versions of the repomd.xml at `path` replaced less than `days` days ago, other than
 * `currentSha256`, newest repository timestamp first (MirrorManager's order).
 * @throws whatever the database driver throws
 */
export async function readRepomdAlternates(db: Kysely<DB>, path: string, currentSha256: string, days: number): Promise<RepomdAlternate[]> {
  const rows = await sql<{size: string | number; repo_timestamp: string | number; md5: string; sha1: string; sha256: string; sha512: string; mirrors: string}>`
    SELECT size, repo_timestamp, md5, sha1, sha256, sha512, array_to_string(mirrors, ',') AS mirrors FROM repomd_history
    WHERE path = ${path} AND sha256 <> ${currentSha256} AND replaced_at IS NOT NULL AND replaced_at > now() - make_interval(secs => ${days * 86_400})
    ORDER BY repo_timestamp DESC, replaced_at DESC`.execute(db)
  return rows.rows.map((r) => ({
    size: Number(r.size),
    timestamp: Number(r.repo_timestamp),
    md5: r.md5,
    sha1: r.sha1,
    sha256: r.sha256,
    sha512: r.sha512,
    mirrors: r.mirrors ? r.mirrors.split(',').map(Number) : [],
  }))
}
