/**
 * Redirect rules as `mb serve` applies them: compiled once per snapshot (glob matchers,
 * country and AS sets, CIDRs, the mirror subset of a `mirrors` target), then tried in order
 * per request before mirror selection. The first rule whose every condition holds wins.
 *
 * This is the geo redirect of Mozilla's store ("everyone outside US and CA goes to the
 * international store", a ZXTM TrafficScript rule; ../../../docs/selection.md "Redirect
 * rules") generalised: a path glob, client conditions that all must hold, and a target.
 */
import picomatch from 'picomatch'
import {type Cidr, parseCidr} from '../net.js'
import {MirrorTable} from '../select/mirror.js'
import type {ClientInfo, SelectMirror} from '../select/types.js'
import {encodePath} from '../select/url.js'

/** Where a matching rule sends the request. */
export type RuleTarget = 'url' | 'mirrors' | 'origin'

/** The HTTP statuses a `url` rule may answer with (RFC 9110 §15.4.2, §15.4.3, §15.4.8). */
export const RULE_STATUSES = [301, 302, 307] as const

/** A rule as stored (`redirect_rule`, migration 0017), in the shape the CLI prints as JSON. */
export interface RuleRecord {
  id: number
  name: string
  /** Rules are tried in ascending priority, then by name. */
  priority: number
  enabled: boolean
  /** picomatch glob of origin-relative paths (`dot: true`); without a `/` it matches basenames anywhere. */
  path_glob: string
  /** ISO 3166-1 alpha-2 codes: the client's country must be one of them (empty: any). */
  countries: string[]
  /** The client's country must not be one of these; an unknown country is not one of them. */
  not_countries: string[]
  /** Continent codes (AF AN AS EU NA OC SA): the client's must be one of them (empty: any). */
  continents: string[]
  /** Canonical CIDRs: the client address must lie in one of them (empty: any). */
  clients: string[]
  /** AS numbers: the client's AS must be one of them (empty: any). */
  asns: number[]
  target: RuleTarget
  /** The http(s) URL of a `url` target, else null. */
  url: string | null
  /** `url` target: append the part of the path below the glob's literal directory. */
  append_path: boolean
  /** Mirror identifiers of a `mirrors` target, else empty. */
  mirrors: string[]
  /** Status of a `url` redirect: 301, 302 or 307. */
  status: number
  comment: string | null
}

/** A rule compiled for matching (built per snapshot, never per request). */
export interface CompiledRule {
  readonly record: RuleRecord
  readonly matchPath: (path: string) => boolean
  /** Length of the glob's literal directory prefix including its `/` (what `--append-path` strips), 0 when none. */
  readonly baseLength: number
  readonly countries: ReadonlySet<string> | undefined
  readonly notCountries: ReadonlySet<string> | undefined
  readonly continents: ReadonlySet<string> | undefined
  readonly clients: readonly Cidr[] | undefined
  readonly asns: ReadonlySet<number> | undefined
  /** `mirrors` target: the named mirrors that exist in the snapshot, as a table `select()` takes. */
  readonly mirrors: MirrorTable | undefined
}

/** What a matching rule decided for one request. */
export interface RuleMatch {
  rule: CompiledRule
  /** The rule's name (for `X-MB-Rule`, statistics and explanations). */
  name: string
  target: RuleTarget
}

function setOf<T>(values: readonly T[]): ReadonlySet<T> | undefined {
  return values.length === 0 ? undefined : new Set(values)
}

/**
 * The length of the literal directory at the start of `glob`, with its `/` (picomatch.scan's
 * `base`): `downloads/**` → 10, `**\/*.iso` → 0, `a/b.iso` (no glob) → 2.
 */
export function globBaseLength(glob: string): number {
  const scan = picomatch.scan(glob)
  if (!scan.isGlob) {
    const slash = glob.lastIndexOf('/')
    return slash < 0 ? 0 : slash + 1
  }
  return scan.base ? scan.base.length + 1 : 0
}

/**
 * Compiles one stored rule against the snapshot's mirrors. A `mirrors` target keeps the named
 * mirrors that exist (a mirror removed since the rule was written is dropped; with none left,
 * selection finds no mirror and the origin delivers).
 * @throws UsageError when a stored CIDR is malformed (a row edited in SQL)
 */
function compileRule(record: RuleRecord, mirrors: ReadonlyMap<number, SelectMirror>): CompiledRule {
  // A plain regular expression is several times faster than picomatch's matcher function;
  // a glob without a `/` is tested on the basename, as picomatch's `basename` option does.
  const regex = picomatch.makeRe(record.path_glob, {dot: true})
  const onBasename = !record.path_glob.includes('/')
  let table: MirrorTable | undefined
  if (record.target === 'mirrors') {
    const wanted = new Set(record.mirrors.map((m) => m.toLowerCase()))
    const chosen: SelectMirror[] = []
    for (const m of mirrors.values()) if (wanted.has(m.identifier.toLowerCase())) chosen.push(m)
    table = new MirrorTable(chosen)
  }
  return {
    record,
    matchPath: onBasename ? (path) => regex.test(path.slice(path.lastIndexOf('/') + 1)) : (path) => regex.test(path),
    baseLength: globBaseLength(record.path_glob),
    countries: setOf(record.countries),
    notCountries: setOf(record.not_countries),
    continents: setOf(record.continents),
    clients: record.clients.length === 0 ? undefined : record.clients.map((c) => parseCidr(c)),
    asns: setOf(record.asns.map(Number)),
    mirrors: table,
  }
}

/** True when every client condition of `rule` holds for `client` (the path is tested apart). */
function clientMatches(rule: CompiledRule, client: ClientInfo): boolean {
  const country = client.country
  if (rule.countries !== undefined && (country === undefined || !rule.countries.has(country))) return false
  if (rule.notCountries !== undefined && country !== undefined && rule.notCountries.has(country)) return false
  if (rule.continents !== undefined && (client.continent === undefined || !rule.continents.has(client.continent))) return false
  if (rule.asns !== undefined && (client.asn === undefined || !rule.asns.has(client.asn))) return false
  if (rule.clients !== undefined) {
    const address = client.address
    if (address === undefined) return false
    let inside = false
    for (const cidr of rule.clients) {
      if (cidr[0].kind() === address.kind() && address.match(cidr as never)) {
        inside = true
        break
      }
    }
    if (!inside) return false
  }
  return true
}

/** The enabled rules of a snapshot, in the order they are tried. */
export class RuleSet {
  /** Enabled rules, ascending priority then name. */
  readonly rules: readonly CompiledRule[]

  constructor(rules: readonly CompiledRule[] = []) {
    this.rules = rules.filter((r) => r.record.enabled)
  }

  /** No enabled rule: the request path skips rule matching entirely. */
  get empty(): boolean {
    return this.rules.length === 0
  }

  /**
   * The first enabled rule matching `path` (origin-relative, decoded) and `client`, or
   * undefined. Cheap for no rules (one length test).
   */
  match(path: string, client: ClientInfo): RuleMatch | undefined {
    const rules = this.rules
    for (let i = 0; i < rules.length; i++) {
      const rule = rules[i]
      if (rule.matchPath(path) && clientMatches(rule, client)) return {rule, name: rule.record.name, target: rule.record.target}
    }
    return undefined
  }
}

/** The rule set of a snapshot without rules. */
export const NO_RULES = new RuleSet()

/**
 * Compiles stored rules (any order) into the {@link RuleSet} a snapshot holds, sorted by
 * priority then name. A row that does not compile is left out and reported through `onError`
 * (a rule edited in SQL must not stop the snapshot).
 */
export function compileRules(records: readonly RuleRecord[], mirrors: ReadonlyMap<number, SelectMirror>, onError?: (record: RuleRecord, error: unknown) => void): RuleSet {
  const sorted = [...records].sort((a, b) => a.priority - b.priority || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  const compiled: CompiledRule[] = []
  for (const record of sorted) {
    try {
      compiled.push(compileRule(record, mirrors))
    } catch (error) {
      onError?.(record, error)
    }
  }
  return new RuleSet(compiled)
}

/**
 * The Location of a `url` rule for `path`: the rule's URL, plus (with `append_path`) the part
 * of the path below the glob's literal directory, percent-encoded per segment (RFC 3986
 * §3.3). `https://intl.example.org/` + `store/cart/x.html` under `store/**` →
 * `https://intl.example.org/cart/x.html`.
 */
export function ruleLocation(rule: CompiledRule, path: string): string {
  const url = rule.record.url ?? ''
  if (!rule.record.append_path) return url
  const rest = path.length >= rule.baseLength ? path.slice(rule.baseLength) : ''
  if (rest === '') return url
  return `${url.endsWith('/') ? url : `${url}/`}${encodePath(rest)}`
}

/**
 * Parses a `row_to_json(redirect_rule)` text into a {@link RuleRecord} (PostgreSQL and PGlite
 * both render bigint arrays as JSON numbers).
 */
export function ruleFromJson(json: string): RuleRecord {
  const row = JSON.parse(json) as RuleRecord
  return {
    id: Number(row.id),
    name: row.name,
    priority: Number(row.priority),
    enabled: row.enabled,
    path_glob: row.path_glob,
    countries: row.countries ?? [],
    not_countries: row.not_countries ?? [],
    continents: row.continents ?? [],
    clients: row.clients ?? [],
    asns: (row.asns ?? []).map(Number),
    target: row.target,
    url: row.url,
    append_path: row.append_path,
    mirrors: row.mirrors ?? [],
    status: Number(row.status),
    comment: row.comment,
  }
}

/** The SELECT that reads every rule as one JSON text per row (for {@link ruleFromJson}). */
export const RULES_SQL = 'SELECT row_to_json(r)::text FROM redirect_rule r ORDER BY priority, name'
