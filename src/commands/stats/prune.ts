import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderRecord} from '../../lib/output.js'
import {retentionPolicy} from '../../lib/stats/config.js'
import {pruneStats, type PruneResult} from '../../lib/stats/prune.js'

export default class StatsPrune extends BaseCommand<typeof StatsPrune> {
  static override description = `Apply the statistics retention policy

Daily rows older than stats.daily_retention_days (default 90) are added into the monthly rows of their month and deleted, in one transaction; monthly rows older than stats.monthly_retention_months (default 120) are deleted. Totals over any range stay the same. \`mb serve\` does this once a day; run it from cron when no server runs.`

  static override examples = ['<%= config.bin %> stats prune', '<%= config.bin %> stats prune --daily-retention-days 30 --json']

  static override flags = {
    'daily-retention-days': Flags.integer({description: 'keep daily rows for this many days (config stats.daily_retention_days)', min: 1}),
    'monthly-retention-months': Flags.integer({description: 'keep monthly rows for this many months (config stats.monthly_retention_months)', min: 1}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {'stats.daily_retention_days': this.flags['daily-retention-days'], 'stats.monthly_retention_months': this.flags['monthly-retention-months']}
  }

  public async run(): Promise<PruneResult> {
    const policy = retentionPolicy(this.mbConfig.stats)
    const database = await this.openDb()
    const result = await pruneStats(database, policy)
    this.print(
      renderRecord([
        ['daily rows before', result.daily_cutoff],
        ['rolled up', `${result.daily_rows_rolled_up} daily rows (${result.downloads_rolled_up} downloads) into ${result.monthly_rows_touched} monthly rows`],
        ['monthly rows before', result.monthly_cutoff],
        ['deleted', `${result.monthly_rows_deleted} monthly rows`],
      ]),
    )
    return result
  }
}
