/**
 * Connection factory: kysely over `pg` for PostgreSQL (`MB_DATABASE_URL`), or over an embedded
 * PGlite store in a data directory (the zero-setup default). Both speak the same SQL and use
 * the same migrations; int8 values come back as JS numbers from both.
 */
import {closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, unlinkSync, writeSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {Kysely, PostgresDialect} from 'kysely'
import pg from 'pg'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import {migrateToLatest, pendingMigrations} from './migrate.js'
import type {DB} from './schema.js'

export type {DB} from './schema.js'

/** An open database. `close()` must be called before the process exits. */
export interface Database {
  db: Kysely<DB>
  kind: 'postgres' | 'pglite'
  /** The URL without password, or the PGlite data directory. */
  location: string
  /** The underlying pg pool (PostgreSQL only), for COPY, LISTEN and advisory locks. */
  pool?: pg.Pool
  /** The underlying PGlite instance (embedded only). */
  pglite?: import('@electric-sql/pglite').PGlite
  /**
   * Embedded store only: lets other `mb` processes use this store while this process holds
   * it, through a PostgreSQL wire-protocol Unix socket in the data directory
   * (`@electric-sql/pglite-socket`). `mb serve` calls it so that `mb mirror disable`,
   * `mb scan` and friends keep working beside it. No-op on PostgreSQL.
   */
  share(): Promise<void>
  close(): Promise<void>
}

/**
 * Name of the socket file that a sharing embedded store listens on, inside its data
 * directory. It follows PostgreSQL's own naming, so `psql -h DATA_DIR` connects too.
 */
export const SHARED_SOCKET_NAME = '.s.PGSQL.5432'

export interface OpenOptions {
  /** postgres:// URL; when absent, PGlite in `dataDir` is used. */
  url?: string
  /** PGlite data directory (created on first use). */
  dataDir?: string
  /**
   * What to do with pending migrations: `check` refuses to run (PostgreSQL default),
   * `auto` applies them (embedded default), `none` skips the check (for `mb db` itself).
   */
  schema?: 'check' | 'auto' | 'none'
  /** Max pool size for PostgreSQL (default 10). */
  poolSize?: number
  /** How long to wait for another process holding the embedded store, in seconds (default 30). */
  lockWaitSeconds?: number
}

const INT8 = 20
const INT8_ARRAY = 1016
const toNumber = (value: string) => Number(value)
pg.types.setTypeParser(INT8, toNumber)
pg.types.setTypeParser(INT8_ARRAY as any, (value: string) => (pg.types.arrayParser as any).create(value, toNumber).parse())

/**
 * Opens the database named by `url` (PostgreSQL) or `dataDir` (PGlite).
 * @throws MbError when the server cannot be reached, the embedded store is held by another
 *         live process, or the schema is outdated and `schema` is `check`.
 */
export async function openDatabase(options: OpenOptions): Promise<Database> {
  const database = options.url ? await openPostgres(options.url, options.poolSize ?? 10) : await openPglite(options.dataDir!, options.lockWaitSeconds ?? 30)
  try {
    const mode = options.schema ?? (database.kind === 'pglite' ? 'auto' : 'check')
    if (mode !== 'none') {
      const pending = await pendingMigrations(database.db)
      if (pending.length > 0) {
        if (mode === 'auto') {
          await migrateToLatest(database.db)
        } else {
          throw new MbError(`The database schema at ${database.location} is outdated (${pending.length} pending migration(s): ${pending.join(', ')}). Run \`mb db migrate\` first.`, {code: 'SCHEMA_OUTDATED'})
        }
      }
    }
  } catch (error) {
    await database.close()
    throw error
  }
  return database
}

async function openPostgres(url: string, max: number): Promise<Database> {
  const location = redact(url)
  const pool = new pg.Pool({connectionString: url, max, connectionTimeoutMillis: 10_000})
  pool.on('error', () => {
    /* idle client errors (server restart) are handled by the next query */
  })
  // A server that goes away mid-query also emits 'error' on the checked-out client; without a
  // listener that would crash the process (the query itself rejects and is handled).
  pool.on('connect', (client) => {
    client.on('error', () => {})
  })
  try {
    const client = await pool.connect()
    client.release()
  } catch (error) {
    await pool.end().catch(() => {})
    throw new MbError(`Cannot connect to PostgreSQL at ${location}: ${(error as Error).message}. Check that the server runs and that MB_DATABASE_URL (or --database-url) is right.`, {code: 'DB_UNREACHABLE', cause: error})
  }
  const db = new Kysely<DB>({dialect: new PostgresDialect({pool})})
  return {
    db,
    kind: 'postgres',
    location,
    pool,
    share: async () => {},
    close: async () => {
      await db.destroy()
    },
  }
}

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
      throw new MbError(`The embedded store at ${dataDir} is in use by process ${owner} (for example a running \`mb serve\`). Wait for it to finish or stop it, or use PostgreSQL (MB_DATABASE_URL) to run several mb processes at once.`, {code: 'DB_BUSY'})
    }
    await sleep(100)
  }
}

async function openPglite(dataDir: string, lockWaitSeconds: number): Promise<Database> {
  if (!dataDir) throw new MbError('No database configured: set MB_DATABASE_URL for PostgreSQL or MB_DATA_DIR for the embedded store.', {code: 'DB_UNCONFIGURED'})
  const fresh = !existsSync(join(dataDir, 'PG_VERSION'))
  const lock = await lockDataDir(dataDir, lockWaitSeconds)
  if (typeof lock !== 'function') return openSharedPglite(dataDir, lock.sharedBy)
  const unlock = lock
  let pglite: import('@electric-sql/pglite').PGlite
  try {
    const {PGlite} = await import('@electric-sql/pglite')
    if (fresh && process.stderr.isTTY) process.stderr.write(`Creating the embedded store in ${dataDir} (first run, takes a few seconds)...\n`)
    pglite = await PGlite.create(dataDir, {parsers: {[INT8]: toNumber}})
  } catch (error) {
    unlock()
    throw new MbError(`Cannot open the embedded store at ${dataDir}: ${(error as Error).message}`, {code: 'DB_OPEN_FAILED', cause: error})
  }
  const {PGliteDialect} = await import('kysely-pglite-dialect')
  const db = new Kysely<DB>({dialect: new PGliteDialect(pglite)})
  let closed = false
  let server: import('@electric-sql/pglite-socket').PGLiteSocketServer | undefined
  const socketPath = join(dataDir, SHARED_SOCKET_NAME)
  return {
    db,
    kind: 'pglite',
    location: dataDir,
    pglite,
    share: async () => {
      if (server || closed) return
      const {PGLiteSocketServer} = await import('@electric-sql/pglite-socket')
      rmSync(socketPath, {force: true})
      server = new PGLiteSocketServer({db: pglite, path: socketPath, maxConnections: 16})
      await server.start()
    },
    close: async () => {
      if (closed) return
      closed = true
      try {
        if (server) await server.stop().catch(() => {})
        rmSync(socketPath, {force: true})
        await db.destroy()
      } finally {
        unlock()
      }
    },
  }
}

/** Connects to an embedded store that another live process (pid `owner`) shares over its socket. */
async function openSharedPglite(dataDir: string, owner: number): Promise<Database> {
  const pool = new pg.Pool({host: dataDir, port: 5432, user: 'postgres', database: 'postgres', max: 1, connectionTimeoutMillis: 10_000})
  pool.on('error', () => {})
  try {
    const client = await pool.connect()
    client.release()
  } catch (error) {
    await pool.end().catch(() => {})
    throw new MbError(`The embedded store at ${dataDir} is held by process ${owner}, and its shared socket does not answer (${(error as Error).message}). Wait for that process to finish, or stop it.`, {code: 'DB_BUSY', cause: error})
  }
  const db = new Kysely<DB>({dialect: new PostgresDialect({pool})})
  return {
    db,
    kind: 'postgres',
    location: `${dataDir} (embedded, shared by process ${owner})`,
    pool,
    share: async () => {},
    close: async () => {
      await db.destroy()
    },
  }
}
