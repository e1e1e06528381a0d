import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type TableStats, tableStats} from '../../lib/db/table-stats.js'
import {renderTable} from '../../lib/output.js'
import {humanBytes} from '../../lib/stats/render.js'

export default class DbStats extends BaseCommand<typeof DbStats> {
  static override description = `Show each table's rows, size, dead rows and last vacuum and analyze

The figures are PostgreSQL's own statistics (pg_class, pg_stat_user_tables), on PostgreSQL and on the embedded store alike; rows are the statistics' estimate unless --exact counts them (a table never analyzed is counted when its heap is at most 16 MiB, else the planner guesses). Many dead rows and an old last vacuum on file or mirror_file_stale say that autovacuum is not keeping up with the scans (docs/operations.md, "Database upkeep").`
  static override examples = ['<%= config.bin %> db stats', '<%= config.bin %> db stats --exact --json']

  static override flags = {
    exact: Flags.boolean({description: 'count every table (a full read of each: seconds at millions of files) instead of the estimate', default: false}),
  }

  public async run(): Promise<{database: string; kind: string; tables: TableStats[]}> {
    const database = await this.openDb()
    const tables = await tableStats(database.db, this.flags.exact)
    const total = tables.reduce((sum, t) => sum + t.total_bytes, 0)
    this.print(
      `${database.backend} ${database.location}: ${tables.length} tables, ${humanBytes(total)} with indexes\n` +
        renderTable(tables, [
          {header: 'table', get: (t) => t.table},
          {header: this.flags.exact ? 'rows' : 'rows (est.)', get: (t) => String(t.rows)},
          {header: 'dead rows', get: (t) => String(t.dead_rows)},
          {header: 'size', get: (t) => humanBytes(t.table_bytes)},
          {header: 'with indexes', get: (t) => humanBytes(t.total_bytes)},
          {header: 'last vacuum (UTC)', get: (t) => t.last_vacuum ?? 'never'},
          {header: 'last analyze (UTC)', get: (t) => t.last_analyze ?? 'never'},
        ]),
    )
    return {database: database.location, kind: database.backend, tables}
  }
}
