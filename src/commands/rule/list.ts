import {BaseCommand} from '../../base-command.js'
import {renderTable} from '../../lib/output.js'
import {listRules} from '../../lib/rules/registry.js'
import {RULE_LIST_COLUMNS} from '../../lib/rules/render.js'
import type {RuleRecord} from '../../lib/rules/rule.js'

export default class RuleList extends BaseCommand<typeof RuleList> {
  static override description = 'List the redirect rules in the order `mb serve` tries them (ascending priority, then name)'
  static override examples = ['<%= config.bin %> rule list', '<%= config.bin %> rule list --json']

  public async run(): Promise<RuleRecord[]> {
    const database = await this.openDb()
    const rules = await listRules(database.db)
    this.print(renderTable(rules, RULE_LIST_COLUMNS))
    return rules
  }
}
