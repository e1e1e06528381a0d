/**
 * Checks of `mb rule add/edit` input: every value is normalised or refused with a message
 * naming its flag, before anything is written.
 */
import {globProblem} from '../glob.js'
import {isContinentCode, isCountryCode} from '../geo/countries.js'
import {UsageError} from '../errors.js'
import {normalizeCidr} from '../net.js'
import {RULE_STATUSES, type RuleRecord, type RuleTarget} from './rule.js'

/** What the command line gives for a rule; undefined = not given (edit keeps the stored value). */
export interface RuleInput {
  name?: string
  priority?: string | number
  enabled?: boolean
  path?: string
  /** Comma lists (repeated flags allowed); '' clears on edit. */
  country?: string | string[]
  notCountry?: string | string[]
  continent?: string | string[]
  client?: string | string[]
  asn?: string | string[]
  to?: string
  appendPath?: boolean
  mirrors?: string | string[]
  origin?: boolean
  status?: string | number
  comment?: string
}

/** The stored fields a valid input sets (everything but `id`). */
export type RuleValues = Omit<RuleRecord, 'id'>

/** ASCII control characters (C0 and DEL). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's job
const CONTROL = /[\u0000-\u001f\u007f]/

/** Longest rule name. */
const NAME_MAX = 100

function invalid(flag: string, value: unknown, expected: string): UsageError {
  return new UsageError(`Invalid ${flag} ${JSON.stringify(value)}: ${expected}. Nothing was changed.`, 'INVALID_RULE_FIELD')
}

function items(values: string | string[] | undefined): string[] {
  if (values === undefined) return []
  return (Array.isArray(values) ? values : [values])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '')
}

/**
 * A rule name: letters, digits, `.`, `-` and `_`, 1-100 characters, starting with a letter or
 * digit (it goes into the `X-MB-Rule` header and statistics).
 * @throws UsageError INVALID_RULE_FIELD
 */
export function validateRuleName(text: string): string {
  const value = text.trim()
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]*$/.test(value) || value.length > NAME_MAX) {
    throw invalid('rule name', text, `expected letters, digits, ".", "-" and "_", 1-${NAME_MAX} characters, starting with a letter or digit (e.g. intlstore)`)
  }
  return value
}

/** A path glob (picomatch): non-empty, no control characters, well formed ({@link globProblem}), a leading `/` dropped. @throws UsageError */
function validatePathGlob(text: string): string {
  const value = text.trim().replace(/^\/+/, '')
  if (value === '') throw invalid('--path', text, 'expected a non-empty glob of origin paths, e.g. "store/**" or "**" for every path')
  if (CONTROL.test(value)) throw invalid('--path', text, 'a glob has no control characters')
  const problem = globProblem(value)
  if (problem) throw invalid('--path', text, `not a valid glob: ${problem}`)
  return value
}

/** Country codes, upper-cased and unique. @throws UsageError naming the first bad code */
function validateCountries(flag: string, values: string | string[] | undefined): string[] {
  const codes = items(values).map((c) => c.toUpperCase())
  for (const code of codes) if (!/^[A-Z]{2}$/.test(code) || !isCountryCode(code)) throw invalid(flag, code, 'expected ISO 3166-1 alpha-2 country codes such as US,CA or GB')
  return [...new Set(codes)]
}

/** Continent codes, upper-cased and unique. @throws UsageError */
function validateContinents(values: string | string[] | undefined): string[] {
  const codes = items(values).map((c) => c.toUpperCase())
  for (const code of codes) if (!isContinentCode(code)) throw invalid('--continent', code, 'expected continent codes among AF AN AS EU NA OC SA')
  return [...new Set(codes)]
}

/** CIDRs in canonical form. @throws UsageError INVALID_RULE_FIELD naming the bad prefix */
function validateClients(values: string | string[] | undefined): string[] {
  const result: string[] = []
  for (const item of items(values)) {
    try {
      result.push(normalizeCidr(item))
    } catch (error) {
      throw invalid('--client', item, (error as Error).message.replace(/^Invalid CIDR "[^"]*": /, '').replace(/\.$/, ''))
    }
  }
  return [...new Set(result)]
}

/** AS numbers 1..4294967295 (`AS3320` accepted). @throws UsageError */
function validateAsns(values: string | string[] | undefined): number[] {
  const result: number[] = []
  for (const item of items(values)) {
    const text = item.replace(/^AS/i, '')
    const n = Number(text)
    if (!/^\d+$/.test(text) || n < 1 || n > 4_294_967_295) throw invalid('--asn', item, 'expected AS numbers from 1 to 4294967295, e.g. 3320 or AS3320')
    result.push(n)
  }
  return [...new Set(result)]
}

/** An absolute http:// or https:// URL without credentials or fragment. @throws UsageError */
function validateTargetUrl(text: string): string {
  let url: URL
  try {
    url = new URL(text.trim())
  } catch {
    throw invalid('--to', text, 'expected an absolute http:// or https:// URL, e.g. https://intlstore.example.org/')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('--to', text, `the target must be an http:// or https:// URL (scheme ${url.protocol} cannot be a redirect target)`)
  if (!url.hostname) throw invalid('--to', text, 'the URL has no host')
  if (url.username || url.password) throw invalid('--to', text, 'credentials are not allowed in a redirect target (every client would see them)')
  if (url.hash) throw invalid('--to', text, 'a redirect target has no fragment')
  if (CONTROL.test(text) || /\s/.test(text.trim())) throw invalid('--to', text, 'a URL has no whitespace or control characters (percent-encode them)')
  return url.toString()
}

/** 301, 302 or 307. @throws UsageError */
function validateStatus(value: string | number): number {
  const n = Number(value)
  if (!(RULE_STATUSES as readonly number[]).includes(n)) throw invalid('--status', value, 'expected 301, 302 or 307')
  return n
}

/** An integer priority (lower is tried first), -1000000..1000000. @throws UsageError */
function validatePriority(value: string | number): number {
  const n = Number(value)
  if (!/^-?\d+$/.test(String(value).trim()) || Math.abs(n) > 1_000_000) throw invalid('--priority', value, 'expected an integer from -1000000 to 1000000 (lower is tried first)')
  return n
}

/** Mirror identifiers of a `--mirrors` target (existence is checked against the registry by the caller). */
function mirrorNames(values: string | string[] | undefined): string[] {
  return [...new Set(items(values))]
}

/** The target flags given: at most one of `--to`, `--mirrors`, `--origin`. @throws UsageError */
function targetOf(input: RuleInput): RuleTarget | undefined {
  const given: RuleTarget[] = []
  if (input.to !== undefined) given.push('url')
  if (input.mirrors !== undefined) given.push('mirrors')
  if (input.origin) given.push('origin')
  if (given.length > 1) throw new UsageError('Give one target: --to URL, --mirrors NAME,… or --origin. Nothing was changed.', 'INVALID_RULE_FIELD')
  return given[0]
}

/**
 * Applies `input` over `base` (a stored rule, or defaults for a new one) and checks the
 * result as a whole: one target, a country list or a not-country list but not both,
 * `--append-path` only with `--to`.
 * @throws UsageError INVALID_RULE_FIELD for any bad value; nothing is written
 */
export function mergeRuleInput(base: RuleValues, input: RuleInput): RuleValues {
  const v: RuleValues = {...base}
  if (input.name !== undefined) v.name = validateRuleName(input.name)
  if (input.priority !== undefined) v.priority = validatePriority(input.priority)
  if (input.enabled !== undefined) v.enabled = input.enabled
  if (input.path !== undefined) v.path_glob = validatePathGlob(input.path)
  if (input.country !== undefined) v.countries = validateCountries('--country', input.country)
  if (input.notCountry !== undefined) v.not_countries = validateCountries('--not-country', input.notCountry)
  if (input.continent !== undefined) v.continents = validateContinents(input.continent)
  if (input.client !== undefined) v.clients = validateClients(input.client)
  if (input.asn !== undefined) v.asns = validateAsns(input.asn)
  if (input.status !== undefined) v.status = validateStatus(input.status)
  if (input.comment !== undefined) v.comment = input.comment.trim() === '' ? null : input.comment.trim()
  const target = targetOf(input)
  if (target !== undefined) {
    v.target = target
    v.url = target === 'url' ? validateTargetUrl(input.to!) : null
    v.mirrors = target === 'mirrors' ? mirrorNames(input.mirrors) : []
    if (target === 'mirrors' && v.mirrors.length === 0) throw invalid('--mirrors', input.mirrors, 'expected one or more mirror names, e.g. --mirrors mirror-a,mirror-b')
    if (target !== 'url') v.append_path = false
  }
  if (input.appendPath !== undefined) v.append_path = input.appendPath
  if (v.path_glob === '') throw invalid('--path', '', 'a rule needs a path glob, e.g. --path "store/**"')
  if (v.countries.length > 0 && v.not_countries.length > 0)
    throw new UsageError('--country and --not-country exclude each other: a rule lists the countries it applies to or those it skips. Nothing was changed.', 'INVALID_RULE_FIELD')
  if (v.append_path && v.target !== 'url') throw new UsageError('--append-path goes with --to URL only. Nothing was changed.', 'INVALID_RULE_FIELD')
  return v
}
