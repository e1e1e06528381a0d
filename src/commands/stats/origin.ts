import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderTable} from '../../lib/output.js'
import {ORIGIN_METER_REASONS, type OriginShareRow, queryOriginShare} from '../../lib/stats/origin.js'
import {parseDay} from '../../lib/stats/query.js'
import {humanBytes} from '../../lib/stats/render.js'

export default class StatsOrigin extends BaseCommand<typeof StatsOrigin> {
  static override description = `Show the origin's share of the downloads per day, by reason

\`mb serve\` counts every byte the origin delivers itself by why (docs/operations.md, "The origin's share"): no_mirror (no eligible mirror holds the file), origin_only, index_stale (a version no mirror has yet), small_file, fallback (/_origin/ URLs), rule, local_network (select.exclude_clients), other. This sets them against the bytes of each UTC day's downloads (redirected or delivered). Dates are UTC days, inclusive.`

  static override examples = ['<%= config.bin %> stats origin --since 7d', '<%= config.bin %> stats origin --since 2026-11-01 --until 2026-11-30 --json']

  static override flags = {
    since: Flags.string({description: 'first day: YYYY-MM-DD, today, yesterday, or back from today: 7d, 2w, 3m, 1y (default: all)'}),
    until: Flags.string({description: 'last day, same forms, e.g. 0d = today (default: no end)'}),
  }

  public async run(): Promise<{rows: OriginShareRow[]}> {
    const since = this.flags.since === undefined ? undefined : parseDay(this.flags.since, '--since')
    const until = this.flags.until === undefined ? undefined : parseDay(this.flags.until, '--until')
    const database = await this.openDb()
    const rows = await queryOriginShare(database, {since, until})
    this.print(
      renderTable(rows, [
        {header: 'day', get: (r) => r.day},
        {header: 'downloads', get: (r) => humanBytes(r.downloadBytes)},
        {header: 'origin', get: (r) => humanBytes(r.originBytes)},
        {header: 'share', get: (r) => `${(r.share * 100).toFixed(1)}%`},
        ...ORIGIN_METER_REASONS.map((reason) => ({header: reason, get: (r: OriginShareRow) => humanBytes(r.byReason[reason])})),
      ]),
    )
    return {rows}
  }
}
