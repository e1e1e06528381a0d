/**
 * The redirect rules in the store (`redirect_rule`, migration 0017): add, edit, remove,
 * enable/disable, list and show. Every write validates first (./validate.ts) and runs in one
 * transaction, so a bad value, an unknown mirror or a name clash changes nothing. A running
 * `mb serve` picks a change up with its next snapshot refresh (NOTIFY, else within
 * `serve.poll_seconds`; docs/change-tracking.md).
 */
import {type Kysely, sql, type Transaction} from 'kysely'
import type {DB} from '../db/schema.js'
import {MbError} from '../errors.js'
import {isoDay} from '../time.js'
import {RULES_SQL, type RuleRecord, ruleFromJson} from './rule.js'
import {mergeRuleInput, type RuleInput, type RuleValues, validateRuleName} from './validate.js'

type Db = Kysely<DB> | Transaction<DB>

/** Gap between the default priorities of rules added one after the other. */
const PRIORITY_STEP = 10

/** Every rule in the order `mb serve` tries them (priority, then name). */
export async function listRules(db: Db): Promise<RuleRecord[]> {
  const result = await sql<{row_to_json: string}>`${sql.raw(RULES_SQL)}`.execute(db)
  return result.rows.map((row) => ruleFromJson(Object.values(row)[0] as string))
}

/**
 * The rule named `name` (exact, then ignoring case).
 * @throws MbError RULE_NOT_FOUND
 */
export async function resolveRule(db: Db, name: string): Promise<RuleRecord> {
  const rules = await listRules(db)
  const wanted = name.trim()
  const found = rules.find((r) => r.name === wanted) ?? rules.find((r) => r.name.toLowerCase() === wanted.toLowerCase())
  if (found === undefined) throw new MbError(`No redirect rule named "${wanted}". Run \`mb rule list\` to see the rules.`, {code: 'RULE_NOT_FOUND'})
  return found
}

/**
 * The registered identifiers of `names` (matched ignoring case), in the order given.
 * @throws MbError MIRROR_NOT_FOUND naming every unknown mirror
 */
async function checkMirrors(db: Db, names: readonly string[]): Promise<string[]> {
  if (names.length === 0) return []
  const rows = await db.selectFrom('mirror').select('identifier').execute()
  const byLower = new Map(rows.map((r) => [r.identifier.toLowerCase(), r.identifier]))
  const unknown = names.filter((n) => !byLower.has(n.toLowerCase()))
  if (unknown.length > 0) {
    throw new MbError(`Unknown mirror${unknown.length === 1 ? '' : 's'} in --mirrors: ${unknown.join(', ')}. Run \`mb mirror list\` for the registered names. Nothing was changed.`, {
      code: 'MIRROR_NOT_FOUND',
    })
  }
  return names.map((n) => byLower.get(n.toLowerCase())!)
}

async function assertNameFree(db: Db, name: string, exceptId?: number): Promise<void> {
  const rules = await listRules(db)
  const clash = rules.find((r) => r.name.toLowerCase() === name.toLowerCase() && r.id !== exceptId)
  if (clash) throw new MbError(`A redirect rule named "${clash.name}" already exists. Use \`mb rule edit ${clash.name}\` to change it, or pick another name.`, {code: 'RULE_EXISTS'})
}

/** The stored columns of `v` (arrays as PostgreSQL array literals through the driver). */
function columns(v: RuleValues) {
  return {
    name: v.name,
    priority: v.priority,
    enabled: v.enabled,
    path_glob: v.path_glob,
    countries: v.countries,
    not_countries: v.not_countries,
    continents: v.continents,
    clients: v.clients,
    asns: v.asns,
    target: v.target,
    url: v.url,
    append_path: v.append_path,
    mirrors: v.mirrors,
    status: v.status,
    comment: v.comment,
  }
}

/**
 * Adds a rule. Without `--priority` it goes after every rule there is (the highest priority
 * plus 10, or 100 for the first).
 * @throws UsageError INVALID_RULE_FIELD (no target, bad values); MbError RULE_EXISTS, MIRROR_NOT_FOUND
 */
export async function addRule(db: Kysely<DB>, name: string, input: RuleInput): Promise<RuleRecord> {
  const checkedName = validateRuleName(name)
  return db.transaction().execute(async (trx) => {
    await assertNameFree(trx, checkedName)
    const [{max}] = await trx.selectFrom('redirect_rule').select(sql<number | null>`max(priority)`.as('max')).execute()
    const base: RuleValues = {
      name: checkedName,
      priority: max === null ? 100 : Number(max) + PRIORITY_STEP,
      enabled: true,
      path_glob: '',
      countries: [],
      not_countries: [],
      continents: [],
      clients: [],
      asns: [],
      target: 'origin',
      url: null,
      append_path: false,
      mirrors: [],
      status: 302,
      comment: null,
    }
    if (input.to === undefined && input.mirrors === undefined && !input.origin) {
      throw new MbError('A rule needs a target: --to URL (redirect there), --mirrors NAME,… (select among those mirrors) or --origin (deliver locally). Nothing was changed.', {
        code: 'INVALID_RULE_FIELD',
      })
    }
    if (input.path === undefined) throw new MbError('A rule needs --path GLOB, e.g. --path "store/**" (quote it). Nothing was changed.', {code: 'INVALID_RULE_FIELD'})
    const values = mergeRuleInput(base, {...input, name: undefined})
    values.mirrors = await checkMirrors(trx, values.mirrors)
    await trx.insertInto('redirect_rule').values(columns(values)).execute()
    return resolveRule(trx, checkedName)
  })
}

/**
 * Changes the given fields of a rule (`input.name` renames it).
 * @returns the rule after the change and the names of the fields that changed
 * @throws as {@link addRule}, and RULE_NOT_FOUND
 */
export async function editRule(db: Kysely<DB>, name: string, input: RuleInput): Promise<{rule: RuleRecord; changed: string[]}> {
  return db.transaction().execute(async (trx) => {
    const current = await resolveRule(trx, name)
    const {id, ...base} = current
    const values = mergeRuleInput(base, input)
    if (values.name !== current.name) await assertNameFree(trx, values.name, id)
    if (input.mirrors !== undefined) values.mirrors = await checkMirrors(trx, values.mirrors)
    const changed = (Object.keys(values) as Array<keyof RuleValues>).filter((k) => JSON.stringify(values[k]) !== JSON.stringify(base[k]))
    if (changed.length > 0)
      await trx
        .updateTable('redirect_rule')
        .set({...columns(values), updated_at: sql`now()`})
        .where('id', '=', id)
        .execute()
    return {rule: await resolveRule(trx, values.name), changed}
  })
}

/** Removes a rule (its hit counts stay in `rule_hit_daily`). @throws MbError RULE_NOT_FOUND */
export async function removeRule(db: Kysely<DB>, name: string): Promise<RuleRecord> {
  return db.transaction().execute(async (trx) => {
    const rule = await resolveRule(trx, name)
    await trx.deleteFrom('redirect_rule').where('id', '=', rule.id).execute()
    return rule
  })
}

/**
 * Enables or disables a rule.
 * @returns the rule after the change and whether it changed
 * @throws MbError RULE_NOT_FOUND
 */
export async function setRuleEnabled(db: Kysely<DB>, name: string, enabled: boolean): Promise<{rule: RuleRecord; changed: boolean}> {
  return db.transaction().execute(async (trx) => {
    const rule = await resolveRule(trx, name)
    if (rule.enabled === enabled) return {rule, changed: false}
    await trx.updateTable('redirect_rule').set({enabled, updated_at: sql`now()`}).where('id', '=', rule.id).execute()
    return {rule: {...rule, enabled}, changed: true}
  })
}

/** Hits of each rule over a range of UTC days (inclusive; undefined = open), most hits first. */
export async function ruleHits(db: Db, since?: string, until?: string): Promise<Array<{rule: string; hits: number}>> {
  let query = db.selectFrom('rule_hit_daily').select(['rule', sql<string>`sum(hits)::text`.as('hits')])
  if (since !== undefined) query = query.where('day', '>=', sql<Date>`${since}::date`)
  if (until !== undefined) query = query.where('day', '<=', sql<Date>`${until}::date`)
  const rows = await query.groupBy('rule').orderBy(sql`sum(hits)`, 'desc').orderBy('rule').execute()
  return rows.map((r) => ({rule: r.rule, hits: Number(r.hits)}))
}

/** Adds `hits` (rule name → count) to the day of `dayMs` (Unix ms, UTC) in one upsert. */
export async function addRuleHits(db: Db, dayMs: number, hits: ReadonlyMap<string, number>): Promise<void> {
  if (hits.size === 0) return
  const day = isoDay(dayMs)
  await db
    .insertInto('rule_hit_daily')
    .values([...hits].map(([rule, n]) => ({day, rule, hits: n})))
    .onConflict((oc) => oc.columns(['day', 'rule']).doUpdateSet({hits: sql`rule_hit_daily.hits + excluded.hits`}))
    .execute()
}
