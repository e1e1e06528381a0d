/**
 * `mb geoip lookup IP`: what selection knows of a client address, as MirrorBrain's
 * `iplookup` shows it: its country, continent, coordinates and AS (from the configured GeoIP
 * and ASN databases), the client network that stickiness keys it by
 * (`select.client_prefix_v4`/`_v6`), and the mirrors whose network (`prefixes`) holds it
 * (the prefix pool), whose AS is its AS (the AS pool), and whose `client_prefixes` admit it.
 */
import ipaddr from 'ipaddr.js'
import type {SelectConfig} from '../select/config.js'
import type {GeoSettings} from './client.js'
import type {Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {listMirrors} from '../mirrors/registry.js'
import {cidrContains, parseCidr} from '../net.js'
import {openGeo} from '../geo/geoip.js'
import {UsageError} from '../errors.js'
import {addressProblem, type IpAddress, parseIp} from '../net.js'

/** A mirror whose CIDR list holds the address, with the CIDR that does. */
export interface PrefixMatch {
  mirror: string
  prefix: string
}

/** The answer of {@link lookupIp}; `--json` prints it as is. */
export interface IpLookup {
  /** The address in canonical form (an IPv4-mapped IPv6 address as IPv4). */
  ip: string
  family: 4 | 6
  country: string | null
  continent: string | null
  /** Degrees, WGS84. */
  latitude: number | null
  longitude: number | null
  asn: number | null
  /** The client network stickiness keys this address by, e.g. `81.2.69.0/24`. */
  network: string
  /** The GeoIP and ASN files read. */
  geoip: string[]
  /** Null when no database was read (`mirrors` not asked, or no store). */
  mirrors: {
    /** Mirrors whose `prefixes` hold the address: the client's prefix pool. */
    prefix: PrefixMatch[]
    /** Mirrors in the address's AS: its AS pool. */
    as: string[]
    /** Mirrors with `client_prefixes` that admit the address (those without admit every client). */
    clientPrefix: PrefixMatch[]
  } | null
}

/** The first of `cidrs` that holds `address`, or undefined. Unparsable entries are skipped. */
function firstHolding(cidrs: string[], address: IpAddress): string | undefined {
  return cidrs.find((cidr) => {
    try {
      return cidrContains(parseCidr(cidr), address)
    } catch {
      return false
    }
  })
}

/**
 * Looks up `text` (see the module doc).
 * @param db the registry to match mirrors in; undefined: `mirrors` is null
 * @throws UsageError when `text` is not an IPv4 or IPv6 address; MbError when a GeoIP file cannot be opened
 */
export async function lookupIp(db: Kysely<DB> | undefined, config: GeoSettings & {select: Pick<SelectConfig, 'client_prefix_v4' | 'client_prefix_v6'>}, text: string): Promise<IpLookup> {
  const address = parseIp(text)
  if (!address) throw new UsageError(`${text} is not an IPv4 or IPv6 address (${addressProblem(text)}); give one such as 203.0.113.7 or 2001:db8::1.`)
  const ip = address.toString()
  const geo = await openGeo({geoip: config.geoip, asnDb: config.asn_db})
  const info = geo.lookup(ip)
  const family = address.kind() === 'ipv4' ? 4 : 6
  const bits = family === 4 ? config.select.client_prefix_v4 : config.select.client_prefix_v6
  const base = family === 4 ? ipaddr.IPv4.networkAddressFromCIDR(`${ip}/${bits}`) : ipaddr.IPv6.networkAddressFromCIDR(`${ip}/${bits}`)
  const network = `${base.toString()}/${bits}`
  const result: IpLookup = {
    ip,
    family,
    country: info.country ?? null,
    continent: info.continent ?? null,
    latitude: info.latitude ?? null,
    longitude: info.longitude ?? null,
    asn: info.asn ?? null,
    network,
    geoip: geo.sources,
    mirrors: null,
  }
  if (!db) return result
  const mirrors = await listMirrors(db)
  const matches = (pick: (m: (typeof mirrors)[number]) => string[]) =>
    mirrors.flatMap((m) => {
      const prefix = firstHolding(pick(m), address)
      return prefix === undefined ? [] : [{mirror: m.identifier, prefix}]
    })
  result.mirrors = {
    prefix: matches((m) => m.prefixes),
    as: result.asn === null ? [] : mirrors.filter((m) => m.asn === result.asn).map((m) => m.identifier),
    clientPrefix: matches((m) => m.client_prefixes),
  }
  return result
}
