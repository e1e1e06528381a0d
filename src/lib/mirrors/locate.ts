/**
 * Locating a mirror from its host, as MirrorBrain's `mb new` and `mb update` do: the host of
 * its first URL (HTTP, HTTPS, FTP, rsync) is resolved to its IPv4 and IPv6 addresses (A and
 * AAAA), and each address is looked up in the GeoIP and ASN databases (src/lib/geo/geoip.ts).
 * The location is the first address's that GeoIP knows (IPv4 first); the countries of all
 * addresses are reported, so that a host spread over several countries (a CDN, anycast) can
 * be warned about.
 *
 * Resolution uses the system resolver (`getaddrinfo`: /etc/hosts, then DNS), or, when
 * `MB_DNS_SERVERS` is set (comma-separated `IP` or `IP:PORT`, for tests and split-horizon
 * setups), those DNS servers only, through node:dns `Resolver`.
 */
import {Resolver, lookup} from 'node:dns/promises'
import {isIP} from 'node:net'
import type {GeoResolver} from '../geo/geoip.js'
import {MbError} from '../errors.js'
import {isLocalAddress} from '../net.js'

/** What locating a host found. Coordinates in degrees (WGS84). */
export interface Location {
  host: string
  /** The addresses it resolved to, IPv4 first. */
  addresses: string[]
  country: string | null
  continent: string | null
  latitude: number | null
  longitude: number | null
  asn: number | null
  /** Distinct countries of all addresses that GeoIP knows, in address order. */
  countries: string[]
}

/** The mirror URL fields, in the order their host is taken. */
const URL_FIELDS = ['http_url', 'https_url', 'ftp_url', 'rsync_url'] as const

/** The host of a mirror URL (`rsync://`, `host::module` and bracketed IPv6 included), or undefined. */
function urlHost(url: string): string | undefined {
  const daemon = /^([^/:@\s]+)::/.exec(url)
  if (daemon) return daemon[1]
  try {
    const host = new URL(url).hostname
    return host.startsWith('[') ? host.slice(1, -1) : host || undefined
  } catch {
    return undefined
  }
}

/** The host of the first URL of `mirror` (HTTP, HTTPS, FTP, rsync), or undefined when it has none. */
export function mirrorHost(mirror: Partial<Record<(typeof URL_FIELDS)[number], string | null | undefined>>): string | undefined {
  for (const field of URL_FIELDS) {
    const url = mirror[field]
    if (url) return urlHost(url)
  }
  return undefined
}

/** IPv4 and IPv6 addresses of `host` (see the module doc). @throws MbError LOCATE_FAILED when it has none */
async function resolveHost(host: string): Promise<string[]> {
  if (isIP(host)) return [host]
  const servers = (process.env.MB_DNS_SERVERS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  let addresses: string[] = []
  let failure = ''
  if (servers.length > 0) {
    const resolver = new Resolver({timeout: 5000, tries: 2})
    resolver.setServers(servers)
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(host), resolver.resolve6(host)])
    if (v4.status === 'fulfilled') addresses.push(...v4.value)
    else failure = (v4.reason as NodeJS.ErrnoException).code ?? String(v4.reason)
    if (v6.status === 'fulfilled') addresses.push(...v6.value)
  } else {
    try {
      addresses = (await lookup(host, {all: true})).sort((a, b) => a.family - b.family).map((a) => a.address)
    } catch (error) {
      failure = (error as NodeJS.ErrnoException).code ?? String(error)
    }
  }
  if (addresses.length === 0) throw new MbError(`Cannot locate ${host}: it does not resolve to any address (${failure || 'no A or AAAA record'}).`, {code: 'LOCATE_FAILED'})
  return [...new Set(addresses)]
}

/**
 * Locates `host`: its addresses and what GeoIP says of them (see the module doc).
 * @throws MbError LOCATE_FAILED when the host does not resolve
 */
export async function locateHost(host: string, geo: GeoResolver): Promise<Location> {
  const addresses = await resolveHost(host)
  const location: Location = {host, addresses, country: null, continent: null, latitude: null, longitude: null, asn: null, countries: []}
  for (const address of addresses) {
    const info = geo.lookup(address)
    if (info.country && !location.countries.includes(info.country)) location.countries.push(info.country)
    if (location.country === null && info.country) {
      location.country = info.country
      location.continent = info.continent ?? null
      location.latitude = info.latitude ?? null
      location.longitude = info.longitude ?? null
    }
    if (location.asn === null && info.asn !== undefined) location.asn = info.asn
  }
  return location
}

/**
 * One line saying what was found: `81.2.69.142 -> GB (EU), 51.5142,-0.0931, AS 20712`; a host
 * whose addresses are all loopback or private (a mirror tried out on one machine) is said to
 * be one, since no GeoIP database places such an address.
 */
export function describeLocation(l: Location): string {
  const local = l.addresses.length > 0 && l.addresses.every(isLocalAddress)
  const where = l.country ? `${l.country}${l.continent ? ` (${l.continent})` : ''}` : `no country known${local ? ' (loopback or private addresses, which GeoIP does not place)' : ''}`
  const coordinates = l.latitude !== null && l.longitude !== null ? `, ${l.latitude},${l.longitude}` : ''
  return `${l.host} (${l.addresses.join(', ')}) -> ${where}${coordinates}${l.asn !== null ? `, AS ${l.asn}` : ''}`
}

/** The warning for a host whose addresses lie in several countries, or undefined. */
export function severalCountries(l: Location): string | undefined {
  if (l.countries.length < 2) return undefined
  return `${l.host} resolves to addresses in several countries (${l.countries.join(', ')}); ${l.country} was taken. Give --country to choose another.`
}
