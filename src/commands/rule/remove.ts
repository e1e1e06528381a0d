import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {removeRule} from '../../lib/rules/registry.js'
import type {RuleRecord} from '../../lib/rules/rule.js'

export default class RuleRemove extends BaseCommand<typeof RuleRemove> {
  static override description = 'Remove a redirect rule (its hit counts stay in the statistics)'
  static override examples = ['<%= config.bin %> rule remove intlstore']

  static override args = {
    name: Args.string({description: 'the rule name', required: true}),
  }

  public async run(): Promise<RuleRecord> {
    const database = await this.openDb()
    const rule = await removeRule(database.db, this.args.name)
    this.print(`Removed rule ${rule.name}.`)
    return rule
  }
}
