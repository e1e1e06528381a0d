/**
 * Human output of redirect rules for `mb rule list/show/add/edit`: the conditions and the
 * target in words, and a record of every field.
 */
import type {RuleRecord} from './rule.js'

/** The client conditions of a rule in words (`country not US,CA; AS 3320`), or `any client`. */
function ruleConditions(r: RuleRecord): string {
  const parts: string[] = []
  if (r.countries.length > 0) parts.push(`country ${r.countries.join(',')}`)
  if (r.not_countries.length > 0) parts.push(`country not ${r.not_countries.join(',')}`)
  if (r.continents.length > 0) parts.push(`continent ${r.continents.join(',')}`)
  if (r.clients.length > 0) parts.push(`client ${r.clients.join(',')}`)
  if (r.asns.length > 0) parts.push(`AS ${r.asns.join(',')}`)
  return parts.length === 0 ? 'any client' : parts.join('; ')
}

/** The target of a rule in words: `302 https://… (+path)`, `mirrors a,b`, `origin`. */
function ruleTarget(r: RuleRecord): string {
  if (r.target === 'url') return `${r.status} ${r.url}${r.append_path ? ' (+path)' : ''}`
  if (r.target === 'mirrors') return `mirrors ${r.mirrors.join(',')}`
  return 'origin'
}

/** The `mb rule list` columns. */
export const RULE_LIST_COLUMNS = [
  {header: 'priority', get: (r: RuleRecord) => r.priority},
  {header: 'name', get: (r: RuleRecord) => r.name},
  {header: 'enabled', get: (r: RuleRecord) => (r.enabled ? 'yes' : 'no')},
  {header: 'path', get: (r: RuleRecord) => r.path_glob},
  {header: 'when', get: (r: RuleRecord) => ruleConditions(r)},
  {header: 'target', get: (r: RuleRecord) => ruleTarget(r)},
]

/** Every field of a rule as `key: value` entries (for `renderRecord`). */
export function ruleEntries(r: RuleRecord): Array<[string, unknown]> {
  return [
    ['name', r.name],
    ['priority', r.priority],
    ['enabled', r.enabled ? 'yes' : 'no'],
    ['path', r.path_glob],
    ['when', ruleConditions(r)],
    ['target', ruleTarget(r)],
    ['comment', r.comment],
  ]
}
