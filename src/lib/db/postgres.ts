/**
 * The stores reached over the PostgreSQL wire protocol through a `pg` pool: a PostgreSQL server
 * (`postgres`), or another process's embedded store through its Unix socket (`pglite-shared`).
 * The second has a single PGlite session behind it, which its socket hands to one connection
 * per transaction, so it reads without helper connections.
 */
import {Kysely, type PostgresPool, PostgresDialect} from 'kysely'
import pg from 'pg'
import {MbError} from '../errors.js'
import {fileLocks} from './embedded-locks.js'
import type {Lock} from './named-locks.js'
import type {DB} from './schema.js'
import {type Database, type ReadView, runInSequence, type Session, type Subscription} from './store.js'

/** Type OID of int8; its values come back as JS numbers from both backends. */
export const INT8 = 20
const INT8_ARRAY = 1016
/** Parses int8 text as a JS number (exact up to 2^53, beyond any size or id mb stores). */
export const int8ToNumber = (value: string) => Number(value)
pg.types.setTypeParser(INT8, int8ToNumber)
// biome-ignore lint/suspicious/noExplicitAny: @types/pg declares neither array type ids nor arrayParser.create
pg.types.setTypeParser(INT8_ARRAY as any, (value: string) => (pg.types.arrayParser as any).create(value, int8ToNumber).parse())

/** Rows of one array-mode query on `client`. */
function arrayQuery(client: pg.ClientBase): ReadView['query'] {
  return async (text, params) => (await client.query({text, values: params as unknown[] | undefined, rowMode: 'array'})).rows as unknown[][]
}

/** The {@link ReadView} over `client`'s open transaction; `helpers` allows helper connections from `pool`. */
function readView(pool: pg.Pool, client: pg.ClientBase, helpers: boolean): ReadView {
  const view: ReadView = {
    query: arrayQuery(client),
    parallel: (tasks) => (helpers && tasks.length > 1 ? inParallel(pool, view, tasks) : runInSequence(view, tasks)),
  }
  return view
}

/** {@link ReadView.parallel} on PostgreSQL: tasks after the first run on helpers importing the snapshot. */
async function inParallel<T>(pool: pg.Pool, view: ReadView, tasks: Array<(view: ReadView) => Promise<T>>): Promise<T[]> {
  const [[exported]] = await view.query(`SELECT pg_export_snapshot()`)
  const helpers: pg.PoolClient[] = []
  let broken = false
  try {
    for (let i = 1; i < tasks.length; i++) {
      const helper = await pool.connect()
      helpers.push(helper)
      await helper.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
      await helper.query(`SET TRANSACTION SNAPSHOT '${String(exported).replace(/'/g, "''")}'`)
    }
    const results = await Promise.all(tasks.map((task, i) => task(i === 0 ? view : readView(pool, helpers[i - 1], false))))
    for (const helper of helpers) await helper.query('COMMIT')
    return results
  } catch (error) {
    broken = true
    throw error
  } finally {
    for (const helper of helpers) helper.release(broken)
  }
}

/** {@link Database.readSnapshot} on one pool connection; a connection that saw an error is discarded. */
async function readSnapshot<T>(pool: pg.Pool, helpers: boolean, fn: (view: ReadView) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  let broken = false
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY')
    const result = await fn(readView(pool, client, helpers))
    await client.query('COMMIT')
    return result
  } catch (error) {
    broken = true
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.release(broken)
  }
}

/** Takes `lock` as a session-level advisory lock on `client`; see {@link Session.withLock}. */
async function advisoryLock<T>(client: pg.ClientBase, lock: Lock, fn: () => Promise<T>, onBusy: () => T | Promise<T>, discard: () => void): Promise<T> {
  const key = [lock.classId, lock.objectId]
  const {rows} = await client.query('SELECT pg_try_advisory_lock($1::int, $2::int) AS locked', key)
  if (!rows[0]?.locked) return onBusy()
  try {
    return await fn()
  } finally {
    await client.query('SELECT pg_advisory_unlock($1::int, $2::int)', key).catch(discard)
  }
}

/** A kysely pool that always hands out `client` (a session's one connection) and never ends it. */
function singleClientPool(client: pg.PoolClient, discard: () => void): PostgresPool {
  const lease = {
    query: (...args: unknown[]) => (client.query as (...a: unknown[]) => unknown)(...args),
    release: (destroy?: boolean) => {
      if (destroy) discard()
    },
  }
  // biome-ignore lint/suspicious/noExplicitAny: kysely's PostgresPool wants a pg.PoolClient; the lease implements the part kysely calls
  return {connect: async () => lease as any, end: async () => {}}
}

/**
 * {@link Database.session} on one pool connection, with a kysely instance bound to it; named
 * locks are advisory locks on that connection, or `locks` when given.
 */
async function session<T>(pool: pg.Pool, fn: (session: Session) => Promise<T>, locks?: Session['withLock']): Promise<T> {
  const client = await pool.connect()
  let discarded = false
  const discard = () => {
    discarded = true
  }
  const db = new Kysely<DB>({dialect: new PostgresDialect({pool: singleClientPool(client, discard)})})
  try {
    return await fn({
      db,
      transaction: (body) => db.transaction().execute(body),
      withLock: locks ?? ((lock, body, onBusy) => advisoryLock(client, lock, body, onBusy, discard)),
    })
  } finally {
    client.release(discarded)
  }
}

/** LISTEN on a dedicated client outside the pool, reconnected by {@link Subscription.renew}. */
class Listener implements Subscription {
  private client?: pg.Client
  private retryAt = 0
  private closed = false

  constructor(
    private readonly connection: pg.ClientConfig,
    private readonly channel: string,
    private readonly onNotify: () => void,
    private readonly onDrop?: () => void,
  ) {}

  get listening(): boolean {
    return this.client !== undefined
  }

  async renew(): Promise<void> {
    if (this.client || this.closed || Date.now() < this.retryAt) return
    const client = new pg.Client({...this.connection, connectionTimeoutMillis: 5000})
    const drop = () => {
      if (this.client !== client) return
      this.client = undefined
      this.retryAt = Date.now() + 2000
      client.end().catch(() => {})
      if (!this.closed) this.onDrop?.()
    }
    client.on('error', drop)
    client.on('end', drop)
    client.on('notification', () => this.onNotify())
    try {
      await client.connect()
      await client.query(`LISTEN ${client.escapeIdentifier(this.channel)}`)
      if (this.closed) throw new Error('closed while connecting')
      this.client = client
    } catch {
      this.retryAt = Date.now() + 2000
      client.end().catch(() => {})
    }
  }

  async close(): Promise<void> {
    this.closed = true
    const client = this.client
    this.client = undefined
    await client?.end().catch(() => {})
  }
}

interface PoolStoreOptions {
  backend: 'postgres' | 'pglite-shared'
  location: string
  /** Where LISTEN clients connect (the unredacted URL, or the socket). */
  listenTo: pg.ClientConfig
  /** Whether {@link ReadView.parallel} may take helper connections from the pool. */
  helpers: boolean
  /** Named locks other than advisory locks (the shared embedded store's lock files). */
  locks?: Session['withLock']
  /** False for a standby, which delivers no NOTIFY (LISTEN fails in recovery): `listen` then registers nothing. */
  notifies?: boolean
}

/** The subscription of a store that delivers no notifications: its readers poll. */
const NO_SUBSCRIPTION: Subscription = {renew: async () => {}, listening: false, close: async () => {}}

/** The {@link Database} over `pool`. */
function poolStore(pool: pg.Pool, options: PoolStoreOptions): Database {
  const db = new Kysely<DB>({dialect: new PostgresDialect({pool})})
  const listeners = new Set<Subscription>()
  return {
    db,
    backend: options.backend,
    location: options.location,
    readSnapshot: (fn) => readSnapshot(pool, options.helpers, fn),
    session: (fn) => session(pool, fn, options.locks),
    withLock: options.locks ?? ((lock, fn, onBusy) => session(pool, (s) => s.withLock(lock, fn, onBusy))),
    async listen(channel, onNotify, onDrop) {
      if (options.notifies === false) return NO_SUBSCRIPTION
      const listener = new Listener(options.listenTo, channel, onNotify, onDrop)
      await listener.renew()
      listeners.add(listener)
      return {
        renew: () => listener.renew(),
        get listening() {
          return listener.listening
        },
        close: () => {
          listeners.delete(listener)
          return listener.close()
        },
      }
    },
    async close() {
      await Promise.all([...listeners].map((l) => l.close()))
      await db.destroy()
    },
  }
}

/** A pool whose idle or checked-out clients may error (server restart) without crashing the process. */
function quietPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config)
  pool.on('error', () => {
    /* idle client errors (server restart) are handled by the next query */
  })
  // A server that goes away mid-query also emits 'error' on the checked-out client; without a
  // listener that would crash the process (the query itself rejects and is handled).
  pool.on('connect', (client) => {
    client.on('error', () => {})
  })
  return pool
}

/** Checks out and returns one client, so that a bad address fails here rather than at the first query; ends the pool on failure. */
async function checkConnect(pool: pg.Pool): Promise<void> {
  try {
    const client = await pool.connect()
    client.release()
  } catch (error) {
    await pool.end().catch(() => {})
    throw error
  }
}

/**
 * Connects to the PostgreSQL server at `url` (`location` is its redacted form, for messages).
 * @param max  pool size
 * @param options.readOnly  a read-only standby (`database_read_url`): every transaction is
 *        read-only (`default_transaction_read_only`, so that a URL naming a primary by mistake
 *        is not written either), and `listen` registers nothing, since a standby delivers no
 *        NOTIFY: its readers poll
 * @param options.keepConnection  for a long-running process that queries now and then
 *        (`mb serve`): one connection stays open however long it idles (the others close
 *        after 10 s). A new one costs the server a process and its caches, several times
 *        what the snapshot keeper's idle poll costs on an open one. Not for a command: the
 *        open connection would keep it running until it closes the database
 * @throws MbError DB_UNREACHABLE when no connection can be made within 10 s
 */
export async function openPostgres(url: string, location: string, max: number, options: {readOnly?: boolean; keepConnection?: boolean} = {}): Promise<Database> {
  const readOnly = options.readOnly ? {options: '-c default_transaction_read_only=on'} : {}
  const pool = quietPool({connectionString: url, max, min: options.keepConnection ? 1 : 0, connectionTimeoutMillis: 10_000, ...readOnly})
  try {
    await checkConnect(pool)
  } catch (error) {
    throw new MbError(
      `Cannot connect to PostgreSQL at ${location}: ${(error as Error).message}. Check that the server runs and that ${options.readOnly ? 'MB_DATABASE_READ_URL (database_read_url)' : 'MB_DATABASE_URL (or --database-url)'} is right.`,
      {
        code: 'DB_UNREACHABLE',
        cause: error,
      },
    )
  }
  return poolStore(pool, {backend: 'postgres', location, listenTo: {connectionString: url}, helpers: true, notifies: !options.readOnly})
}

/**
 * Connects to the embedded store in `dataDir` that the live process `owner` (possibly this
 * one) shares over its socket (`session-server.ts`). The socket gives each connection the
 * session for a whole transaction, so the pool may hold several.
 * Its named locks are the store's lock files, as in the owner: advisory locks would not
 * exclude, since every socket client shares one PGlite session.
 * @param options.max  pool size (default 2): the serving process needs more than one, since its
 *             probe round holds a session while its snapshot refreshes and statistics flushes go on
 * @param options.gid  the configured socket group, if any (lock files are then group-readable)
 * @throws MbError DB_BUSY when the socket does not answer within 10 s
 */
export async function openSharedPglite(dataDir: string, owner: number, options: {max?: number; gid?: number} = {}): Promise<Database> {
  const socket = {host: dataDir, port: 5432, user: 'postgres', database: 'postgres'}
  const pool = quietPool({...socket, max: options.max ?? 2, connectionTimeoutMillis: 10_000})
  try {
    await checkConnect(pool)
  } catch (error) {
    throw new MbError(
      `The embedded store at ${dataDir} is held by process ${owner}, and its shared socket does not answer (${(error as Error).message}). Wait for that process to finish, or stop it.`,
      {code: 'DB_BUSY', cause: error},
    )
  }
  return poolStore(pool, {
    backend: 'pglite-shared',
    location: `${dataDir} (embedded, shared by process ${owner})`,
    listenTo: socket,
    helpers: false,
    locks: fileLocks(dataDir, {mode: options.gid === undefined ? 0o600 : 0o640}),
  })
}
