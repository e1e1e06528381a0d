/**
 * Validation and normalisation of mirror registry fields: the identifier, numbers, sizes, the
 * base path, patterns and texts, and a whole input at once ({@link validateMirrorInput}); the
 * URLs are checked in ./urls.ts, the location and client pools in ./location.ts.
 *
 * Every function here takes operator input (flag values as text) and returns the value to
 * store, or throws a {@link UsageError} (exit 2) that names the field (by its `mb mirror`
 * flag), the bad value (with any password redacted) and what is expected. Nothing is written
 * by this module, so a bad value never changes the registry. AS numbers per RFC 6793.
 */
import {UsageError} from '../errors.js'
import {globProblem} from '../glob.js'
import {MIN_SECRET_LENGTH, SIGN_SCHEMES} from '../sign.js'
import {CONTROL, describeChar, FIELD_FLAGS, invalidField, type MirrorInput, type MirrorValues} from './fields.js'
import {normalizeCidrList, normalizeContinent, normalizeCountry, normalizeCountryList, parseLatitude, parseLongitude} from './location.js'
import {normalizeMirrorUrl, normalizePushUrl} from './urls.js'

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
  sign_scheme: null,
  sign_secret: null,
} satisfies Partial<Record<keyof MirrorValues, null | '' | never[]>>

/**
 * {@link CLEARED_VALUES}, indexable by any field name (the same object, widened type).
 * @alias
 */
export const CLEARABLE: Partial<Record<keyof MirrorValues, null | '' | never[]>> = CLEARED_VALUES

const ASN_MAX = 4_294_967_295
const SCORE_MAX = 2_147_483_647

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
  if (value === '') throw invalidField('identifier', text, 'a mirror name must not be empty (e.g. ftp.example.de)')
  if (value.length > IDENTIFIER_MAX) throw invalidField('identifier', text, `a mirror name has at most ${IDENTIFIER_MAX} characters`)
  const bad = /[^A-Za-z0-9._-]/u.exec(value)
  if (bad) throw invalidField('identifier', text, `character ${describeChar(bad[0])} is not allowed; a mirror name has ${IDENTIFIER_RULE} (e.g. ftp.example.de)`)
  if (!/^[A-Za-z0-9]/.test(value)) throw invalidField('identifier', text, `a mirror name must start with a letter or digit, not "${value[0]}"`)
  return value
}

function parseInteger(field: keyof MirrorInput, value: string | number, min: number, max: number, expected: string): number {
  let text = String(value).trim()
  if (field === 'asn') text = text.replace(/^AS/i, '')
  if (!/^\d+$/.test(text)) throw invalidField(field, value, expected)
  const number = Number(text)
  if (number < min || number > max) throw invalidField(field, value, expected)
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
  if (!match) throw invalidField('file_maxsize', value, expected)
  const bytes = Math.floor(Number(match[1]) * SIZE_UNITS[match[2].toUpperCase()])
  if (bytes < 1 || !Number.isSafeInteger(bytes)) throw invalidField('file_maxsize', value, expected)
  return bytes
}

/**
 * The origin subtree a mirror carries at its base URL: a relative '/'-separated path, stored
 * without leading or trailing '/' ('' = the whole tree). `/pub/iso/` → `pub/iso`.
 * @throws UsageError for '..' segments, backslashes or control characters
 */
export function normalizeBasePath(text: string): string {
  const value = text.trim()
  if (CONTROL.test(value) || value.includes('\\')) throw invalidField('base_path', text, 'a relative path under the origin root with "/" separators and no control characters, e.g. pub/iso')
  const segments = value.split('/').filter((s) => s !== '' && s !== '.')
  if (segments.includes('..')) throw invalidField('base_path', text, 'a path inside the origin root: ".." is not allowed, e.g. pub/iso')
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
    if (CONTROL.test(value)) throw invalidField(field, raw, 'a glob pattern without control characters, e.g. "*.iso" or "debug/**"')
    const problem = globProblem(value)
    if (problem) throw invalidField(field, raw, `not a valid glob pattern: ${problem}; e.g. "*.iso" or "debug/**"`)
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
    throw invalidField('maintenance_until', value, 'expected an ISO 8601 time with an offset, such as 2026-12-01T18:00:00Z or 2026-12-01T19:00+01:00, or none to end the window')
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
  if (text.length > 1000) throw invalidField(field, value, 'at most 1000 characters')
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters (tab and newline allowed) is this pattern's job
  if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(text)) throw invalidField(field, value, 'text without control characters')
  return text
}

/** An e-mail address (a plain check: local@domain, no whitespace). @throws UsageError */
export function normalizeEmail(value: string): string {
  const text = value.trim()
  if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(text) || CONTROL.test(text)) throw invalidField('admin_email', value, 'expected an e-mail address such as mirror-admin@example.org')
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
      if (isClear(raw)) throw invalidField('score', raw, 'expected a whole number >= 0')
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
    case 'sign_scheme':
      return parseSignScheme(one)
    case 'sign_secret':
      return checkSignSecret(one)
    case 'sign_ttl_seconds':
      return parseInteger('sign_ttl_seconds', one, 60, 7 * 86_400, 'expected whole seconds from 60 to 604800 (a week), e.g. 21600')
    default:
      throw invalidField(key, raw, 'unexpected value')
  }
}

/**
 * A URL signing scheme (../sign.ts): `nginx_secure_link_md5`, or null for `none`.
 * @throws UsageError for another value
 */
function parseSignScheme(text: string): string | null {
  const value = text.trim().toLowerCase()
  if (value === 'none') return null
  if (!(SIGN_SCHEMES as readonly string[]).includes(value))
    throw invalidField('sign_scheme', text, `expected ${SIGN_SCHEMES.join(' or ')} (nginx's secure_link_md5; docs/operations.md "Mirrors behind signed URLs"), or none`)
  return value
}

/**
 * A signing secret: at least {@link MIN_SECRET_LENGTH} characters, no control character or
 * whitespace at either end (a trailing newline of the file is dropped before).
 * @throws UsageError, without echoing the secret
 */
function checkSignSecret(text: string): string {
  const value = text.replace(/\r?\n$/, '')
  if (value.length < MIN_SECRET_LENGTH)
    throw new UsageError(`Invalid ${FIELD_FLAGS.sign_secret}: the secret has ${value.length} characters; use at least ${MIN_SECRET_LENGTH} (e.g. openssl rand -hex 24)`, 'INVALID_MIRROR_FIELD')
  if (CONTROL.test(value) || value.trim() !== value)
    throw new UsageError(`Invalid ${FIELD_FLAGS.sign_secret}: the secret holds a control character or starts or ends with whitespace`, 'INVALID_MIRROR_FIELD')
  return value
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
  sign_scheme?: string | null
  sign_secret?: string | null
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
  if (row.sign_scheme && !row.sign_secret) {
    throw new UsageError(`Mirror ${row.identifier}: --sign ${row.sign_scheme} needs the secret the mirror checks: give --sign-secret-file FILE`, 'INVALID_MIRROR_FIELD')
  }
  const only = ONLY_FLAGS.filter((f) => row[f])
  if (only.length > 1) {
    throw new UsageError(
      `Mirror ${row.identifier}: ${only.map((f) => FIELD_FLAGS[f]).join(' and ')} exclude each other; keep one (turn the others off with ${only.map((f) => `--no-${FIELD_FLAGS[f].slice(2)}`).join(' / ')})`,
      'INVALID_MIRROR_FIELD',
    )
  }
}
