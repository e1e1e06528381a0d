import {BaseCommand} from '../../base-command.js'
import {migrationStatus} from '../../lib/db/migrate.js'
import {renderTable} from '../../lib/output.js'

export default class DbStatus extends BaseCommand<typeof DbStatus> {
  static override description = 'Show which schema migrations are applied'
  static override examples = ['<%= config.bin %> db status', '<%= config.bin %> db status --json']

  public async run(): Promise<{database: string; kind: string; current: boolean; migrations: Array<{name: string; applied: boolean; applied_at: string | null}>}> {
    const database = await this.openDb({schema: 'none'})
    const states = await migrationStatus(database.db)
    const current = states.every((s) => s.applied)
    this.print(
      `${database.backend} ${database.location}: ${current ? 'up to date' : 'pending migrations, run `mb db migrate`'}\n` +
        renderTable(states, [
          {header: 'migration', get: (s) => s.name},
          {header: 'applied', get: (s) => (s.applied ? 'yes' : 'no')},
          {header: 'applied at (UTC)', get: (s) => s.appliedAt},
        ]),
    )
    return {database: database.location, kind: database.backend, current, migrations: states.map((s) => ({name: s.name, applied: s.applied, applied_at: s.appliedAt?.toISOString() ?? null}))}
  }
}
