import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderRecord} from '../../lib/output.js'
import {editRule} from '../../lib/rules/registry.js'
import {ruleEntries} from '../../lib/rules/render.js'
import type {RuleRecord} from '../../lib/rules/rule.js'
import {ruleFieldFlags, ruleInputFromFlags} from './add.js'

export default class RuleEdit extends BaseCommand<typeof RuleEdit> {
  static override description = `Change a redirect rule: only the flags given change; an empty list value (--country '') clears that condition

A new target (--to, --mirrors, --origin) replaces the old one. Bad values are refused and nothing is written.`
  static override examples = [
    '<%= config.bin %> rule edit intlstore --not-country US,CA,MX',
    '<%= config.bin %> rule edit cn --mirrors mirror.example.cn --priority 5',
    '<%= config.bin %> rule edit intlstore --rename intl-store',
  ]

  static override args = {
    name: Args.string({description: 'the rule name', required: true}),
  }

  static override flags = {
    ...ruleFieldFlags,
    rename: Flags.string({description: 'new name for the rule'}),
  }

  public async run(): Promise<RuleRecord & {changed: string[]}> {
    const database = await this.openDb()
    const {rule, changed} = await editRule(database.db, this.args.name, {...ruleInputFromFlags(this.flags), name: this.flags.rename})
    this.print(`${changed.length === 0 ? `Rule ${rule.name} unchanged.` : `Changed rule ${rule.name}: ${changed.join(', ')}.`}\n${renderRecord(ruleEntries(rule))}`)
    return {...rule, changed}
  }
}
