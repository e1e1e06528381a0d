/**
 * The embedded store: PGlite in a data directory, owned by one process at a time (the lock
 * file `mb.lock`). The store is a single PostgreSQL session, so a "session" is the whole
 * store, named locks are held in this process, and LISTEN goes through PGlite's `listen()`.
 * While the owner shares it (`mb serve`), other processes connect through its socket
 * (`openSharedPglite` in `postgres.ts`).
 */
import {closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, unlinkSync, writeSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import type {PGlite, Transaction} from '@electric-sql/pglite'
import {Kysely} from 'kysely'
import {MbError} from '../errors.js'
import type {Lock} from './locks.js'
import {INT8, int8ToNumber, openSharedPglite} from './postgres.js'
import type {DB} from './schema.js'
import {type Database, type ReadView, runInSequence, type Session} from './store.js'

/**
 * Name of the socket file that a sharing embedded store listens on, inside its data
 * directory. It follows PostgreSQL's own naming, so `psql -h DATA_DIR` connects too.
 */
export const SHARED_SOCKET_NAME = '.s.PGSQL.5432'

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * Takes the embedded store's lock file (`mb.lock`, holding the owner's pid). PGlite allows
 * one process per data directory; a second opener waits up to `waitSeconds`, then fails.
 */
async function lockDataDir(dataDir: string, waitSeconds: number): Promise<(() => void) | {sharedBy: number}> {
  mkdirSync(dataDir, {recursive: true})
  const lockPath = join(dataDir, 'mb.lock')
  const deadline = Date.now() + waitSeconds * 1000
  for (;;) {
    try {
      const fd = openSync(lockPath, 'wx')
      writeSync(fd, String(process.pid))
      closeSync(fd)
      return () => {
        try {
          if (readFileSync(lockPath, 'utf8') === String(process.pid)) unlinkSync(lockPath)
        } catch {
          /* already gone */
        }
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new MbError(`Cannot lock the embedded store at ${dataDir}: ${(error as Error).message}`, {code: 'DB_LOCK', cause: error})
    }
    let owner = Number.NaN
    try {
      owner = Number.parseInt(readFileSync(lockPath, 'utf8'), 10)
    } catch {
      /* vanished between open and read: retry */
    }
    if (Number.isFinite(owner) && (owner === process.pid || !pidAlive(owner))) {
      try {
        unlinkSync(lockPath)
      } catch {
        /* someone else removed it */
      }
      continue
    }
    if (Number.isFinite(owner) && existsSync(join(dataDir, SHARED_SOCKET_NAME))) return {sharedBy: owner}
    if (Date.now() > deadline) {
      throw new MbError(
        `The embedded store at ${dataDir} is in use by process ${owner} (for example a running \`mb serve\`). Wait for it to finish or stop it, or use PostgreSQL (MB_DATABASE_URL) to run several mb processes at once.`,
        {code: 'DB_BUSY'},
      )
    }
    await sleep(100)
  }
}

/** The {@link ReadView} over PGlite transaction `t`. */
function readView(t: Transaction): ReadView {
  const view: ReadView = {
    query: async (text, params) => (await t.query<unknown[]>(text, params as unknown[], {rowMode: 'array'})).rows,
    parallel: (tasks) => runInSequence(view, tasks),
  }
  return view
}

/** Named locks held in this process, by name: the store has no second session to exclude. */
function inProcessLocks(): Session['withLock'] {
  const held = new Set<string>()
  return async (lock: Lock, fn, onBusy) => {
    if (held.has(lock.name)) return onBusy()
    held.add(lock.name)
    try {
      return await fn()
    } finally {
      held.delete(lock.name)
    }
  }
}

/** The store's capabilities over the open `pglite`; `release` runs once the store is closed. */
function pgliteStore(pglite: PGlite, db: Kysely<DB>, dataDir: string, release: () => void): Database {
  const withLock = inProcessLocks()
  const session: Session = {db, transaction: (fn) => db.transaction().execute(fn), withLock}
  let closed = false
  let server: import('@electric-sql/pglite-socket').PGLiteSocketServer | undefined
  const socketPath = join(dataDir, SHARED_SOCKET_NAME)
  return {
    db,
    backend: 'pglite',
    location: dataDir,
    readSnapshot: (fn) =>
      pglite.transaction(async (t) => {
        await t.exec('SET TRANSACTION ISOLATION LEVEL REPEATABLE READ')
        return fn(readView(t))
      }),
    session: (fn) => fn(session),
    withLock,
    async listen(channel, onNotify) {
      const unlisten = await pglite.listen(channel, () => onNotify())
      return {renew: async () => {}, close: unlisten}
    },
    async share() {
      if (server || closed) return
      const {PGLiteSocketServer} = await import('@electric-sql/pglite-socket')
      rmSync(socketPath, {force: true})
      server = new PGLiteSocketServer({db: pglite, path: socketPath, maxConnections: 16})
      await server.start()
    },
    async close() {
      if (closed) return
      closed = true
      try {
        if (server) await server.stop().catch(() => {})
        rmSync(socketPath, {force: true})
        await db.destroy()
      } finally {
        release()
      }
    },
  }
}

/**
 * Opens the embedded store in `dataDir` (created on first use), or, when another live process
 * holds it and shares it, connects through that process's socket.
 * @param lockWaitSeconds  how long to wait for a holder that does not share the store
 * @throws MbError DB_UNCONFIGURED without a data directory, DB_BUSY when another process holds
 *         it, DB_LOCK / DB_OPEN_FAILED when the directory or PGlite cannot be used
 */
export async function openPglite(dataDir: string, lockWaitSeconds: number): Promise<Database> {
  if (!dataDir) throw new MbError('No database configured: set MB_DATABASE_URL for PostgreSQL or MB_DATA_DIR for the embedded store.', {code: 'DB_UNCONFIGURED'})
  const fresh = !existsSync(join(dataDir, 'PG_VERSION'))
  const lock = await lockDataDir(dataDir, lockWaitSeconds)
  if (typeof lock !== 'function') return openSharedPglite(dataDir, lock.sharedBy)
  let pglite: PGlite
  try {
    const {PGlite} = await import('@electric-sql/pglite')
    if (fresh && process.stderr.isTTY) process.stderr.write(`Creating the embedded store in ${dataDir} (first run, takes a few seconds)...\n`)
    pglite = await PGlite.create(dataDir, {parsers: {[INT8]: int8ToNumber}})
  } catch (error) {
    lock()
    throw new MbError(`Cannot open the embedded store at ${dataDir}: ${(error as Error).message}`, {code: 'DB_OPEN_FAILED', cause: error})
  }
  const {PGliteDialect} = await import('kysely-pglite-dialect')
  return pgliteStore(pglite, new Kysely<DB>({dialect: new PGliteDialect(pglite)}), dataDir, lock)
}
