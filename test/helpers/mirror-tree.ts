/**
 * One mirror tree for every scan end-to-end test (rsync, FTP, HTTP), so all listers are checked
 * against the same awkward content:
 *
 * - names with spaces, `#`, `+`, `%`, `:` and UTF-8 (files and directories), and under `odd/`
 *   leading/trailing spaces, quotes, `<&>`, `?`, `*[]`, `;` and a leading `-`;
 * - a symlinked directory (`linked-dir -> real dir`) and a symlink to a file
 *   (`link-to-file.bin -> real dir/target file.bin`), both relative so they work inside an FTP
 *   chroot too;
 * - an rsync `.~tmp~` directory (a transfer in progress) that every lister must skip;
 * - an empty directory;
 * - `bulkFiles` small files (10,000 by default) under `bulk/NN/`.
 *
 * `expectedFileSet(root)` is the truth the listers are compared with: a plain fs walk that
 * follows symlinks the way nginx, lighttpd and vsftpd serve them, and skips `.~tmp~`.
 */
import {mkdir, mkdtemp, readdir, realpath, rm, stat, symlink, utimes, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/** The mtime given to every generated file and directory: 2026-01-02T03:04:05Z (Unix seconds). */
export const MIRROR_TREE_MTIME = Date.UTC(2026, 0, 2, 3, 4, 5) / 1000

/** Paths (relative, '/'-separated) of the awkward names, each a regular file, with its size in bytes. */
const SPECIAL_FILES: Record<string, number> = {
  'README.txt': 42,
  'with space.txt': 11,
  'hash#name.txt': 12,
  'plus+name.txt': 13,
  'percent%41name.txt': 14,
  'percent%name.txt': 15,
  'colon:name.txt': 16,
  'ütf8-ñame-日本.txt': 17,
  'dir with space/inner file.txt': 18,
  'dir with space/sub#dir/deep+file.txt': 19,
  'a:b dir/x y.txt': 20,
  'ünï/ça va.txt': 21,
  'odd/ leading space.txt': 24,
  'odd/trailing space.txt ': 25,
  'odd/quote"s.txt': 26,
  "odd/apos'.txt": 27,
  'odd/<tag>&amp.txt': 28,
  'odd/q?mark.txt': 29,
  'odd/star*[x].txt': 30,
  'odd/semi;colon.txt': 31,
  'odd/-dash.txt': 32,
  'odd/ sp dir/x': 33,
  'real dir/target file.bin': 1536,
  'real dir/big.iso': 100_000,
  'real dir/nested/leaf.txt': 23,
  'sizes/zero.bin': 0,
  'sizes/one.bin': 1,
  'sizes/99.bin': 99,
  'sizes/972.bin': 972,
  'sizes/1023.bin': 1023,
  'sizes/1024.bin': 1024,
  'sizes/5000.bin': 5000,
  'sizes/1048576.bin': 1_048_576,
}

export interface MirrorTree {
  /** Absolute path of the tree's root directory (inside os.tmpdir()). */
  root: string
  /** Removes the tree. */
  cleanup(): Promise<void>
}

export interface MirrorTreeOptions {
  /** How many small files to put under bulk/ (default 10,000). */
  bulkFiles?: number
  /** Parent directory (default: a new directory under os.tmpdir()). */
  parent?: string
}

/**
 * Creates the shared mirror tree in a new temp directory. World-readable (0755/0644), so servers
 * that drop privileges can serve it. Takes about a second for 10,000 files.
 */
export async function createMirrorTree(options: MirrorTreeOptions = {}): Promise<MirrorTree> {
  const parent = options.parent ?? (await mkdtemp(join(tmpdir(), 'mb-tree-')))
  const root = join(parent, 'mirror')
  await mkdir(root, {recursive: true, mode: 0o755})
  const bulkFiles = options.bulkFiles ?? 10_000

  for (const [path, size] of Object.entries(SPECIAL_FILES)) {
    await writeSized(join(root, path), size)
  }
  // Symlinks, relative so they resolve inside an FTP chroot as well.
  await symlink('real dir', join(root, 'linked-dir'))
  await symlink('real dir/target file.bin', join(root, 'link-to-file.bin'))
  // rsync's temporary directory: a transfer in progress, never part of the mirror.
  await writeSized(join(root, 'real dir', '.~tmp~', 'partial.iso'), 77)
  await writeSized(join(root, '.~tmp~', 'other.partial'), 55)
  await mkdir(join(root, 'empty-dir'), {mode: 0o755})

  const perDir = 100
  for (let i = 0; i < bulkFiles; i++) {
    const dir = join(root, 'bulk', String(Math.floor(i / perDir)).padStart(3, '0'))
    if (i % perDir === 0) await mkdir(dir, {recursive: true, mode: 0o755})
    await writeFile(join(dir, `file-${String(i).padStart(5, '0')}.dat`), 'x'.repeat(i % 50), {mode: 0o644})
  }

  await setTimes(root)
  return {root, cleanup: () => rm(parent, {recursive: true, force: true})}
}

async function writeSized(file: string, size: number): Promise<void> {
  await mkdir(join(file, '..'), {recursive: true, mode: 0o755})
  await writeFile(file, Buffer.alloc(size, 0x61), {mode: 0o644})
}

async function setTimes(dir: string): Promise<void> {
  for (const entry of await readdir(dir, {withFileTypes: true})) {
    const p = join(dir, entry.name)
    if (entry.isSymbolicLink()) continue
    if (entry.isDirectory()) await setTimes(p)
    await utimes(p, MIRROR_TREE_MTIME, MIRROR_TREE_MTIME)
  }
  await utimes(dir, MIRROR_TREE_MTIME, MIRROR_TREE_MTIME)
}

/**
 * The file set a mirror serving `root` exposes: relative path -> size in bytes. Follows
 * symlinks (a symlinked directory's files appear under the link's path, a symlinked file has
 * the target's size), drops broken links and links that leave the tree, skips `.~tmp~`
 * directories, and stops at symlink loops.
 */
export async function expectedFileSet(root: string): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  const realRoot = await realpath(root)
  async function walk(dir: string, rel: string, ancestors: string[]): Promise<void> {
    for (const entry of await readdir(dir, {withFileTypes: true})) {
      if (entry.name === '.~tmp~') continue
      const abs = join(dir, entry.name)
      const relPath = rel === '' ? entry.name : `${rel}/${entry.name}`
      let real: string
      try {
        real = await realpath(abs)
      } catch {
        continue // broken link
      }
      if (real !== realRoot && !real.startsWith(realRoot + '/')) continue
      const st = await stat(real)
      if (st.isDirectory()) {
        if (ancestors.includes(real)) continue // symlink loop
        await walk(abs, relPath, [...ancestors, real])
      } else if (st.isFile()) {
        out.set(relPath, st.size)
      }
    }
  }
  await walk(root, '', [realRoot])
  return out
}
