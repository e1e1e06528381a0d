/**
 * The embedded store's data directory on disk: whether a store exists there, creating one only
 * when asked, and keeping it private. The directory is 0700 and everything in it 0600/0700
 * whatever the umask; with a configured socket group, the directory is 0710 (the group may
 * reach the socket, not list or read anything), the socket 0660 and the locks directory 2770,
 * all of that group, like PostgreSQL's `unix_socket_group` and `unix_socket_permissions`.
 *
 * PGlite's file system (emscripten NODEFS) creates every file and then chmods it to the mode
 * the C code asked for, which is 0666 for nearly all of them, and emscripten has no umask: the
 * process umask cannot keep them private. So, for paths inside a protected data directory,
 * this module masks the group and other bits off the modes given to `fs.chmodSync`,
 * `fs.mkdirSync`, `fs.openSync` and `fs.writeFileSync` in the thread that runs PGlite
 * ({@link protectDataDir} must be called in that thread), and on opening a store it takes
 * those bits off whatever is already there (stores made by an older mb, or copied).
 */
import {spawnSync} from 'node:child_process'
import fs from 'node:fs'
import {join, sep} from 'node:path'
import {MbError, UsageError} from '../errors.js'
import {LOCKS_DIR} from './embedded-locks.js'

/** The file PostgreSQL's initdb writes first; a data directory without it holds no store. */
const STORE_MARKER = 'PG_VERSION'

const original = {chmodSync: fs.chmodSync, chownSync: fs.chownSync, mkdirSync: fs.mkdirSync, openSync: fs.openSync, writeFileSync: fs.writeFileSync}

/** Data directories (with a trailing separator) whose new files this thread keeps private. */
const protectedDirs = new Set<string>()

/** Whether `path` lies in a protected data directory. */
function isProtected(path: unknown): boolean {
  if (typeof path !== 'string') return false
  for (const dir of protectedDirs) if (path.startsWith(dir) || `${path}${sep}` === dir) return true
  return false
}

/** `mode` without group and other bits (the file type bits are kept). */
const clamp = (mode: number) => mode & ~0o077

/** Installs the mode masks on this thread's `node:fs` once; see the module comment. */
function installMasks(): void {
  if (fs.chmodSync !== original.chmodSync) return
  fs.chmodSync = ((path: fs.PathLike, mode: fs.Mode) => original.chmodSync(path, isProtected(path) && typeof mode === 'number' ? clamp(mode) : mode)) as typeof fs.chmodSync
  fs.mkdirSync = ((path: fs.PathLike, options?: fs.Mode | fs.MakeDirectoryOptions | null) => {
    if (!isProtected(path)) return original.mkdirSync(path, options as fs.MakeDirectoryOptions)
    if (typeof options === 'number') return original.mkdirSync(path, clamp(options))
    const mode = typeof options === 'object' && options && typeof options.mode === 'number' ? clamp(options.mode) : 0o700
    return original.mkdirSync(path, {...(typeof options === 'object' ? options : {}), mode} as fs.MakeDirectoryOptions)
  }) as typeof fs.mkdirSync
  fs.openSync = ((path: fs.PathLike, flags?: fs.OpenMode, mode?: fs.Mode | null) =>
    original.openSync(path, flags ?? 'r', isProtected(path) ? (typeof mode === 'number' ? clamp(mode) : 0o600) : mode)) as typeof fs.openSync
  fs.writeFileSync = ((path: fs.PathOrFileDescriptor, data: string | NodeJS.ArrayBufferView, options?: fs.WriteFileOptions) => {
    if (!isProtected(path)) return original.writeFileSync(path, data, options)
    const given = typeof options === 'object' && options !== null ? options : typeof options === 'string' ? {encoding: options} : {}
    return original.writeFileSync(path, data, {...given, mode: typeof given.mode === 'number' ? clamp(given.mode) : 0o600})
  }) as typeof fs.writeFileSync
}

/** Takes group and other bits off everything under `dir` (not the sockets, set by their owner). */
function sweep(dir: string): void {
  for (const entry of fs.readdirSync(dir, {withFileTypes: true})) {
    const path = join(dir, entry.name)
    if (entry.isSymbolicLink() || entry.isSocket()) continue
    const mode = fs.lstatSync(path).mode & 0o7777
    if (mode & 0o077) original.chmodSync(path, clamp(mode))
    if (entry.isDirectory()) sweep(path)
  }
}

/**
 * The numeric gid of group `group` (a name, looked up through NSS with `getent group`, or a
 * number).
 * @throws UsageError CONFIG_INVALID when no such group exists
 */
export function groupId(group: string): number {
  if (/^\d+$/.test(group)) return Number(group)
  const found = spawnSync('getent', ['group', group], {encoding: 'utf8'})
  const gid = found.status === 0 ? Number(found.stdout.split(':')[2]) : Number.NaN
  if (!Number.isInteger(gid)) throw new UsageError(`Invalid setting socket_group: there is no group ${group} on this system. Give an existing group name or gid, or unset it.`, 'CONFIG_INVALID')
  return gid
}

/** The login name of `uid` (NSS, `getent passwd`), or `uid N` when it has none. */
function userName(uid: number): string {
  const found = spawnSync('getent', ['passwd', String(uid)], {encoding: 'utf8'})
  const name = found.status === 0 ? found.stdout.split(':')[0] : ''
  return name || `uid ${uid}`
}

/**
 * Refuses to open the store in `dataDir` as a user other than the directory's owner. PGlite
 * writes files as the process's user: a command run as root on a service's store would leave
 * root-owned files that the service can then no longer open. Processes that only reach the
 * store through its owner's shared socket are not affected (they open no file of it).
 * @throws MbError STORE_OWNER naming the owner and the command to run as it
 */
export function checkStoreOwner(dataDir: string): void {
  const uid = process.getuid?.()
  if (uid === undefined) return
  const owner = fs.statSync(dataDir).uid
  if (owner === uid) return
  const name = userName(owner)
  const runAs = name.startsWith('uid ') ? `setpriv --reuid ${owner} --regid ${owner} --clear-groups -- mb …` : `runuser -u ${name} -- mb …`
  throw new MbError(
    `The embedded store at ${dataDir} belongs to ${name}, and this command runs as ${userName(uid)}: the files it wrote would belong to ${userName(uid)}, and ${name} could no longer open the store. Nothing was changed. Run the command as the store's owner: ${runAs}`,
    {code: 'STORE_OWNER'},
  )
}

/**
 * The files under `dataDir` this process cannot read and write, each as `path (owner NAME,
 * mode 0NNN)`, at most `limit` of them: why PGlite failed to open a store, said in words
 * instead of its own `Aborted()`.
 */
export function unusableFiles(dataDir: string, limit = 5): string[] {
  const found: string[] = []
  const walk = (dir: string): void => {
    let entries: fs.Dirent[]
    try {
      entries = fs.readdirSync(dir, {withFileTypes: true})
    } catch {
      return
    }
    for (const entry of entries) {
      if (found.length >= limit) return
      const path = join(dir, entry.name)
      if (entry.isSymbolicLink() || entry.isSocket()) continue
      try {
        fs.accessSync(path, fs.constants.R_OK | fs.constants.W_OK | (entry.isDirectory() ? fs.constants.X_OK : 0))
      } catch {
        const st = fs.lstatSync(path)
        found.push(`${path} (owner ${userName(st.uid)}, mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')})`)
        continue
      }
      if (entry.isDirectory()) walk(path)
    }
  }
  walk(dataDir)
  return found
}

/** Whether `dataDir` holds an embedded store. */
export function storeExists(dataDir: string): boolean {
  return fs.existsSync(join(dataDir, STORE_MARKER))
}

/**
 * The error for a command that needs an existing store and finds none: it names the path
 * looked in and how to point mb at the right store. Nothing has been created.
 */
export function storeNotFound(dataDir: string): MbError {
  return new MbError(
    `No embedded store in ${dataDir}. If your store is elsewhere, point mb at it with MB_DATA_DIR (or --data-dir, or data_dir: in the config file); for PostgreSQL set MB_DATABASE_URL (or database_url:). To start a new store here, run \`mb db migrate\` (\`mb mirror add\`, \`mb rule add\`, \`mb index\` and \`mb serve\` create one too).`,
    {code: 'STORE_NOT_FOUND'},
  )
}

/**
 * Creates the data directory `dataDir` (and missing parents) as 0700 for a new store, and says
 * where on stderr (a store in an unexpected place must not go unnoticed) unless `quiet`
 * (`--quiet` asks for errors only).
 */
export function createDataDir(dataDir: string, quiet = false): void {
  if (!quiet) process.stderr.write(`Creating a new embedded store in ${dataDir} (first use; takes a few seconds).\n`)
  original.mkdirSync(dataDir, {recursive: true, mode: 0o700})
}

/**
 * Keeps the store in `dataDir` private from here on, in this thread: new files 0600 and
 * directories 0700 (see the module comment), existing ones stripped of group and other bits,
 * and the directory itself 0700, or 0710 of group `gid` when a socket group is configured.
 * @throws MbError DB_LOCK when the modes cannot be set (the directory is not this user's)
 */
export function protectDataDir(dataDir: string, gid?: number): void {
  protectedDirs.add(`${dataDir.replace(/\/+$/, '')}${sep}`)
  installMasks()
  try {
    sweep(dataDir)
    if (gid === undefined) {
      original.chmodSync(dataDir, 0o700)
    } else {
      original.chownSync(dataDir, -1, gid)
      original.chmodSync(dataDir, 0o710)
    }
  } catch (error) {
    throw new MbError(`Cannot make the embedded store at ${dataDir} private: ${(error as Error).message}`, {code: 'DB_LOCK', cause: error})
  }
}

/**
 * Sets who may reach the shared socket `socketPath` (and take the store's lock files): its
 * owner only (0600), or also the members of group `gid` (socket 0660 and locks directory
 * 2770, of that group).
 */
export function protectSocket(dataDir: string, socketPath: string, gid?: number): void {
  if (gid === undefined) {
    original.chmodSync(socketPath, 0o600)
    return
  }
  original.chownSync(socketPath, -1, gid)
  original.chmodSync(socketPath, 0o660)
  const locks = join(dataDir, LOCKS_DIR)
  original.mkdirSync(locks, {recursive: true})
  original.chownSync(locks, -1, gid)
  original.chmodSync(locks, 0o2770)
}
