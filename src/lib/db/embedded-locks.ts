/**
 * Named locks of the embedded store as lock files: `DATA_DIR/locks/<lock name>`, each holding
 * the owner's pid and start time. Every process that uses one embedded store (its owner,
 * `pglite`, and the clients of its shared socket, `pglite-shared`) takes the same files, so a
 * scan in `mb scan` excludes a scan in another `mb scan` and one beside `mb serve`, as
 * PostgreSQL's advisory locks do between sessions. Advisory locks cannot do it here: every
 * socket client shares the one PGlite session, in which they are re-entrant.
 *
 * A lock file is created atomically complete: written under a private name, then hard-linked
 * to its lock name (link(2) fails with EEXIST when the lock is held, like O_CREAT|O_EXCL, and
 * the file is never seen half-written). It is stale when its process is gone, or when its pid
 * now names another process (a start time that differs, from /proc/PID/stat field 22, see
 * proc(5)); a stale file is removed under a second lock (`NAME.break`) so two processes that
 * find it stale at once cannot remove a fresh lock one of them just took.
 */
import {closeSync, fchmodSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync} from 'node:fs'
import {join} from 'node:path'
import {MbError} from '../errors.js'
import {processStartTime} from './owner-lock.js'
import type {Lock} from './named-locks.js'
import type {Session} from './store.js'

/** The directory of the lock files inside a data directory. */
export const LOCKS_DIR = 'locks'

/** The content of this process's lock files: `PID START_TIME\n`. */
function ownStamp(): string {
  return `${process.pid} ${processStartTime(process.pid) ?? '0'}\n`
}

/**
 * Whether the lock file content `stamp` names a process that still runs. Content that cannot
 * be read as a stamp counts as live: it is never removed by guesswork.
 */
function stampAlive(stamp: string): boolean {
  const match = /^(\d+) (\d+|\?)\n$/.exec(stamp)
  if (!match) return true
  const pid = Number(match[1])
  const started = processStartTime(pid)
  if (started === undefined) return false
  return match[2] === '?' || match[2] === '0' || started === '0' || started === match[2]
}

function readOrUndefined(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path)
  } catch {
    /* already gone */
  }
}

/**
 * Creates `path` holding `stamp`, atomically and only if it does not exist.
 * @returns false when it exists
 * @throws MbError DB_LOCK when the locks directory cannot be written
 */
function createExclusive(path: string, stamp: string, mode: number): boolean {
  const temporary = `${path}.${process.pid}.tmp`
  try {
    const fd = openSync(temporary, 'w', mode)
    try {
      fchmodSync(fd, mode)
      writeSync(fd, stamp)
    } finally {
      closeSync(fd)
    }
    linkSync(temporary, path)
    return true
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false
    throw new MbError(`Cannot create the lock file ${path}: ${(error as Error).message}`, {code: 'DB_LOCK', cause: error})
  } finally {
    unlinkQuietly(temporary)
  }
}

/** Removes the lock file `path` if it still holds the stale `stamp`; under `path.break`. */
function breakStale(path: string, stamp: string, mode: number): void {
  const breaker = `${path}.break`
  if (!createExclusive(breaker, ownStamp(), mode)) {
    const other = readOrUndefined(breaker)
    if (other !== undefined && !stampAlive(other)) unlinkQuietly(breaker)
    return
  }
  try {
    if (readOrUndefined(path) === stamp) unlinkQuietly(path)
  } finally {
    unlinkQuietly(breaker)
  }
}

/** Options of {@link fileLocks}. */
export interface FileLockOptions {
  /** Mode of the lock files (default 0600; 0640 when the store's socket has a group). */
  mode?: number
}

/**
 * Takes lock file `name` in `dir`.
 * @returns a release function, or undefined when a live process holds the lock
 */
export function acquireLockFile(dir: string, name: string, options: FileLockOptions = {}): (() => void) | undefined {
  const mode = options.mode ?? 0o600
  mkdirSync(dir, {recursive: true, mode: 0o700})
  const path = join(dir, name)
  const stamp = ownStamp()
  for (let attempt = 0; attempt < 3; attempt++) {
    if (createExclusive(path, stamp, mode)) {
      return () => {
        if (readOrUndefined(path) === stamp) unlinkQuietly(path)
      }
    }
    const holder = readOrUndefined(path)
    if (holder === undefined) continue
    if (stampAlive(holder)) return undefined
    breakStale(path, holder, mode)
  }
  return undefined
}

/**
 * {@link Session.withLock} for the embedded store in `dataDir`: lock files under
 * `DATA_DIR/locks`, shared by every process using that store. A lock held by this same
 * process (another task in it) is busy too, as a second PostgreSQL session would find it.
 * @throws MbError DB_LOCK when the lock file cannot be created (permissions)
 */
export function fileLocks(dataDir: string, options: FileLockOptions = {}): Session['withLock'] {
  const dir = join(dataDir, LOCKS_DIR)
  return async (lock: Lock, fn, onBusy) => {
    const release = acquireLockFile(dir, lock.name, options)
    if (!release) return onBusy()
    try {
      return await fn()
    } finally {
      release()
    }
  }
}
