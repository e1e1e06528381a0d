/**
 * Schema migrations with kysely's Migrator over the static list in `migrations/index.ts`.
 * The same migrations run on PostgreSQL and on PGlite.
 */
import {type Kysely, type MigrationResult, Migrator, sql} from 'kysely'
import {migrations} from '../../../migrations/index.js'
import {MbError} from '../errors.js'
import type {DB} from './schema.js'
import type {Database} from './store.js'

/** One migration and whether it has been applied (and when, UTC). */
export interface MigrationState {
  name: string
  applied: boolean
  appliedAt?: Date
}

function migrator(db: Kysely<DB>): Migrator {
  return new Migrator({db, provider: {getMigrations: async () => migrations}})
}

/**
 * Applies every pending migration in order, in one transaction each.
 * @returns the names applied by this call (empty when already current)
 * @throws MbError naming the migration that failed; nothing of that migration is kept
 */
export async function migrateToLatest(db: Kysely<DB>): Promise<string[]> {
  const {error, results} = await migrator(db).migrateToLatest()
  const failed = results?.find((r: MigrationResult) => r.status === 'Error')
  if (error) {
    throw new MbError(`Migration ${failed?.migrationName ?? ''} failed: ${(error as Error).message ?? String(error)}`.replace('  ', ' '), {code: 'MIGRATION_FAILED', cause: error})
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/** Every known migration with its applied state, in order. */
export async function migrationStatus(db: Kysely<DB>): Promise<MigrationState[]> {
  const applied = await appliedMigrations(db)
  return Object.keys(migrations)
    .sort()
    .map((name) => ({name, applied: applied.has(name), appliedAt: applied.get(name)}))
}

async function appliedMigrations(db: Kysely<DB>): Promise<Map<string, Date>> {
  const exists = await sql<{present: boolean}>`SELECT to_regclass('public.kysely_migration') IS NOT NULL AS present`.execute(db)
  if (!exists.rows[0]?.present) return new Map()
  const rows = await sql<{name: string; timestamp: string}>`SELECT name, timestamp FROM kysely_migration`.execute(db)
  return new Map(rows.rows.map((r) => [r.name, new Date(r.timestamp)]))
}

/** Names of migrations not yet applied, in order. */
async function pendingMigrations(db: Kysely<DB>): Promise<string[]> {
  const applied = await appliedMigrations(db)
  return Object.keys(migrations)
    .sort()
    .filter((name) => !applied.has(name))
}

/** The schema version this mb expects: the name of its latest migration, e.g. `0009_mirror_maintenance`. */
export function expectedSchemaVersion(): string {
  return Object.keys(migrations).sort().at(-1)!
}

/** What to do with pending migrations; see `OpenOptions.schema` in ./index.ts. */
export type SchemaMode = 'check' | 'auto' | 'none'

/**
 * Applies or checks pending migrations on `database` as `mode` says.
 * @throws MbError SCHEMA_OUTDATED in `check` mode with migrations pending; what a migration throws
 */
export async function prepareSchema(database: Database, mode: SchemaMode): Promise<void> {
  if (mode === 'none') return
  const pending = await pendingMigrations(database.db)
  if (pending.length === 0) return
  if (mode === 'auto') {
    await migrateToLatest(database.db)
    return
  }
  throw new MbError(`The database schema at ${database.location} is outdated (${pending.length} pending migration(s): ${pending.join(', ')}). Run \`mb db migrate\` first.`, {
    code: 'SCHEMA_OUTDATED',
  })
}
