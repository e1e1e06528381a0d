/**
 * The embedded store: PGlite in a data directory, owned by one process at a time (the lock
 * file `mb.lock`). The store is a single PostgreSQL session, so a "session" is the whole
 * store, named locks are lock files in the data directory (`embedded-locks.ts`), and LISTEN goes
 * through PGlite's `listen()`.
 * To share it (`mb serve`), a process owns it on a worker thread that serves its socket
 * (`store-host.ts`, `session-server.ts`); every process, that one included, then connects
 * through the socket (`openSharedPglite` in `postgres.ts`).
 */
import {existsSync} from 'node:fs'
import {join} from 'node:path'
import type {PGlite, Transaction} from '@electric-sql/pglite'
import {Kysely} from 'kysely'
import {MbError} from '../errors.js'
import {checkStoreOwner, createDataDir, groupId, protectDataDir, storeExists, storeNotFound, unusableFiles} from './data-dir.js'
import {lockDataDir} from './owner-lock.js'
import {fileLocks} from './embedded-locks.js'
import {INT8, int8ToNumber, openSharedPglite} from './postgres.js'
import type {DB} from './schema.js'
import {type Database, type ReadView, runInSequence, type Session} from './store.js'

/**
 * Name of the socket file that a sharing embedded store listens on, inside its data
 * directory. It follows PostgreSQL's own naming, so `psql -h DATA_DIR` connects too.
 */
export const SHARED_SOCKET_NAME = '.s.PGSQL.5432'

/**
 * PostgreSQL settings of the embedded store, applied at every open (PGlite's `postgresqlconf`).
 * PGlite keeps PostgreSQL's `shared_buffers` default of 128 MB inside its WebAssembly memory,
 * and the store touches all of it: 120 MB more resident memory for every process that opens
 * it, whatever the size of the site. 16 MB holds the working set of a small site's store; a
 * larger table is read through the operating system's page cache (the data directory is a
 * real directory), so it costs system calls, not disk reads. Sites that outgrow this run
 * PostgreSQL (docs/operations.md, "PostgreSQL").
 */
const EMBEDDED_SETTINGS = ['shared_buffers = 16MB']

/** The {@link ReadView} over PGlite transaction `t`. */
function readView(t: Transaction): ReadView {
  const view: ReadView = {
    query: async (text, params) => (await t.query<unknown[]>(text, params as unknown[], {rowMode: 'array'})).rows,
    parallel: (tasks) => runInSequence(view, tasks),
  }
  return view
}

/** The store's capabilities over the open `pglite`; `release` runs once the store is closed. */
function pgliteStore(pglite: PGlite, db: Kysely<DB>, dataDir: string, release: () => void, gid?: number): Database {
  const withLock = fileLocks(dataDir, {mode: gid === undefined ? 0o600 : 0o640})
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
      return {renew: async () => {}, listening: true, close: unlisten}
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

/** How the embedded store in a data directory may be opened. */
export interface PgliteOpenOptions {
  /** How long to wait for a holder that does not share the store, in seconds. */
  lockWaitSeconds: number
  /** Whether a missing store may be created (and said so on stderr); otherwise it is an error. */
  create?: boolean
  /** Creates a missing store without the line on stderr (`--quiet`). */
  quiet?: boolean
  /** Group (name or gid) that may reach the shared socket; unset: the owner only. */
  socketGroup?: string
}

/**
 * Opens the embedded store in `dataDir` (an absolute path), or, when another live process
 * holds it and shares it, connects through that process's socket.
 * @throws as {@link ownPglite}
 */
export async function openPglite(dataDir: string, options: PgliteOpenOptions): Promise<Database> {
  const opened = await ownPglite(dataDir, options)
  return 'sharedBy' in opened ? openSharedPglite(dataDir, opened.sharedBy, {gid: opened.gid}) : opened.database
}

/**
 * Opens the embedded store in `dataDir` as its owner: the store and the PGlite instance under
 * it, for the socket server (`session-server.ts`) to share. When another live process holds
 * the store and shares it, reports that process instead. A missing store is created only with
 * `options.create`; it is then private to its owner whatever the umask (`data-dir.ts`: the
 * modes apply to the calling thread, so this runs on the thread that writes the store).
 * @throws MbError DB_UNCONFIGURED without a data directory, STORE_NOT_FOUND when there is no
 *         store and `create` is not set (nothing is created), DB_BUSY when another process
 *         holds it, DB_LOCK / DB_OPEN_FAILED when the directory or PGlite cannot be used;
 *         UsageError CONFIG_INVALID for an unknown socket group
 */
export async function ownPglite(dataDir: string, options: PgliteOpenOptions): Promise<{database: Database; pglite: PGlite; gid?: number} | {sharedBy: number; gid?: number}> {
  if (!dataDir) {
    throw new MbError(
      'No embedded store directory: none is configured, and the default ($XDG_DATA_HOME/mb or $HOME/.local/share/mb) cannot be derived because HOME and XDG_DATA_HOME are unset or not absolute paths. Set MB_DATA_DIR (or --data-dir, or data_dir: in the config file) to the store directory, or MB_DATABASE_URL for PostgreSQL.',
      {code: 'DB_UNCONFIGURED'},
    )
  }
  const fresh = !storeExists(dataDir)
  if (fresh && !options.create) throw storeNotFound(dataDir)
  const gid = options.socketGroup === undefined ? undefined : groupId(options.socketGroup)
  if (fresh) createDataDir(dataDir, options.quiet)
  const lock = await lockDataDir(dataDir, options.lockWaitSeconds, (owner) => (existsSync(join(dataDir, SHARED_SOCKET_NAME)) ? {sharedBy: owner, gid} : undefined))
  if (typeof lock !== 'function') return lock
  let pglite: PGlite
  try {
    checkStoreOwner(dataDir)
  } catch (error) {
    lock()
    throw error
  }
  try {
    protectDataDir(dataDir, gid)
    const {PGlite} = await import('@electric-sql/pglite')
    pglite = await PGlite.create(dataDir, {parsers: {[INT8]: int8ToNumber}, postgresqlconf: EMBEDDED_SETTINGS})
  } catch (error) {
    lock()
    const unusable = unusableFiles(dataDir)
    const why = unusable.length > 0 ? `this user cannot read and write ${unusable.join(', ')}${unusable.length >= 5 ? ' (and maybe more)' : ''}` : (error as Error).message
    throw new MbError(`Cannot open the embedded store at ${dataDir}: ${why}`, {code: 'DB_OPEN_FAILED', cause: error})
  }
  const {PGliteDialect} = await import('kysely-pglite-dialect')
  return {database: pgliteStore(pglite, new Kysely<DB>({dialect: new PGliteDialect(pglite)}), dataDir, lock, gid), pglite, gid}
}
