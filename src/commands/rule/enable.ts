import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {setRuleEnabled} from '../../lib/rules/registry.js'
import type {RuleRecord} from '../../lib/rules/rule.js'

export default class RuleEnable extends BaseCommand<typeof RuleEnable> {
  static override description = 'Enable a redirect rule (a running `mb serve` applies it within seconds)'
  static override examples = ['<%= config.bin %> rule enable intlstore']

  static override args = {
    name: Args.string({description: 'the rule name', required: true}),
  }

  public async run(): Promise<RuleRecord> {
    const database = await this.openDb()
    const {rule, changed} = await setRuleEnabled(database.db, this.args.name, true)
    this.print(changed ? `Rule ${rule.name} enabled.` : `Rule ${rule.name} was already enabled.`)
    return rule
  }
}
