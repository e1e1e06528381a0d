/**
 * How a matched rule shapes a selection, the same for `mb serve` (redirects, metalinks, the
 * mirror list) and `mb file lookup`: a `mirrors` rule runs `select()` over its mirrors only,
 * an `origin` rule leaves the file to the origin, a `url` rule leaves the selection as it is
 * (the caller redirects to the rule's URL) and only names the rule.
 */
import {select} from '../select/index.js'
import type {SelectOptions} from '../select/options.js'
import type {ClientInfo, SelectFile, SelectMirror, Selection} from '../select/types.js'
import {type RuleMatch, ruleLocation} from './rule.js'

/**
 * `select()` under `rule` (or plainly without one); `selection.rule` names the rule.
 * Arguments as `select()` in src/lib/select/index.ts.
 */
export function selectUnderRule(
  rule: RuleMatch | undefined,
  client: ClientInfo,
  file: SelectFile,
  mirrors: ReadonlyMap<number, SelectMirror>,
  options: SelectOptions,
  explain: boolean,
  limit = Infinity,
): Selection {
  if (rule === undefined) return select(client, file, mirrors, options, explain, limit)
  const named: Selection['rule'] = {name: rule.name, target: rule.target}
  if (rule.target === 'origin') return {realm: null, ranked: [], excluded: [], origin: {reason: 'rule', detail: `rule ${rule.name} delivers this file from the origin`}, rule: named}
  const selection = select(client, file, rule.target === 'mirrors' ? (rule.rule.mirrors ?? mirrors) : mirrors, options, explain, limit)
  if (rule.target === 'url') named.url = ruleLocation(rule.rule, file.path)
  selection.rule = named
  return selection
}
