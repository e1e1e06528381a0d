/**
 * Opening a store: PostgreSQL (`MB_DATABASE_URL`, `postgres.ts`), or the embedded PGlite store
 * in a data directory (the zero-setup default, `pglite.ts`), or a client of an embedded store
 * that a running `mb serve` shares (`store-host.ts`). All speak the same SQL and use the same
 * migrations; int8 values come back as JS numbers from each. What differs between them sits
 * behind {@link Database} (`store.ts`).
 */
import {resolve} from 'node:path'
import {redact} from '../redact.js'
import {prepareSchema, type SchemaMode} from './migrate.js'
import {openPglite} from './pglite.js'
import {openPostgres} from './postgres.js'
import {hostPglite} from './store-host.js'
import type {Database} from './store.js'

export type {Database, ReadView, Subscription} from './store.js'

export interface OpenOptions {
  /** postgres:// URL; when absent, PGlite in `dataDir` is used. */
  url?: string
  /** PGlite data directory; a relative one is taken from the working directory. */
  dataDir?: string
  /**
   * Whether a missing embedded store may be created here (and said so on stderr). Only the
   * commands that start a store's life set it (`mb db migrate`, `mb mirror add`, `mb index`,
   * `mb serve`); for every other one a missing store is an error, so a wrong MB_DATA_DIR or
   * an unset HOME never runs a command on a new, empty store. Ignored for PostgreSQL.
   */
  create?: boolean
  /** Creates a missing store without saying so on stderr (`--quiet`: errors only). */
  quiet?: boolean
  /** Group (name or gid) that may reach an embedded store's shared socket (`socket_group`). */
  socketGroup?: string
  /**
   * What to do with pending migrations: `check` refuses to run (PostgreSQL default),
   * `auto` applies them (embedded default), `none` skips the check (for `mb db` itself).
   */
  schema?: SchemaMode
  /** Max pool size for PostgreSQL (default 10). */
  poolSize?: number
  /** How long to wait for another process holding the embedded store, in seconds (default 30). */
  lockWaitSeconds?: number
  /**
   * Embedded store only: share it with other `mb` processes (`mb serve` does, so that
   * `mb mirror disable`, `mb scan` and friends keep working beside it). The store then runs
   * on a worker thread of this process, behind a socket in the data directory, and this
   * process uses it through that socket like every other one: a scan never stalls this
   * thread, and each client has the store to itself for a whole transaction. One process
   * shares a store: while another shares it already, opening is refused (`STORE_SERVED`).
   */
  share?: boolean
  /** PostgreSQL only: keep one connection open however long it idles (`openPostgres`'s `keepConnection`; `mb serve`). */
  keepConnection?: boolean
}

/**
 * Opens the database named by `url` (PostgreSQL) or `dataDir` (PGlite).
 * @throws MbError when the server cannot be reached, the embedded store is missing (and
 *         `create` is not set: STORE_NOT_FOUND) or held by another live process (with `share`
 *         and another one sharing it: STORE_SERVED), or the schema
 *         is outdated and `schema` is `check`.
 */
/**
 * The store `options` name, as `openDatabase` will open it, for a line before it is opened:
 * `postgres` and the URL without its password, or `pglite` and the data directory.
 */
export function describeStore(options: Pick<OpenOptions, 'url' | 'dataDir'>): {backend: 'postgres' | 'pglite'; location: string} {
  return options.url ? {backend: 'postgres', location: redact(options.url)} : {backend: 'pglite', location: options.dataDir ? resolve(options.dataDir) : '(none configured)'}
}

export async function openDatabase(options: OpenOptions): Promise<Database> {
  const dataDir = options.dataDir ? resolve(options.dataDir) : ''
  const pglite = {lockWaitSeconds: options.lockWaitSeconds ?? 30, create: options.create, quiet: options.quiet, socketGroup: options.socketGroup}
  const database = options.url
    ? await openPostgres(options.url, redact(options.url), options.poolSize ?? 10, {keepConnection: options.keepConnection})
    : options.share
      ? await hostPglite(dataDir, pglite, options.schema ?? 'auto')
      : await openPglite(dataDir, pglite)
  try {
    await prepareSchema(database, options.schema ?? (database.backend === 'pglite' ? 'auto' : 'check'))
  } catch (error) {
    await database.close()
    throw error
  }
  return database
}
