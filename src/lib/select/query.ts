/**
 * What one `select()` call asks, resolved once before the mirrors are walked, so that the
 * rules (./rules.ts), pools and ranking read plain fields instead of re-deriving them per
 * mirror.
 */
import {continentOf} from '../geo/countries.js'
import type {IpAddress} from '../net.js'
import {clientNetworkKey, fnv1a32, networkPathKey} from './hash.js'
import type {SelectOptions} from './options.js'
import type {ClientInfo, SelectFile} from './types.js'

const RAD = Math.PI / 180

/** One request's facts. Times in Unix seconds (UTC); codes as the table interned them. */
/** The client facts that `scheme` rules (./rules.ts) may read. */
export interface SchemeFacts {
  /** The client came over HTTPS. */
  https: boolean
  /** The client address is IPv6. */
  v6: boolean
  /** The request carries `Range`. */
  range: boolean
}

export interface Query extends SchemeFacts {
  client: ClientInfo
  /** The parsed client address, undefined when its text did not parse. */
  address: IpAddress | undefined
  file: SelectFile
  /** The client's country, upper case, before substitution. */
  country: string | undefined
  /** The country whose mirrors also count as the client's own (`country_substitutions`). */
  substitute: string | undefined
  continent: string | undefined
  asn: number | undefined
  /**
   * The clock, Unix seconds. NaN on the redirect path when no `request` rule applies to any
   * mirror (nothing reads it then, and reading the wall clock costs as much as a pool).
   */
  now: number
  maxScanAge: number | null
  /** `sync.max_lag_seconds`, or null. */
  maxSyncLag: number | null
  /** Unix seconds the sync lag is measured against: the origin's trace time, else `now`; NaN when no lag limit is set. */
  syncReference: number
  /** `select.unprobed` is `skip`: a scheme not probed yet does not count as up. */
  skipUnprobed: boolean
  /** `select.ipv6` is `require`: an IPv6 client passes over mirrors probed without IPv6. */
  requireIpv6: boolean
  /** An IPv6 client under `select.ipv6: prefer`: mirrors without IPv6 rank last in their pool. */
  preferIpv6: boolean
  /** `held[id] === generation` when the file's mirror set lists mirror `id` (the table's marks). */
  held: Uint32Array
  generation: number
  /** The client's bit in `MirrorTable.excludedFor`: 1 << (https + 2 × v6 + 4 × range), the class the table compiled. */
  schemeBit: number
  /** Interned codes; a code no mirror has gets a number no mirror has. */
  countryCode: number
  substituteCode: number
  continentCode: number
  /** The client position as a unit vector, when GeoIP gave coordinates. */
  hasPosition: boolean
  x: number
  y: number
  z: number
  /** The client network's key for rendezvous hashing (./hash.ts), with the path under `sticky_key: network+path`. */
  networkKey: number
}

/** A query with every field present (one object shape), for a table to refill per call. */
export function emptyQuery(): Query {
  const none = new Uint32Array(0)
  return {
    client: {ip: '', https: false},
    address: undefined,
    file: {path: '', size: 0, mtime: 0, mirrors: []},
    https: false,
    v6: false,
    range: false,
    country: undefined,
    substitute: undefined,
    continent: undefined,
    asn: undefined,
    now: 0,
    maxScanAge: null,
    maxSyncLag: null,
    syncReference: Number.NaN,
    skipUnprobed: false,
    requireIpv6: false,
    preferIpv6: false,
    held: none,
    generation: 0,
    schemeBit: 1,
    countryCode: -1,
    substituteCode: -2,
    continentCode: -1,
    hasPosition: false,
    x: 0,
    y: 0,
    z: 0,
    networkKey: 0,
  }
}

/**
 * Resolves the request into `table.query` (refilled, not allocated, per call: `select()` is
 * synchronous): upper-cases the country and finds its substitute and continent, reads the
 * clock (`options.now`, else the wall clock) when a rule may read it, starts a new generation of the table's holding
 * marks, and computes the client network key (an FNV-1a hash of the text when the address
 * did not parse, which the normal path never meets), mixed with the path's hash under
 * `sticky_key: network+path`.
 */
/** What {@link buildQuery} reads of the mirror table (`MirrorTable`, ./mirror.ts). */
interface QueryTable {
  readonly query: Query
  readonly held: Uint32Array
  nextGeneration(): number
  codeOf(code: string | undefined, absent: number): number
  hasRequestRules(options: SelectOptions): boolean
}

export function buildQuery(table: QueryTable, client: ClientInfo, address: IpAddress | undefined, file: SelectFile, options: SelectOptions, explain: boolean): Query {
  const q = table.query
  const country = client.country ? client.country.toUpperCase() : undefined
  const substitute = country ? options.countrySubstitutions.get(country) : undefined
  const continent = client.continent ?? (country ? continentOf(country) : undefined)
  q.client = client
  q.address = address
  q.file = file
  q.https = client.https
  q.v6 = address !== undefined && address.kind() === 'ipv6'
  q.country = country
  q.substitute = substitute
  q.continent = continent
  q.asn = client.asn
  q.now = explain || table.hasRequestRules(options) ? (options.now ? options.now() : Date.now() / 1000) : Number.NaN
  q.maxScanAge = options.maxScanAgeSeconds
  q.maxSyncLag = options.maxSyncLagSeconds
  q.syncReference = options.maxSyncLagSeconds === null ? Number.NaN : (options.originTrace?.() ?? q.now)
  q.skipUnprobed = options.unprobed === 'skip'
  q.requireIpv6 = options.ipv6 === 'require'
  q.preferIpv6 = q.v6 && options.ipv6 === 'prefer'
  q.held = table.held
  q.generation = table.nextGeneration()
  q.range = client.range === true
  q.schemeBit = 1 << ((q.https ? 1 : 0) | (q.v6 ? 2 : 0) | (q.range ? 4 : 0))
  q.countryCode = table.codeOf(country, -1)
  q.substituteCode = table.codeOf(substitute, -2)
  q.continentCode = table.codeOf(continent, -1)
  const hasPosition = typeof client.latitude === 'number' && typeof client.longitude === 'number'
  q.hasPosition = hasPosition
  if (hasPosition) {
    const lat = client.latitude! * RAD
    const lon = client.longitude! * RAD
    q.x = Math.cos(lat) * Math.cos(lon)
    q.y = Math.cos(lat) * Math.sin(lon)
    q.z = Math.sin(lat)
  }
  const networkKey = address ? clientNetworkKey(address, options.clientPrefixV4, options.clientPrefixV6) : fnv1a32(client.ip)
  q.networkKey = options.stickyKey === 'network+path' ? networkPathKey(networkKey, file.path) : networkKey
  return q
}
