import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderTable} from '../../lib/output.js'
import {type CountmeRow, queryCountme} from '../../lib/stats/countme.js'
import {parseDay} from '../../lib/stats/query.js'

export default class StatsCountme extends BaseCommand<typeof StatsCountme> {
  static override description = `Show dnf's countme counts by repository

dnf adds countme=N to one /metalink or /mirrorlist request per system and week (countme=1 in its repository file); N says how old the system is, in dnf's buckets 1 (first week) to 4 (oldest). \`mb serve\` counts them per UTC day, repo and arch (docs/repositories.md); this sums them over the days given. Dates are UTC days, inclusive.`

  static override examples = ['<%= config.bin %> stats countme --since 7d', '<%= config.bin %> stats countme --since 2026-11-01 --until 2026-11-30 --json']

  static override flags = {
    since: Flags.string({description: 'first day: YYYY-MM-DD, today, yesterday, or back from today: 7d, 2w, 3m, 1y (default: all)'}),
    until: Flags.string({description: 'last day, same forms, e.g. 0d = today (default: no end)'}),
  }

  public async run(): Promise<{rows: CountmeRow[]}> {
    const since = this.flags.since === undefined ? undefined : parseDay(this.flags.since, '--since')
    const until = this.flags.until === undefined ? undefined : parseDay(this.flags.until, '--until')
    const database = await this.openDb()
    const rows = await queryCountme(database, {since, until})
    this.print(
      renderTable(rows, [
        {header: 'repo', get: (r) => r.repo},
        {header: 'arch', get: (r) => r.arch},
        {header: 'bucket 1', get: (r) => r.buckets[0]},
        {header: 'bucket 2', get: (r) => r.buckets[1]},
        {header: 'bucket 3', get: (r) => r.buckets[2]},
        {header: 'bucket 4', get: (r) => r.buckets[3]},
        {header: 'total', get: (r) => r.total},
      ]),
    )
    return {rows}
  }
}
