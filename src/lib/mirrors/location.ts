/**
 * Where a mirror is and whom it serves: its country and continent (ISO 3166-1 alpha-2 codes
 * from `countries-list`), its coordinates, and the client prefixes of its pool (CIDR per
 * RFC 4632 / RFC 4291), with the prefixes that need `--force`.
 */
import {UsageError} from '../errors.js'
import {continentOf, isContinentCode, isCountryCode} from '../geo/countries.js'
import {type Cidr, cidrContains, cidrRanges, normalizeCidr, parseCidr, SHORTEST_NARROW_PREFIX} from '../net.js'
import {splitList} from '../text.js'
import {invalidField} from './fields.js'
/**
 * An ISO 3166-1 alpha-2 country code, upper-cased (`de` → `DE`).
 * @throws UsageError for anything else (`XX`, `gbr`, `Germany`)
 */
export function normalizeCountry(text: string, field: 'country' | 'other_countries' | 'exclude_countries' = 'country'): string {
  const value = text.trim().toUpperCase()
  if (!/^[A-Z]{2}$/.test(value) || !isCountryCode(value)) throw invalidField(field, text, 'expected an ISO 3166-1 alpha-2 country code such as DE, GB or US')
  return value
}

/**
 * One of the seven continent codes AF AN AS EU NA OC SA, upper-cased.
 * @throws UsageError
 */
export function normalizeContinent(text: string): string {
  const value = text.trim().toUpperCase()
  if (!/^[A-Z]{2}$/.test(value) || !isContinentCode(value)) throw invalidField('continent', text, 'expected one of AF AN AS EU NA OC SA')
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
      throw invalidField(field, part, (error as Error).message.replace(/^Invalid CIDR "[^"]*": /, ''))
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
  if (text === '' || !Number.isFinite(number) || number < min || number > max) throw invalidField(field, value, `expected a number of degrees from ${min} to ${max}`)
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

/** The continent implied by a (valid) country code, e.g. DE → EU. */
export function impliedContinent(country: string): string | undefined {
  return continentOf(country)
}
