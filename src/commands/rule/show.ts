import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderRecord} from '../../lib/output.js'
import {resolveRule} from '../../lib/rules/registry.js'
import {ruleEntries} from '../../lib/rules/render.js'
import type {RuleRecord} from '../../lib/rules/rule.js'

export default class RuleShow extends BaseCommand<typeof RuleShow> {
  static override description = 'Show one redirect rule'
  static override examples = ['<%= config.bin %> rule show intlstore', '<%= config.bin %> rule show intlstore --json']

  static override args = {
    name: Args.string({description: 'the rule name', required: true}),
  }

  public async run(): Promise<RuleRecord> {
    const database = await this.openDb()
    const rule = await resolveRule(database.db, this.args.name)
    this.print(renderRecord(ruleEntries(rule)))
    return rule
  }
}
