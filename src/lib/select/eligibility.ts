/**
 * Step 2 of `select()`: which mirrors may serve this request, by the rules of ./rules.ts.
 * Two walks over one table of rules: the explained walk gives every mirror a verdict; the
 * redirect walk visits only the mirrors that hold the file and reads what `MirrorTable`
 * compiled from the same rules.
 */
import type {MirrorTable} from './mirror.js'
import type {SelectOptions} from './options.js'
import type {Query} from './query.js'
import {firstExcluding} from './rules.js'
import type {Exclusion, SelectMirror} from './types.js'

/**
 * Every mirror of `table`, in table order: eligible ones are appended to `eligible`, the
 * others to `excluded` with the reason and detail of the first rule that excludes them.
 */
export function explainEligibility(table: MirrorTable, q: Query, eligible: SelectMirror[], excluded: Exclusion[]): void {
  const ids = q.file.mirrors
  for (let k = 0; k < ids.length; k++) if (table.byId[ids[k]] !== undefined) q.held[ids[k]] = q.generation
  for (const m of table.values()) {
    const rule = firstExcluding(m, q)
    if (rule === undefined) eligible.push(m)
    else excluded.push({mirror: m, reason: rule.reason as Exclusion['reason'], detail: rule.detail(m, q)})
  }
}

/**
 * The mirrors listed in the file's mirror set that are eligible, each once, in list order,
 * appended to `eligible`: the verdict of {@link explainEligibility} without the reasons.
 * The holding rules never exclude here; the `mirror` and `scheme` rules are one bit test
 * of `excludedFor`; only the `request` rules that apply to a mirror under `options` are
 * tested.
 */
export function eligibleHolders(table: MirrorTable, q: Query, options: SelectOptions, eligible: SelectMirror[]): void {
  const ids = q.file.mirrors
  const {byId, held, excludedFor} = table
  const requestRules = table.requestRules(options)
  const generation = q.generation
  const bit = q.schemeBit
  outer: for (let k = 0; k < ids.length; k++) {
    const id = ids[k]
    const m = byId[id]
    if (m === undefined || held[id] === generation) continue // not in the table, or listed twice
    held[id] = generation
    if ((excludedFor[id] & bit) !== 0) continue
    const rules = requestRules[id]
    for (let r = 0; r < rules.length; r++) if (rules[r].excludes(m, q)) continue outer
    eligible.push(m)
  }
}
