/**
 * Validation and normalisation of mirror registry fields.
 *
 * Every function here takes operator input (flag values as text) and returns the value to
 * store, or throws a {@link UsageError} (exit 2) that names the field (by its `mb mirror`
 * flag), the bad value (with any password redacted) and what is expected. Nothing is written
 * by this module, so a bad value never changes the registry.
 *
 * Sources: WHATWG URL parsing (Node's `URL`), rsync(1) "CONNECTING TO AN RSYNC DAEMON" for the
 * `host::module` and `rsync://` forms, ISO 3166-1 alpha-2 country codes (`countries-list`),
 * CIDR per RFC 4632 / RFC 4291, 4-byte AS numbers per RFC 6793.
 */
import {UsageError} from '../errors.js'
import {globProblem} from '../glob.js'
import {continentOf, isContinentCode, isCountryCode} from '../geo/countries.js'
import {type Cidr, cidrContains, cidrRanges, normalizeCidr, numericHostProblem, parseCidr, SHORTEST_NARROW_PREFIX} from '../net.js'
import {redact} from '../redact.js'
import {splitList} from '../text.js'

/**
 * Raw input for one mirror as the CLI receives it. Every field is optional: `add` applies
 * defaults, `edit` changes only the fields given. An empty string (or a list holding only
 * an empty string) means "clear this value" (null, empty list, or the column default).
 */
export interface MirrorInput {
  identifier?: string
  http_url?: string
  https_url?: string
  rsync_url?: string
  ftp_url?: string
  country?: string
  continent?: string
  latitude?: string | number
  longitude?: string | number
  asn?: string | number
  prefixes?: string[]
  score?: string | number
  other_countries?: string | string[]
  exclude_countries?: string | string[]
  client_prefixes?: string[]
  file_maxsize?: string | number
  country_only?: boolean
  region_only?: boolean
  as_only?: boolean
  prefix_only?: boolean
  fallback?: boolean
  base_path?: string
  include_patterns?: string[]
  exclude_patterns?: string[]
  push_url?: string
  push_include?: string[]
  admin?: string
  admin_email?: string
  comment?: string
  enabled?: boolean
  /** An ISO 8601 time with a UTC offset, or `none` (or '') to end the window. */
  maintenance_until?: string
}

/** Validated, normalised column values (null = cleared). Only fields that were given appear. */
export interface MirrorValues {
  identifier?: string
  http_url?: string | null
  https_url?: string | null
  rsync_url?: string | null
  ftp_url?: string | null
  country?: string | null
  continent?: string | null
  latitude?: number | null
  longitude?: number | null
  asn?: number | null
  prefixes?: string[]
  score?: number
  other_countries?: string[]
  exclude_countries?: string[]
  client_prefixes?: string[]
  file_maxsize?: number | null
  country_only?: boolean
  region_only?: boolean
  as_only?: boolean
  prefix_only?: boolean
  fallback?: boolean
  base_path?: string
  include_patterns?: string[]
  exclude_patterns?: string[]
  push_url?: string | null
  push_include?: string[]
  admin?: string | null
  admin_email?: string | null
  comment?: string | null
  enabled?: boolean
  /** ISO 8601 UTC (`toISOString()`), or null. */
  maintenance_until?: string | null
}

/** The CLI flag of each field, used in messages. */
export const FIELD_FLAGS: Record<keyof MirrorInput, string> = {
  identifier: 'NAME',
  http_url: '--http-url',
  https_url: '--https-url',
  rsync_url: '--rsync-url',
  ftp_url: '--ftp-url',
  country: '--country',
  continent: '--continent',
  latitude: '--lat',
  longitude: '--lon',
  asn: '--asn',
  prefixes: '--prefix',
  score: '--score',
  other_countries: '--other-countries',
  exclude_countries: '--exclude-countries',
  client_prefixes: '--client-prefix',
  file_maxsize: '--file-maxsize',
  country_only: '--country-only',
  region_only: '--region-only',
  as_only: '--as-only',
  prefix_only: '--prefix-only',
  fallback: '--fallback',
  base_path: '--base-path',
  include_patterns: '--include',
  exclude_patterns: '--exclude',
  push_url: '--push-url',
  push_include: '--push-include',
  admin: '--admin',
  admin_email: '--admin-email',
  comment: '--comment',
  enabled: '--enabled/--disabled',
  maintenance_until: '--maintenance-until',
}

/** The mutually exclusive pool restrictions: a mirror serves only clients of its countries, its continent, its AS or its prefixes. */
const ONLY_FLAGS = ['country_only', 'region_only', 'as_only', 'prefix_only'] as const

/**
 * Fields that may be cleared (by an empty value or `--clear FIELD`), with their cleared value,
 * which is also their default for a new mirror (src/lib/mirrors/registry.ts).
 */
export const CLEARED_VALUES = {
  http_url: null,
  https_url: null,
  rsync_url: null,
  ftp_url: null,
  country: null,
  continent: null,
  latitude: null,
  longitude: null,
  asn: null,
  prefixes: [],
  other_countries: [],
  exclude_countries: [],
  client_prefixes: [],
  file_maxsize: null,
  base_path: '',
  include_patterns: [],
  exclude_patterns: [],
  push_url: null,
  push_include: [],
  admin: null,
  admin_email: null,
  comment: null,
  maintenance_until: null,
} satisfies Partial<Record<keyof MirrorValues, null | '' | never[]>>

/**
 * {@link CLEARED_VALUES}, indexable by any field name (the same object, widened type).
 * @alias
 */
export const CLEARABLE: Partial<Record<keyof MirrorValues, null | '' | never[]>> = CLEARED_VALUES

const ASN_MAX = 4_294_967_295
const SCORE_MAX = 2_147_483_647
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's job
const CONTROL = /[\u0000-\u001f\u007f]/

function invalid(field: keyof MirrorInput, value: unknown, expected: string): UsageError {
  const shown = typeof value === 'string' ? JSON.stringify(redact(value)) : JSON.stringify(value)
  return new UsageError(`Invalid ${FIELD_FLAGS[field]} ${shown}: ${expected}`, 'INVALID_MIRROR_FIELD')
}

/** Longest mirror identifier: a DNS name's limit (RFC 1035 §2.3.4), so a host name always fits. */
const IDENTIFIER_MAX = 253

/** What a mirror identifier may be, as `mb mirror add --help` says it. */
export const IDENTIFIER_RULE = `letters, digits, ".", "-" and "_", 1-${IDENTIFIER_MAX} characters, starting with a letter or digit`

/**
 * Checks a mirror identifier (the name used on the command line, in the `X-MB-Mirror`
 * header and in logs): a host-name-like token of ASCII letters, digits, `.`, `-` and `_`,
 * 1-{@link IDENTIFIER_MAX} characters, starting with a letter or digit. ASCII only, so the
 * name is always a valid HTTP header value (RFC 9110 §5.5) and needs no quoting anywhere.
 * Nothing is trimmed: `"m1\n"` is refused, not taken for `m1`, by `mirror add` and by every
 * command that looks a mirror up by name alike.
 * @returns the identifier
 * @throws UsageError naming the first character that is not allowed
 */
export function validateIdentifier(text: string): string {
  const value = text
  if (value === '') throw invalid('identifier', text, 'a mirror name must not be empty (e.g. ftp.example.de)')
  if (value.length > IDENTIFIER_MAX) throw invalid('identifier', text, `a mirror name has at most ${IDENTIFIER_MAX} characters`)
  const bad = /[^A-Za-z0-9._-]/u.exec(value)
  if (bad) throw invalid('identifier', text, `character ${describeChar(bad[0])} is not allowed; a mirror name has ${IDENTIFIER_RULE} (e.g. ftp.example.de)`)
  if (!/^[A-Za-z0-9]/.test(value)) throw invalid('identifier', text, `a mirror name must start with a letter or digit, not "${value[0]}"`)
  return value
}

/** A character for an error message: `"€" (U+20AC)`, `U+0009 (whitespace)`, `"/" (a slash)`. */
function describeChar(char: string): string {
  const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`
  if (/\s/.test(char)) return `${code} (whitespace)`
  if (CONTROL.test(char)) return `${code} (a control character)`
  if (char === '/' || char === '\\') return `${JSON.stringify(char)} (a slash)`
  return `${JSON.stringify(char)} (${code})`
}

type UrlField = 'http_url' | 'https_url' | 'rsync_url' | 'ftp_url'

const URL_RULES: Record<UrlField, {schemes: string[]; example: string; credentials: boolean}> = {
  http_url: {schemes: ['http:'], example: 'http://mirror.example.org/pub/', credentials: false},
  https_url: {schemes: ['https:'], example: 'https://mirror.example.org/pub/', credentials: false},
  rsync_url: {schemes: ['rsync:'], example: 'rsync://mirror.example.org/module/ or mirror.example.org::module/', credentials: true},
  ftp_url: {schemes: ['ftp:', 'ftps:'], example: 'ftp://mirror.example.org/pub/ or ftps://…', credentials: true},
}

/**
 * Validates and normalises a mirror base URL for one protocol field:
 * - `http_url`: `http://` only; `https_url`: `https://` only; neither may carry credentials
 *   (they are sent to clients in redirects);
 * - `rsync_url`: `rsync://[user[:password]@]host[:port]/module[/path]`, or the daemon form
 *   `[user@]host::module[/path]`, which is rewritten to the `rsync://` form; a module is required;
 * - `ftp_url`: `ftp://` or `ftps://`, credentials allowed.
 * The result has a host, no query or fragment, and a path ending in '/'. Passwords are
 * kept in the stored value (scans need them) but redacted in every message.
 * @throws UsageError naming the field, the (redacted) value and the expected form
 */
export function normalizeMirrorUrl(field: UrlField, text: string): string {
  const rule = URL_RULES[field]
  let value = text.trim()
  if (field === 'rsync_url') {
    const daemon = /^(?:([^@/\s]+)@)?([^:/@\s]+|\[[0-9a-fA-F:.]+\])::([^\s]*)$/.exec(value)
    if (daemon && !value.includes('://')) value = `rsync://${daemon[1] ? `${daemon[1]}@` : ''}${daemon[2]}/${daemon[3]}`
  }
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw invalid(field, text, `expected a URL such as ${rule.example}`)
  }
  if (!rule.schemes.includes(url.protocol)) {
    throw invalid(field, text, `${FIELD_FLAGS[field]} takes ${rule.schemes.map((s) => `${s}//`).join(' or ')} URLs only, e.g. ${rule.example}`)
  }
  if (!url.hostname) throw invalid(field, text, `the URL has no host; expected e.g. ${rule.example}`)
  const hostProblem = numericHostProblem(rawHost(value))
  if (hostProblem) throw invalid(field, text, `the host is an IPv4 address in a legacy form: ${hostProblem}`)
  if (url.search || url.hash || value.includes('?') || value.includes('#')) throw invalid(field, text, `a base URL has no query or fragment; expected e.g. ${rule.example}`)
  if ((url.username || url.password) && !rule.credentials) {
    throw invalid(field, text, `credentials are not allowed in ${FIELD_FLAGS[field]} (redirects would show them to every client)`)
  }
  if (CONTROL.test(value) || /\s/.test(value)) throw invalid(field, text, 'a URL has no whitespace or control characters (percent-encode them)')
  if (!url.pathname.endsWith('/')) url.pathname += '/'
  if (field === 'rsync_url' && url.pathname.replace(/\/+/g, '/') === '/') throw invalid(field, text, `an rsync URL names a module, e.g. ${rule.example}`)
  return url.toString()
}

/** Characters a POSIX shell gives a meaning to (and whitespace): never part of a push target, which may reach a remote shell over ssh. */
const SHELL_META = /[\s;&|$`<>(){}[\]*?!#~'"\\^]/u

/**
 * Validates and normalises a mirror's push target (`--push-url`), where `mb push` uploads:
 * - an rsync daemon module that accepts uploads: `rsync://[user[:password]@]host[:port]/module[/path]`,
 *   or `[user@]host::module[/path]` (rewritten to the `rsync://` form); a module is required;
 * - a path over ssh: `[user@]host:path` (rsync(1), "USAGE": a single colon means a remote
 *   shell), the path relative to the login directory or absolute.
 * Refused: any shell metacharacter or whitespace (over ssh the remote shell reads the path),
 * a host or user starting with '-' (it would read as an option), a query or fragment.
 * The result ends in '/'.
 * @throws UsageError naming --push-url, the (redacted) value and the expected forms
 */
export function normalizePushUrl(text: string): string {
  const value = text.trim()
  const forms = 'rsync://host/module/path/, host::module/path/ or user@host:path/'
  // An IPv6 host in brackets (RFC 3986 §3.2.2) is the one place '[' and ']' belong.
  const unbracketed = value.replace(/(^|@|\/\/)\[[0-9a-fA-F:.]+\]/, '$1host')
  if (CONTROL.test(value) || SHELL_META.test(unbracketed)) {
    const bad = [...unbracketed].find((c) => CONTROL.test(c) || SHELL_META.test(c)) ?? ''
    throw invalid('push_url', text, `character ${describeChar(bad)} is a shell metacharacter or whitespace, which a push target may not hold (the remote shell would read it); expected ${forms}`)
  }
  const ssh = /^(?:([A-Za-z0-9._][A-Za-z0-9._-]*)@)?([A-Za-z0-9][A-Za-z0-9.-]*|\[[0-9a-fA-F:.]+\]):(?!:)(.*)$/.exec(value)
  if (ssh && !value.includes('://')) {
    const path = ssh[3]
    if (path.split('/').includes('..')) throw invalid('push_url', text, `the path may not hold '..'; expected ${forms}`)
    return `${ssh[1] ? `${ssh[1]}@` : ''}${ssh[2]}:${path === '' || path.endsWith('/') ? path : `${path}/`}`
  }
  try {
    return normalizeMirrorUrl('rsync_url', value)
  } catch (error) {
    throw invalid('push_url', text, `expected ${forms} (${(error as Error).message.replace(/^Invalid --rsync-url "[^"]*": /, '')})`)
  }
}

/** The host of a URL as written (before the URL parser rewrites a numeric one): after `//` and any `user@`, before a port or path. */
function rawHost(url: string): string {
  const authority = url.slice(url.indexOf('//') + 2).split(/[/?#]/, 1)[0]
  const host = authority.slice(authority.lastIndexOf('@') + 1)
  return host.startsWith('[') ? host : host.replace(/:[0-9]*$/, '')
}

/**
 * An ISO 3166-1 alpha-2 country code, upper-cased (`de` → `DE`).
 * @throws UsageError for anything else (`XX`, `gbr`, `Germany`)
 */
export function normalizeCountry(text: string, field: 'country' | 'other_countries' | 'exclude_countries' = 'country'): string {
  const value = text.trim().toUpperCase()
  if (!/^[A-Z]{2}$/.test(value) || !isCountryCode(value)) throw invalid(field, text, 'expected an ISO 3166-1 alpha-2 country code such as DE, GB or US')
  return value
}

/**
 * One of the seven continent codes AF AN AS EU NA OC SA, upper-cased.
 * @throws UsageError
 */
export function normalizeContinent(text: string): string {
  const value = text.trim().toUpperCase()
  if (!/^[A-Z]{2}$/.test(value) || !isContinentCode(value)) throw invalid('continent', text, 'expected one of AF AN AS EU NA OC SA')
  return value
}

/**
 * A comma-separated (or repeated) list of country codes → unique upper-cased codes, in order.
 * An empty list (or '') clears it.
 * @throws UsageError naming the first bad code
 */
export function normalizeCountryList(field: 'other_countries' | 'exclude_countries', values: string | string[]): string[] {
  const parts = (Array.isArray(values) ? values : [values]).flatMap(splitList)
  return [...new Set(parts.map((p) => normalizeCountry(p, field)))]
}

/**
 * A list of CIDR prefixes (repeated flags, each may hold a comma list) → unique canonical CIDRs
 * (host bits must be zero; a bare address means /32 or /128).
 * @throws UsageError naming the field and the bad prefix
 */
export function normalizeCidrList(field: 'prefixes' | 'client_prefixes', values: string[]): string[] {
  const parts = values.flatMap(splitList)
  const result: string[] = []
  for (const part of parts) {
    let cidr: string
    try {
      cidr = normalizeCidr(part)
    } catch (error) {
      throw invalid(field, part, (error as Error).message.replace(/^Invalid CIDR "[^"]*": /, ''))
    }
    if (!result.includes(cidr)) result.push(cidr)
  }
  return result
}

/** The documentation blocks (RFC 5737, RFC 3849): no real client has such an address, so a prefix inside one captures nobody; examples use them. */
const DOCUMENTATION_CIDRS: readonly Cidr[] = ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24', '2001:db8::/32'].map(parseCidr)

/** The shortest `--prefix` length stored without `--force`, per family. */
const SHORTEST_PREFIX = SHORTEST_NARROW_PREFIX

/**
 * Why a canonical `--prefix` CIDR needs `--force`: `broad` when it is shorter than /16
 * (IPv4) or /32 (IPv6), `reserved` when its first or last address lies in a special-purpose
 * range (private, loopback, link-local, CGN, multicast, unique-local, ...; RFC 6890), other
 * than the documentation blocks. Undefined for an ordinary prefix. The prefix pool ranks
 * first in selection, so such a prefix sends every client of the range to the mirror.
 */
export function prefixOverride(cidrText: string): 'broad' | 'reserved' | undefined {
  const cidr = parseCidr(cidrText)
  if (cidr[1] < SHORTEST_PREFIX[cidr[0].kind()]) return 'broad'
  if (DOCUMENTATION_CIDRS.some((doc) => cidrContains(doc, cidr[0]) && cidr[1] >= doc[1])) return undefined
  return cidrRanges(cidr).some((range) => range !== 'unicast') ? 'reserved' : undefined
}

/**
 * Refuses `--prefix` values that need `--force` ({@link prefixOverride}) unless `force`.
 * @throws UsageError INVALID_MIRROR_FIELD naming the prefix, why, and `--force`
 */
export function checkPrefixes(prefixes: readonly string[], force: boolean): void {
  if (force) return
  for (const prefix of prefixes) {
    const override = prefixOverride(prefix)
    if (override === undefined) continue
    const why = override === 'broad' ? `is shorter than /${SHORTEST_PREFIX[prefix.includes(':') ? 'ipv6' : 'ipv4']}` : 'is in a reserved range (private, loopback, link-local, multicast, ...)'
    throw new UsageError(
      `--prefix ${prefix} ${why}: the prefix pool comes first in selection, so every client in that range would be sent to this mirror. Give --force to store it anyway.`,
      'INVALID_MIRROR_FIELD',
    )
  }
}

function parseNumber(field: 'latitude' | 'longitude', value: string | number, min: number, max: number): number {
  const text = String(value).trim()
  const number = Number(text)
  if (text === '' || !Number.isFinite(number) || number < min || number > max) throw invalid(field, value, `expected a number of degrees from ${min} to ${max}`)
  return number
}

/** Latitude in degrees, -90..90 (WGS 84). @throws UsageError */
export function parseLatitude(value: string | number): number {
  return parseNumber('latitude', value, -90, 90)
}

/** Longitude in degrees, -180..180 (WGS 84). @throws UsageError */
export function parseLongitude(value: string | number): number {
  return parseNumber('longitude', value, -180, 180)
}

function parseInteger(field: keyof MirrorInput, value: string | number, min: number, max: number, expected: string): number {
  let text = String(value).trim()
  if (field === 'asn') text = text.replace(/^AS/i, '')
  if (!/^\d+$/.test(text)) throw invalid(field, value, expected)
  const number = Number(text)
  if (number < min || number > max) throw invalid(field, value, expected)
  return number
}

/** An AS number, 1..4294967295 (RFC 6793); `AS64500` is accepted too. @throws UsageError */
export function parseAsn(value: string | number): number {
  return parseInteger('asn', value, 1, ASN_MAX, `expected an AS number from 1 to ${ASN_MAX}, e.g. 3320 or AS3320`)
}

/** A score (selection weight): an integer >= 0; 0 takes the mirror out of selection. @throws UsageError */
export function parseScore(value: string | number): number {
  return parseInteger('score', value, 0, SCORE_MAX, 'expected a whole number >= 0 (default 100; 0 takes the mirror out of selection)')
}

const SIZE_UNITS: Record<string, number> = {'': 1, K: 1024, M: 1024 ** 2, G: 1024 ** 3, T: 1024 ** 4, P: 1024 ** 5}

/**
 * A size in bytes: a plain integer, or a number with a binary suffix K, M, G, T, P
 * (optionally followed by `B` or `iB`; 1K = 1024 bytes), e.g. `4G`, `700M`, `1.5GiB`.
 * @returns whole bytes (>= 1, at most Number.MAX_SAFE_INTEGER)
 * @throws UsageError
 */
export function parseFileSize(value: string | number): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([KMGTP]?)(?:i?B)?\s*$/i.exec(String(value))
  const expected = 'expected a size in bytes, e.g. 4294967296, 4G, 700M or 1.5GiB (K/M/G/T = powers of 1024)'
  if (!match) throw invalid('file_maxsize', value, expected)
  const bytes = Math.floor(Number(match[1]) * SIZE_UNITS[match[2].toUpperCase()])
  if (bytes < 1 || !Number.isSafeInteger(bytes)) throw invalid('file_maxsize', value, expected)
  return bytes
}

/**
 * The origin subtree a mirror carries at its base URL: a relative '/'-separated path, stored
 * without leading or trailing '/' ('' = the whole tree). `/pub/iso/` → `pub/iso`.
 * @throws UsageError for '..' segments, backslashes or control characters
 */
export function normalizeBasePath(text: string): string {
  const value = text.trim()
  if (CONTROL.test(value) || value.includes('\\')) throw invalid('base_path', text, 'a relative path under the origin root with "/" separators and no control characters, e.g. pub/iso')
  const segments = value.split('/').filter((s) => s !== '' && s !== '.')
  if (segments.includes('..')) throw invalid('base_path', text, 'a path inside the origin root: ".." is not allowed, e.g. pub/iso')
  return segments.join('/')
}

/**
 * Glob patterns (picomatch syntax, matched against origin-relative paths), e.g. `*.iso`,
 * `debug/**`. Empty entries are dropped; duplicates removed.
 * @throws UsageError for control characters or a malformed glob ({@link globProblem}: an unclosed `[`, `{` or `(`, ...)
 */
export function normalizePatterns(field: 'include_patterns' | 'exclude_patterns' | 'push_include', values: string[]): string[] {
  const result: string[] = []
  for (const raw of values) {
    const value = raw.trim()
    if (value === '') continue
    if (CONTROL.test(value)) throw invalid(field, raw, 'a glob pattern without control characters, e.g. "*.iso" or "debug/**"')
    const problem = globProblem(value)
    if (problem) throw invalid(field, raw, `not a valid glob pattern: ${problem}; e.g. "*.iso" or "debug/**"`)
    if (!result.includes(value)) result.push(value)
  }
  return result
}

const ISO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/i

/**
 * The end of a maintenance window: an ISO 8601 date and time with `Z` or a UTC offset
 * (`2026-12-01T18:00:00Z`, `2026-12-01T19:00+01:00`), or `none` to end the window.
 * @returns the time as ISO 8601 UTC, or null for `none`
 * @throws UsageError for anything else (a date without a time, a time without an offset, an impossible date)
 */
function parseMaintenanceUntil(value: string): string | null {
  const text = value.trim()
  if (text.toLowerCase() === 'none') return null
  const ms = ISO_TIME.test(text) ? Date.parse(text) : Number.NaN
  // Date.parse rolls some impossible dates over (2026-02-30 → March 2); the day must survive.
  if (!Number.isFinite(ms) || !sameDay(text, ms))
    throw invalid('maintenance_until', value, 'expected an ISO 8601 time with an offset, such as 2026-12-01T18:00:00Z or 2026-12-01T19:00+01:00, or none to end the window')
  return new Date(ms).toISOString()
}

/** True when the calendar date written in `text` is the date of `ms` in the offset `text` gives. */
function sameDay(text: string, ms: number): boolean {
  const offset = /([+-])(\d{2}):(\d{2})$/.exec(text)
  const minutes = offset ? (offset[1] === '-' ? -1 : 1) * (Number(offset[2]) * 60 + Number(offset[3])) : 0
  return new Date(ms + minutes * 60_000).toISOString().slice(0, 10) === text.slice(0, 10)
}

function optionalText(field: 'admin' | 'comment', value: string): string | null {
  const text = value.trim()
  if (text === '') return null
  if (text.length > 1000) throw invalid(field, value, 'at most 1000 characters')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters (tab and newline allowed) is this pattern's job
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text)) throw invalid(field, value, 'text without control characters')
  return text
}

/** An e-mail address (a plain check: local@domain, no whitespace). @throws UsageError */
export function normalizeEmail(value: string): string {
  const text = value.trim()
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(text) || CONTROL.test(text)) throw invalid('admin_email', value, 'expected an e-mail address such as mirror-admin@example.org')
  return text
}

function isClear(value: unknown): boolean {
  if (typeof value === 'string') return value.trim() === ''
  if (Array.isArray(value)) return value.every((v) => typeof v === 'string' && v.trim() === '')
  return false
}

/**
 * Validates every given field of `input` on its own and returns normalised column values.
 * Empty values become the field's cleared value ({@link CLEARABLE}). Cross-field rules
 * (lat/lon pairs, exclusive *_only flags, a required HTTP(S) URL) are checked on the merged
 * row by {@link checkMirrorRow}. Does not derive the continent from the country.
 * @throws UsageError on the first bad field
 */
export function validateMirrorInput(input: MirrorInput): MirrorValues {
  const out: Record<string, unknown> = {}
  for (const [key, raw] of Object.entries(input) as Array<[keyof MirrorInput, unknown]>) {
    if (raw === undefined) continue
    if (key === 'identifier') out.identifier = validateIdentifier(String(raw))
    else if (typeof raw === 'boolean' && (key === 'enabled' || key === 'fallback' || (ONLY_FLAGS as readonly string[]).includes(key))) out[key] = raw
    else if (key in CLEARABLE && isClear(raw)) out[key] = CLEARABLE[key as keyof MirrorValues]
    else out[key] = normalizeField(key, raw)
  }
  return out as MirrorValues
}

/** The stored value of one given, non-empty field of {@link MirrorInput}. @throws UsageError */
function normalizeField(key: keyof MirrorInput, raw: unknown): unknown {
  const text = Array.isArray(raw) ? raw.map(String) : String(raw)
  const one = Array.isArray(text) ? text.join(',') : text
  const list = Array.isArray(text) ? text : [text]
  switch (key) {
    case 'http_url':
    case 'https_url':
    case 'rsync_url':
    case 'ftp_url':
      return normalizeMirrorUrl(key, one)
    case 'country':
      return normalizeCountry(one)
    case 'continent':
      return normalizeContinent(one)
    case 'latitude':
      return parseLatitude(one)
    case 'longitude':
      return parseLongitude(one)
    case 'asn':
      return parseAsn(one)
    case 'score':
      if (isClear(raw)) throw invalid('score', raw, 'expected a whole number >= 0')
      return parseScore(one)
    case 'file_maxsize':
      return parseFileSize(one)
    case 'prefixes':
    case 'client_prefixes':
      return normalizeCidrList(key, list)
    case 'other_countries':
    case 'exclude_countries':
      return normalizeCountryList(key, list)
    case 'base_path':
      return normalizeBasePath(one)
    case 'include_patterns':
    case 'exclude_patterns':
    case 'push_include':
      return normalizePatterns(key, list)
    case 'push_url':
      return normalizePushUrl(one)
    case 'admin':
    case 'comment':
      return optionalText(key, one)
    case 'admin_email':
      return normalizeEmail(one)
    case 'maintenance_until':
      return parseMaintenanceUntil(one)
    default:
      throw invalid(key, raw, 'unexpected value')
  }
}

/** The fields of a stored or about-to-be-stored row that {@link checkMirrorRow} looks at. */
export interface MirrorRowShape {
  identifier: string
  http_url: string | null
  https_url: string | null
  latitude: number | null
  longitude: number | null
  country_only: boolean
  region_only: boolean
  as_only: boolean
  prefix_only: boolean
}

/**
 * Cross-field rules on the complete (merged) row:
 * - at least one of http_url / https_url (clients are redirected over HTTP(S));
 * - latitude and longitude both set or both empty;
 * - at most one of country_only, region_only, as_only, prefix_only.
 * @throws UsageError saying which flags to give
 */
export function checkMirrorRow(row: MirrorRowShape): void {
  if (!row.http_url && !row.https_url) {
    throw new UsageError(`Mirror ${row.identifier} needs a base URL for redirects: give --http-url http://… and/or --https-url https://…`, 'INVALID_MIRROR_FIELD')
  }
  if ((row.latitude === null) !== (row.longitude === null)) {
    throw new UsageError(`Mirror ${row.identifier}: --lat and --lon go together; give both (or clear both with --lat '' --lon '')`, 'INVALID_MIRROR_FIELD')
  }
  const only = ONLY_FLAGS.filter((f) => row[f])
  if (only.length > 1) {
    throw new UsageError(
      `Mirror ${row.identifier}: ${only.map((f) => FIELD_FLAGS[f]).join(' and ')} exclude each other; keep one (turn the others off with ${only.map((f) => `--no-${FIELD_FLAGS[f].slice(2)}`).join(' / ')})`,
      'INVALID_MIRROR_FIELD',
    )
  }
}

/** The continent implied by a (valid) country code, e.g. DE → EU. */
export function impliedContinent(country: string): string | undefined {
  return continentOf(country)
}
