import {writeFileSync} from 'node:fs'
import {resolve} from 'node:path'
import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {MbError, UsageError} from '../../lib/errors.js'
import {renderTable} from '../../lib/output.js'
import {ruleHits} from '../../lib/rules/registry.js'
import {type DemandTotals, demandTotals} from '../../lib/scan/demand-store.js'
import {GROUPINGS, type Grouping, parseDay, queryStats, type StatsResult} from '../../lib/stats/query.js'
import {barChart, fillDays, htmlReport, humanBytes, sparkline, statsCsv} from '../../lib/stats/render.js'

export default class Stats extends BaseCommand<typeof Stats> {
  static override description = `Show download statistics from the daily and monthly aggregates

A download is a GET answered by a redirect or by local delivery; Range continuations, HEADs, metalinks, hashes, mirror lists, .torrent and .zsync files and 304s are counted as other requests, metalinks and the rest for the file they describe (PATH.meta4 as PATH). Dates are UTC days, inclusive. Monthly rollups (rows older than the daily retention) count whole when their month overlaps the range; --by day labels them YYYY-MM. With --limit, the groups beyond N are summed in one "(other)" row, so the rows always add up to the total.

Below the table (and as rule_hits in --json), the requests each redirect rule answered in the date range (\`mb rule\`; --path and --mirror do not filter them), and (as demand_scans) the scans on demand of \`mb serve\` (scan.demand): folders scanned, mirror scans (failed ones apart) and the copies they found.`

  static override examples = [
    '<%= config.bin %> stats --by mirror --since 30d',
    '<%= config.bin %> stats --by file --path distribution/leap/ --limit 20',
    '<%= config.bin %> stats --by day --since 2026-11-01 --until 2026-11-30',
    '<%= config.bin %> stats --by country --mirror ftp.example.de --json',
    '<%= config.bin %> stats --by month --since 1y --csv > monthly.csv',
    '<%= config.bin %> stats --since 30d --html /var/www/stats/index.html',
  ]

  static override flags = {
    by: Flags.string({description: 'group by', options: [...GROUPINGS], default: 'file'}),
    since: Flags.string({description: 'first day: YYYY-MM-DD, today, yesterday, or back from today: 7d, 2w, 3m, 1y (default: all)'}),
    until: Flags.string({description: 'last day, same forms, e.g. 0d = today (default: no end)'}),
    path: Flags.string({description: 'only paths starting with this prefix'}),
    mirror: Flags.string({description: "only this mirror (identifier), or 'origin' for local delivery"}),
    limit: Flags.integer({description: 'show the top N groups; the rest is summed in an "(other)" row', min: 1}),
    csv: Flags.boolean({description: 'print CSV for spreadsheets instead of a table', exclusive: ['html']}),
    html: Flags.string({description: 'write a self-contained HTML report (top files, mirror shares, countries, downloads per day) to FILE'}),
  }

  public async run(): Promise<StatsResult & {html?: string; rule_hits: Array<{rule: string; hits: number}>; demand_scans: DemandTotals}> {
    const flags = this.flags
    if (flags.csv && this.jsonEnabled()) throw new UsageError('--csv and --json exclude each other: pick one output format.')
    const since = flags.since === undefined ? undefined : parseDay(flags.since, '--since')
    const until = flags.until === undefined ? undefined : parseDay(flags.until, '--until')
    const by = flags.by as Grouping
    const database = await this.openDb()
    const base = {since, until, pathPrefix: flags.path, mirror: flags.mirror}
    const result = await queryStats(database, {...base, by, limit: flags.limit})
    const hits = await ruleHits(database.db, since, until)
    const demand = await demandTotals(database.db, since, until)

    let html: string | undefined
    if (flags.html) {
      html = resolve(flags.html)
      const [files, mirrors, countries, days] = await Promise.all([
        by === 'file' ? result : queryStats(database, {...base, by: 'file', limit: flags.limit ?? 25}),
        queryStats(database, {...base, by: 'mirror'}),
        queryStats(database, {...base, by: 'country', limit: 30}),
        queryStats(database, {...base, by: 'day'}),
      ])
      const page = htmlReport({
        title: 'Download statistics',
        generatedAt: new Date(),
        filter: {since: since ?? null, until: until ?? null, path: flags.path, mirror: flags.mirror},
        files,
        mirrors,
        countries,
        days,
      })
      try {
        writeFileSync(html, page)
      } catch (error) {
        throw new MbError(`Cannot write the report to ${html}: ${(error as Error).message}. Check the directory exists and is writable.`, {code: 'WRITE_FAILED'})
      }
    }

    if (flags.csv) {
      process.stdout.write(statsCsv(result))
    } else if (html) {
      this.print(`Wrote the report to ${html} (${result.total.downloads} downloads, ${result.groups} ${by} groups).`)
    } else {
      const tty = Boolean(process.stdout.isTTY)
      const rows = result.other ? [...result.rows, result.other] : result.rows
      const table = renderTable(
        [...rows, {key: 'total', ...result.total}],
        [
          {header: by, get: (r) => r.key},
          {header: 'downloads', get: (r) => r.downloads},
          {header: 'bytes', get: (r) => (tty ? humanBytes(r.bytes) : r.bytes)},
          {header: 'other requests', get: (r) => r.other_requests},
        ],
        tty,
      )
      this.print(table)
      if (by === 'day' && tty && result.rows.length > 0) {
        const series = fillDays(result.rows)
        this.print(`\n${barChart(series)}\n\n${sparkline(series.map((r) => r.downloads))}`)
      }
      if (hits.length > 0)
        this.print(
          `\nrule hits:\n${renderTable(
            hits,
            [
              {header: 'rule', get: (r) => r.rule},
              {header: 'hits', get: (r) => r.hits},
            ],
            tty,
          )}`,
        )
      if (demand.folder_scans > 0)
        this.print(`\nscans on demand: ${demand.folder_scans} folder(s), ${demand.mirror_scans} mirror scan(s) (${demand.failed} failed), ${demand.files_found} file(s) found`)
    }
    const extra = {rule_hits: hits, demand_scans: demand}
    return html ? {...result, html, ...extra} : {...result, ...extra}
  }
}
