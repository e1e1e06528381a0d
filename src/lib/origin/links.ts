/**
 * The origin's symbolic links (`file_link`, migration 0012): kept in step with the tree by
 * `mb index`, and resolved for a request path the way MirrorBrain canonicalizes a file name
 * ("resolving symlinks in the path"), so that `latest/jenkins.war` is served by the mirrors
 * holding `2.249.1/jenkins.war`, at that path.
 *
 * Only links whose target lies inside the root are stored, each with its target's canonical
 * path; one that leaves the root, dangles or loops is never stored and so never followed.
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import {inSubtree} from '../db/sql.js'
import type {OriginLink} from './walk.js'

/** Most links followed while resolving one path (Linux's MAXSYMLINKS is 40). */
const MAX_HOPS = 40

/** A stored link, as the resolver reads it: the target's canonical path, and whether it is a directory. */
export interface LinkTarget {
  target: string
  directory: boolean
}

/**
 * The canonical path of `path` (relative to the root, no leading or trailing '/') through the
 * links of `links` (link path → target): each leading component that is a link is replaced by
 * its target, left to right, as the kernel resolves a path. A file link only matches the
 * whole path.
 * @returns the resolved path, or undefined when no link lies on `path`, a file link is used as
 *          a directory, or more than 40 links were followed (a loop)
 */
export function resolveLinks(links: ReadonlyMap<string, LinkTarget>, path: string): string | undefined {
  let p = path
  let hops = 0
  let from = 0
  for (;;) {
    const slash = p.indexOf('/', from)
    const link = links.get(slash < 0 ? p : p.slice(0, slash))
    if (link !== undefined) {
      if (++hops > MAX_HOPS || (slash >= 0 && !link.directory)) return undefined
      const rest = slash < 0 ? '' : p.slice(slash + 1)
      p = link.target === '' ? rest : rest === '' ? link.target : `${link.target}/${rest}`
      // Stored targets are canonical, but the search starts over: a table that breaks that
      // rule (a loop) ends at the hop limit instead of at a wrong path.
      from = 0
      continue
    }
    if (slash < 0) return hops > 0 ? p : undefined
    from = slash + 1
  }
}

/**
 * Brings `file_link` in the subtree `subdir` ('' = all) in step with the links a walk found:
 * new and changed links are written, links gone from the tree removed, except under
 * directories the walk could not read (their links are unknown, not gone).
 * @param db  a transaction (the caller's index transaction)
 * @returns how many rows were written and removed
 */
export async function replaceLinks(db: Kysely<DB>, subdir: string, links: OriginLink[], unreadable: string[]): Promise<{written: number; removed: number}> {
  const paths = links.map((l) => l.path)
  let written = 0
  if (links.length > 0) {
    const result = await sql`
      INSERT INTO file_link (path, target, directory)
      SELECT * FROM unnest(${paths}::text[], ${links.map((l) => l.target)}::text[], ${links.map((l) => l.directory)}::boolean[])
      ON CONFLICT (path) DO UPDATE SET target = excluded.target, directory = excluded.directory, indexed_at = now()
        WHERE file_link.target <> excluded.target OR file_link.directory <> excluded.directory`.execute(db)
    written = Number(result.numAffectedRows ?? 0)
  }
  const stored = await sql<{path: string}>`SELECT path FROM file_link WHERE ${inSubtree(subdir)}`.execute(db)
  const found = new Set(paths)
  const gone = stored.rows.map((r) => r.path).filter((p) => !found.has(p) && !unreadable.some((dir) => dir === '' || p.startsWith(`${dir}/`)))
  let removed = 0
  if (gone.length > 0) removed = Number((await sql`DELETE FROM file_link WHERE path = ANY(${gone}::text[])`.execute(db)).numAffectedRows ?? 0)
  return {written, removed}
}

/**
 * Every stored link (for a command resolving one path, such as `mb file lookup`).
 * @throws whatever the database driver throws
 */
/**
 * Whether root-relative `path` lies under a directory symlink of the origin (`latest/a.iso`
 * with `latest -> 16.0`): a listing that follows links (HTTP, FTP) shows such a file a second
 * time, under the link's path, though it is the target's file.
 */
export function underDirectoryLink(links: ReadonlyMap<string, LinkTarget>, path: string): boolean {
  for (let i = path.indexOf('/'); i > 0; i = path.indexOf('/', i + 1)) if (links.get(path.slice(0, i))?.directory) return true
  return false
}

export async function readLinks(db: Kysely<DB>): Promise<Map<string, LinkTarget>> {
  const rows = await db.selectFrom('file_link').select(['path', 'target', 'directory']).execute()
  return new Map(rows.map((r) => [r.path, {target: r.target, directory: r.directory}]))
}
