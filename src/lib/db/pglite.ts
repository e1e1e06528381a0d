/**
 * The embedded store: PGlite in a data directory, owned by one process at a time (the lock
 * file `mb.lock`). The store is a single PostgreSQL session, so a "session" is the whole
 * store, named locks are held in this process, and LISTEN goes through PGlite's `listen()`.
 * To share it (`mb serve`), a process owns it on a worker thread that serves its socket
 * (`store-host.ts`, `session-server.ts`); every process, that one included, then connects
 * through the socket (`openSharedPglite` in `postgres.ts`).
 */
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import type {PGlite, Transaction} from '@electric-sql/pglite'
import {Kysely} from 'kysely'
import {MbError} from '../errors.js'
import {lockDataDir} from './lock-file.js'
import type {Lock} from './locks.js'
import {INT8, int8ToNumber, openSharedPglite} from './postgres.js'
import type {DB} from './schema.js'
import {type Database, type ReadView, runInSequence, type Session} from './store.js'

/**
 * Name of the socket file that a sharing embedded store listens on, inside its data
 * directory. It follows PostgreSQL's own naming, so `psql -h DATA_DIR` connects too.
 */
export const SHARED_SOCKET_NAME = '.s.PGSQL.5432'

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
    async close() {
      if (closed) return
      closed = true
      try {
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
  const opened = await ownPglite(dataDir, lockWaitSeconds)
  return 'sharedBy' in opened ? openSharedPglite(dataDir, opened.sharedBy) : opened.database
}

/**
 * Opens the embedded store in `dataDir` as its owner (created on first use): the store and the
 * PGlite instance under it, for the socket server (`session-server.ts`) to share. When another live process
 * holds the store and shares it, reports that process instead.
 * @throws as {@link openPglite}
 */
export async function ownPglite(dataDir: string, lockWaitSeconds: number): Promise<{database: Database; pglite: PGlite} | {sharedBy: number}> {
  if (!dataDir) throw new MbError('No database configured: set MB_DATABASE_URL for PostgreSQL or MB_DATA_DIR for the embedded store.', {code: 'DB_UNCONFIGURED'})
  const fresh = !existsSync(join(dataDir, 'PG_VERSION'))
  const lock = await lockDataDir(dataDir, lockWaitSeconds, (owner) => (existsSync(join(dataDir, SHARED_SOCKET_NAME)) ? {sharedBy: owner} : undefined))
  if (typeof lock !== 'function') return lock
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
  return {database: pgliteStore(pglite, new Kysely<DB>({dialect: new PGliteDialect(pglite)}), dataDir, lock), pglite}
}
