/**
 * Opening a store: PostgreSQL (`MB_DATABASE_URL`, `postgres.ts`), or the embedded PGlite store
 * in a data directory (the zero-setup default, `pglite.ts`), or a client of an embedded store
 * that a running `mb serve` shares. All speak the same SQL and use the same migrations; int8
 * values come back as JS numbers from each. What differs between them sits behind
 * {@link Database} (`store.ts`).
 */
import {resolve} from 'node:path'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import {migrateToLatest, pendingMigrations} from './migrate.js'
import {openPglite} from './pglite.js'
import {openPostgres} from './postgres.js'
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
  /** Group (name or gid) that may reach an embedded store's shared socket (`socket_group`). */
  socketGroup?: string
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

/**
 * Opens the database named by `url` (PostgreSQL) or `dataDir` (PGlite).
 * @throws MbError when the server cannot be reached, the embedded store is missing (and
 *         `create` is not set: STORE_NOT_FOUND) or held by another live process, or the schema
 *         is outdated and `schema` is `check`.
 */
export async function openDatabase(options: OpenOptions): Promise<Database> {
  const database = options.url
    ? await openPostgres(options.url, redact(options.url), options.poolSize ?? 10)
    : await openPglite(options.dataDir ? resolve(options.dataDir) : '', {lockWaitSeconds: options.lockWaitSeconds ?? 30, create: options.create, socketGroup: options.socketGroup})
  try {
    const mode = options.schema ?? (database.backend === 'pglite' ? 'auto' : 'check')
    if (mode !== 'none') {
      const pending = await pendingMigrations(database.db)
      if (pending.length > 0) {
        if (mode === 'auto') {
          await migrateToLatest(database.db)
        } else {
          throw new MbError(`The database schema at ${database.location} is outdated (${pending.length} pending migration(s): ${pending.join(', ')}). Run \`mb db migrate\` first.`, {
            code: 'SCHEMA_OUTDATED',
          })
        }
      }
    }
  } catch (error) {
    await database.close()
    throw error
  }
  return database
}
