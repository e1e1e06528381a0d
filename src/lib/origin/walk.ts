/**
 * Walks the origin (master) tree.
 *
 * Symlinks are recorded, not followed (MirrorBrain's "canonicalize filename, resolving
 * symlinks in the path"): a link whose target lies inside the root is reported once through
 * `onLink` with its target's canonical path (every symlink in it resolved), and the target is
 * walked under its own path like any other file or directory. Mirrors copy a tree with its
 * links (`rsync -a`), so the target's path is the one they are scanned and redirected at.
 * A symlink that points outside the root, dangles, loops (ELOOP), or points at a directory
 * containing itself is skipped with a warning and never followed. Sockets, FIFOs and devices
 * are ignored.
 */
import type {Dir, Stats} from 'node:fs'
import {opendir, realpath, stat} from 'node:fs/promises'
import {dirname, join, relative, sep} from 'node:path'
import {UsageError} from '../errors.js'
import {rootNotDirectory} from './root.js'
import {trimSlashes} from '../text.js'

/** One regular file of the origin tree. */
export interface OriginFile {
  /** Relative to the root, '/'-separated, no leading '/'. */
  path: string
  /** Bytes. */
  size: number
  /** Unix seconds (UTC), truncated. */
  mtime: number
}

/** A symbolic link of the origin tree whose target lies inside the root. */
export interface OriginLink {
  /** The link's path, relative to the root, '/'-separated, no leading '/'. */
  path: string
  /** The target's canonical path relative to the root (every symlink in it resolved). */
  target: string
  /** The target is a directory. */
  directory: boolean
}

export interface WalkOptions {
  /** Called for every symlink whose target lies inside the root (the walk does not follow it). */
  onLink?: (link: OriginLink) => void
  /** Called for every skipped entry (symlink escaping the root, dangling link, loop, unreadable dir). */
  onWarning?: (message: string) => void
  /** Called with the relative path of every directory that could not be read (its files are unknown, not gone). */
  onUnreadableDir?: (path: string) => void
  /** Walk only this subtree (relative to the root). */
  subdir?: string
  /** Parallel stat() calls per directory (default 64). */
  concurrency?: number
}

function isInside(rootReal: string, target: string): boolean {
  return target === rootReal || target.startsWith(rootReal.endsWith(sep) ? rootReal : rootReal + sep)
}

/** A directory to walk: its path relative to the root, its real path, and the real paths of its ancestors (loop detection). */
interface WalkDir {
  rel: string
  real: string
  ancestors: Set<string>
}

/** A directory entry as `opendir` reports it. */
interface DirEntry {
  name: string
  kind: 'file' | 'dir' | 'link' | 'other'
}

/**
 * Yields every regular file under `root` (see the module notes for symlinks), depth first,
 * in directory order.
 *
 * @param root  the origin directory (absolute or relative to the cwd)
 * @throws UsageError (exit 2, code ROOT_INVALID) when the root (or `subdir`) does not exist or is not a directory
 */
export async function* walkOrigin(root: string, options: WalkOptions = {}): AsyncGenerator<OriginFile> {
  const warn = options.onWarning ?? (() => {})
  const concurrency = options.concurrency ?? 64
  const {rootReal, start} = await resolveStart(root, options.subdir)
  const stack: WalkDir[] = [start]
  while (stack.length > 0) {
    const dir = stack.pop()!
    let handle: Dir
    try {
      handle = await opendir(dir.real)
    } catch (error) {
      warn(`skipped directory ${dir.rel || '.'}: ${(error as Error).message}`)
      options.onUnreadableDir?.(dir.rel)
      continue
    }
    const names: DirEntry[] = []
    for await (const dirent of handle) {
      names.push({name: dirent.name, kind: dirent.isFile() ? 'file' : dirent.isDirectory() ? 'dir' : dirent.isSymbolicLink() ? 'link' : 'other'})
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    const subdirs: WalkDir[] = []
    for (let i = 0; i < names.length; i += concurrency) {
      const chunk = names.slice(i, i + concurrency)
      const results = await Promise.all(chunk.map((entry) => resolveEntry(entry, dir, rootReal, warn)))
      for (const result of results) {
        if (result === null) continue
        if ('dir' in result) subdirs.push(result.dir)
        else if ('target' in result) options.onLink?.(result)
        else yield result
      }
    }
    // Push in reverse so that directories are visited in name order.
    for (let i = subdirs.length - 1; i >= 0; i--) stack.push(subdirs[i])
  }
}

/**
 * The root's real path and the first directory to walk (the root, or `subdir` inside it).
 * @throws UsageError (ROOT_INVALID) when either is not a directory, or `subdir` leaves the root
 */
async function resolveStart(root: string, subdir: string | undefined): Promise<{rootReal: string; start: WalkDir}> {
  let rootReal: string
  try {
    rootReal = await realpath(root)
    if (!(await stat(rootReal)).isDirectory()) throw new Error('not a directory')
  } catch (error) {
    throw rootNotDirectory(root, (error as Error).message)
  }
  const start = trimSlashes(subdir ?? '')
  let startReal = rootReal
  if (start) {
    try {
      startReal = await realpath(join(rootReal, start))
      if (!isInside(rootReal, startReal) || !(await stat(startReal)).isDirectory()) throw new Error('not a directory inside the root')
    } catch (error) {
      throw new UsageError(`${start} is not a directory inside the origin root ${rootReal} (${(error as Error).message}).`, 'ROOT_INVALID')
    }
  }
  const startAncestors = new Set([startReal])
  for (let p = startReal; p !== rootReal && isInside(rootReal, p); p = dirname(p)) startAncestors.add(dirname(p))
  return {rootReal, start: {rel: start, real: startReal, ancestors: startAncestors}}
}

/**
 * What one entry of `dir` is: a file to yield, a directory to walk, a link to record, or null
 * when it is skipped (with a warning for a dangling, escaping or looping symlink, or a failed
 * stat).
 */
async function resolveEntry(entry: DirEntry, dir: WalkDir, rootReal: string, warn: (message: string) => void): Promise<OriginFile | OriginLink | {dir: WalkDir} | null> {
  const rel = dir.rel ? `${dir.rel}/${entry.name}` : entry.name
  const full = join(dir.real, entry.name)
  if (entry.kind === 'other') return null
  if (entry.kind === 'dir') return {dir: {rel, real: full, ancestors: new Set([...dir.ancestors, full])}}
  if (entry.kind === 'link') return resolveLink(rel, full, rootReal, warn)
  let st: Stats
  try {
    st = await stat(full)
  } catch (error) {
    warn(`skipped ${rel}: ${(error as Error).message}`)
    return null
  }
  if (!st.isFile()) return null
  return {path: rel, size: st.size, mtime: Math.floor(st.mtimeMs / 1000)}
}

/** The link at `rel` (`full` on disk) with its canonical target, or null (with a warning) when it must never be followed. */
async function resolveLink(rel: string, full: string, rootReal: string, warn: (message: string) => void): Promise<OriginLink | null> {
  let real: string
  try {
    real = await realpath(full)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    warn(`skipped symlink ${rel}: ${code === 'ENOENT' ? 'its target does not exist' : code === 'ELOOP' ? 'it loops (too many levels of symbolic links)' : (error as Error).message}`)
    return null
  }
  if (!isInside(rootReal, real)) {
    warn(`skipped symlink ${rel}: it points outside the root (${real})`)
    return null
  }
  let st: Stats
  try {
    st = await stat(real)
  } catch (error) {
    warn(`skipped symlink ${rel}: ${(error as Error).message}`)
    return null
  }
  if (!st.isFile() && !st.isDirectory()) return null
  const target = relative(rootReal, real).split(sep).join('/')
  if (st.isDirectory() && (target === '' || rel.startsWith(`${target}/`))) {
    warn(`skipped symlink ${rel}: it loops back to ${target || '.'}`)
    return null
  }
  return {path: rel, target, directory: st.isDirectory()}
}
