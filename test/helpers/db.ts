/**
 * Test databases on either backend, chosen by the environment:
 * - `MB_TEST_DATABASE_URL=postgres://…/test` → a fresh PostgreSQL database per call, cloned
 *   from a migrated template database (CREATE DATABASE … TEMPLATE);
 * - otherwise → a fresh PGlite data directory per call, copied from a migrated template
 *   directory (initdb runs once per machine and migration set).
 */
import {createHash} from 'node:crypto'
import {cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import pg from 'pg'
import {openDatabase, type Database} from '../../src/lib/db/index.js'

export const backend: 'postgres' | 'pglite' = process.env.MB_TEST_DATABASE_URL ? 'postgres' : 'pglite'

function hashMigrations(): string {
  const dir = new URL('../../migrations/', import.meta.url).pathname
  const hash = createHash('sha256')
  for (const name of readdirSync(dir).sort()) hash.update(name).update(readFileSync(join(dir, name)))
  return hash.digest('hex').slice(0, 12)
}

/**
 * The migration set's hash, taken once when the tests load (as the migrations module is): a
 * template built by this process then always holds the migrations its name says, even when
 * the files change while a run is under way.
 */
const MIGRATIONS_HASH = hashMigrations()

export interface TestDatabase {
  /** Environment for spawned `mb` processes (MB_DATABASE_URL or MB_DATA_DIR). */
  env: Record<string, string>
  /** Config values for in-process use. */
  url?: string
  dataDir?: string
  /** Opens a connection (caller closes it). */
  open(): Promise<Database>
  /** Removes the database. */
  drop(): Promise<void>
}

let counter = 0

async function pgliteTemplate(): Promise<string> {
  const dir = join(tmpdir(), `mb-test-template-${MIGRATIONS_HASH}`)
  if (existsSync(join(dir, 'PG_VERSION'))) return dir
  const building = mkdtempSync(join(tmpdir(), 'mb-test-template-build-'))
  const database = await openDatabase({dataDir: building, schema: 'auto', create: true})
  await database.close()
  try {
    renameSync(building, dir)
  } catch {
    rmSync(building, {recursive: true, force: true}) // another process won the race
  }
  return dir
}

async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({connectionString: process.env.MB_TEST_DATABASE_URL})
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

function urlFor(name: string): string {
  const url = new URL(process.env.MB_TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  return url.toString()
}

async function postgresTemplate(): Promise<string> {
  const name = `mb_tpl_${MIGRATIONS_HASH}`
  const exists = await withAdmin(async (c) => (await c.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount! > 0)
  if (exists) return name
  const building = `${name}_b${process.pid}`
  await withAdmin((c) => c.query(`CREATE DATABASE ${building}`))
  const database = await openDatabase({url: urlFor(building), schema: 'auto'})
  await database.close()
  try {
    await withAdmin((c) => c.query(`ALTER DATABASE ${building} RENAME TO ${name}`))
  } catch {
    await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${building}`))
  }
  return name
}

/**
 * Creates an empty, migrated embedded store in a temporary directory, whatever the test
 * backend: for tests of the embedded store itself. Its `env` names no PostgreSQL URL.
 */
export async function createEmbeddedTestDatabase(): Promise<TestDatabase> {
  const template = await pgliteTemplate()
  const dataDir = mkdtempSync(join(tmpdir(), 'mb-test-db-'))
  cpSync(template, dataDir, {recursive: true})
  return {
    env: {MB_DATA_DIR: dataDir},
    dataDir,
    open: () => openDatabase({dataDir}),
    drop: async () => rmSync(dataDir, {recursive: true, force: true}),
  }
}

/** Creates an empty, migrated database on the configured test backend. */
export async function createTestDatabase(): Promise<TestDatabase> {
  counter += 1
  if (backend === 'pglite') return createEmbeddedTestDatabase()
  const template = await postgresTemplate()
  const name = `mb_t_${process.pid}_${Date.now().toString(36)}_${counter}`
  for (let attempt = 0; ; attempt++) {
    try {
      await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${template}`))
      break
    } catch (error) {
      if (attempt > 50 || !/being accessed by other users/.test((error as Error).message)) throw error
      await new Promise((r) => setTimeout(r, 100 + Math.random() * 200))
    }
  }
  const url = urlFor(name)
  return {
    env: {MB_DATABASE_URL: url},
    url,
    open: () => openDatabase({url}),
    drop: () => withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  }
}

/** Runs `fn` on a connection of its own to `test`, closed when it ends. */
export async function withDatabase<T>(test: TestDatabase, fn: (database: Database) => Promise<T>): Promise<T> {
  const database = await test.open()
  try {
    return await fn(database)
  } finally {
    await database.close()
  }
}

/**
 * Registers one mirror (id 1, `m.example`, HTTP only) holding one indexed file, for tests
 * of `mb serve` that need a redirect and nothing more.
 * @param file the origin path, size in bytes and mtime in Unix seconds
 */
export async function seedOneMirror(test: TestDatabase, file: {path: string; size: number; mtime: number}): Promise<void> {
  const database = await test.open()
  try {
    await database.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: 'http://m.example/'}).execute()
    await database.db
      .insertInto('file')
      .values({...file, mirrors: [1]})
      .execute()
  } finally {
    await database.close()
  }
}

/** A test database and, unless asked otherwise, an open connection to it; see {@link useTestDatabase}. */
export interface TestStore {
  /** The database (set by the `before` hook). */
  readonly test: TestDatabase
  /** The open connection (set by the `before` hook; absent with `open: false`). */
  readonly database: Database
}

/**
 * Registers, in the calling `describe`, the hooks that give its tests a fresh migrated test
 * database: `before` creates it (and opens a connection, unless `open` is false), and a
 * teardown closes and drops it after the describe's own `after` hooks (which may still stop an
 * `mb serve` using it). With `each`, every test gets its own (beforeEach/afterEach). Register
 * it before the hooks that seed the database. Read the fields inside hooks and tests, never at
 * describe time.
 */
export function useTestDatabase(options: {open?: boolean; each?: boolean} = {}): TestStore {
  let test: TestDatabase | undefined
  let database: Database | undefined
  const tearDown = async () => {
    await database?.close()
    await test?.drop()
    database = undefined
    test = undefined
  }
  const setUp = async () => {
    test = await createTestDatabase()
    if (options.open !== false) database = await test.open()
  }
  if (options.each) {
    beforeEach(setUp)
    afterEach(tearDown)
  } else {
    before(async function () {
      // Added now, so it runs after every `after` hook the describe registered.
      this.test?.parent?.afterAll(tearDown)
      await setUp()
    })
  }
  return {
    get test() {
      if (!test) throw new Error('useTestDatabase: no test database outside its hooks and tests')
      return test
    },
    get database() {
      if (!database) throw new Error(`useTestDatabase: no open connection${options.open === false ? ' (open: false)' : ' outside its hooks and tests'}`)
      return database
    },
  }
}

/**
 * Registers `paths` of origin tree `root` as indexed files, with the size (bytes) and mtime
 * (Unix seconds) they have on disk, held by the mirrors `mirrors` (ids); no hashes.
 */
export async function seedFiles(database: Database, root: string, paths: string[], mirrors: number[]): Promise<void> {
  for (const path of paths) {
    const st = statSync(join(root, path))
    await database.db
      .insertInto('file')
      .values({path, size: st.size, mtime: Math.floor(st.mtimeMs / 1000), mirrors})
      .execute()
  }
}

/**
 * Registers mirror `identifier` at `httpUrl` (in GB) as `mb mirror add`, a probe and a scan
 * would leave one that holds every indexed file: up, honouring Range, scanned now.
 * @returns its id
 */
export async function seedMirrorHoldingAll(database: Database, identifier: string, httpUrl: string): Promise<number> {
  const row = await database.db
    .insertInto('mirror')
    .values({identifier, http_url: httpUrl, country: 'GB', continent: 'EU', up: true, range_ok: true, last_scan_ok_at: new Date()} as any)
    .returning('id')
    .executeTakeFirstOrThrow()
  await sql`UPDATE file SET mirrors = ${`{${row.id}}`}::smallint[]`.execute(database.db)
  return row.id
}
