import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {setRuleEnabled} from '../../lib/rules/registry.js'
import type {RuleRecord} from '../../lib/rules/rule.js'

export default class RuleDisable extends BaseCommand<typeof RuleDisable> {
  static override description = 'Disable a redirect rule (a running `mb serve` applies it within seconds)'
  static override examples = ['<%= config.bin %> rule disable intlstore']

  static override args = {
    name: Args.string({description: 'the rule name', required: true}),
  }

  public async run(): Promise<RuleRecord> {
    const database = await this.openDb()
    const {rule, changed} = await setRuleEnabled(database.db, this.args.name, false)
    this.print(changed ? `Rule ${rule.name} disabled.` : `Rule ${rule.name} was already disabled.`)
    return rule
  }
}
