import {BaseCommand} from '../../base-command.js'
import {migrationStatus} from '../../lib/db/migrate.js'
import {openReadReplica, type ReplicaLag, replicaLag} from '../../lib/db/replica.js'
import {errorMessage} from '../../lib/errors.js'
import {redact} from '../../lib/redact.js'
import {renderTable} from '../../lib/output.js'

/** The standby of `database_read_url` as `mb db status --json` shows it. */
interface ReplicaStatus {
  database: string
  reachable: boolean
  standby: boolean | null
  streaming: boolean | null
  replayed_at: string | null
  lag_seconds: number | null
  error: string | null
}

export default class DbStatus extends BaseCommand<typeof DbStatus> {
  static override description = `Show which schema migrations are applied

With database_read_url (MB_DATABASE_READ_URL) set, also the standby that \`mb serve\` reads its snapshot from, and how many seconds it trails the primary.`
  static override examples = ['<%= config.bin %> db status', '<%= config.bin %> db status --json']

  public async run(): Promise<{
    database: string
    kind: string
    current: boolean
    migrations: Array<{name: string; applied: boolean; applied_at: string | null}>
    replica?: ReplicaStatus
  }> {
    const database = await this.openDb({schema: 'none'})
    const states = await migrationStatus(database.db)
    const current = states.every((s) => s.applied)
    const readUrl = this.mbConfig.database_read_url
    const replica = readUrl ? await readReplicaStatus(readUrl) : undefined
    this.print(
      `${database.backend} ${database.location}: ${current ? 'up to date' : 'pending migrations, run `mb db migrate`'}\n` +
        (replica ? `${replicaLine(replica)}\n` : '') +
        renderTable(states, [
          {header: 'migration', get: (s) => s.name},
          {header: 'applied', get: (s) => (s.applied ? 'yes' : 'no')},
          {header: 'applied at (UTC)', get: (s) => s.appliedAt},
        ]),
    )
    return {
      database: database.location,
      kind: database.backend,
      current,
      migrations: states.map((s) => ({name: s.name, applied: s.applied, applied_at: s.appliedAt?.toISOString() ?? null})),
      ...(replica ? {replica} : {}),
    }
  }
}

/** The standby at `url`: its lag, or why it cannot be read (an unreachable standby is reported, not an error). */
async function readReplicaStatus(url: string): Promise<ReplicaStatus> {
  let location = redact(url)
  try {
    const replica = await openReadReplica(url, {poolSize: 1})
    location = replica.location
    let lag: ReplicaLag
    try {
      lag = await replicaLag(replica)
    } finally {
      await replica.close()
    }
    return {database: location, reachable: true, standby: lag.standby, streaming: lag.streaming, replayed_at: lag.replayedAt?.toISOString() ?? null, lag_seconds: lag.lagSeconds, error: null}
  } catch (error) {
    return {database: location, reachable: false, standby: null, streaming: null, replayed_at: null, lag_seconds: null, error: errorMessage(error)}
  }
}

/** One line on the standby for the human output. */
function replicaLine(r: ReplicaStatus): string {
  if (!r.reachable) return `read replica: unreachable: ${r.error}`
  if (!r.standby) return `read replica ${r.database}: not a standby (not in recovery); it trails nothing`
  const lag = r.lag_seconds === null ? 'lag unknown (nothing replayed since it started)' : `lag ${r.lag_seconds.toFixed(1)} s`
  return `read replica ${r.database}: ${lag}, ${r.streaming ? 'streaming' : 'NOT streaming from the primary'}, last replayed commit ${r.replayed_at ?? 'none'}`
}
