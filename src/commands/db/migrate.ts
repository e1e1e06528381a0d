import {BaseCommand} from '../../base-command.js'
import {migrateToLatest} from '../../lib/db/migrate.js'

export default class DbMigrate extends BaseCommand<typeof DbMigrate> {
  static override description = 'Apply pending schema migrations (PostgreSQL or the embedded store)'
  static override examples = ['<%= config.bin %> db migrate', 'MB_DATABASE_URL=postgres://mb@db/mb <%= config.bin %> db migrate --json']

  public async run(): Promise<{database: string; applied: string[]}> {
    const database = await this.openDb({schema: 'none', create: true})
    const applied = await migrateToLatest(database.db)
    this.print(applied.length === 0 ? `Schema of ${database.location} is up to date.` : `Applied ${applied.length} migration(s) to ${database.location}: ${applied.join(', ')}`)
    return {database: database.location, applied}
  }
}
