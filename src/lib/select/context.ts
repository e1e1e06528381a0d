/**
 * The inputs of one `select()` call, built the same way for `mb serve`, `mb file lookup` and
 * `mb metalink`: the client's facts from the request (or the command line) completed by a
 * GeoIP lookup, plus the file, the mirrors and the compiled options.
 */
import type {GeoInfo} from '../geo/geoip.js'
import {continentOf} from '../geo/countries.js'
import type {IpAddress} from '../net.js'
import {clientNetworkKey} from './hash.js'
import type {SelectOptions} from './options.js'
import type {ClientInfo, SelectFile, SelectMirror} from './types.js'

/** A GeoIP lookup: `{}` for an unknown or unparsable address, never throws (what `openGeo()` returns). */
export interface GeoLookup {
  lookup(ip: string): Readonly<GeoInfo>
}

/** What the request or the command line says about the client. */
export interface ClientFacts {
  /** Canonical address text (IPv4-mapped IPv6 reduced to IPv4); '' when unknown. */
  ip: string
  address?: IpAddress
  /** The request arrived over HTTPS (directly or through a trusted proxy). */
  https: boolean
  userAgent?: string
  /** The request carries `Range`. */
  range?: boolean
  /**
   * A country to select for instead of GeoIP's (ISO 3166-1 alpha-2, upper case, already
   * checked): the continent follows it and the coordinates are dropped, so that the
   * distance rule does not measure from elsewhere. Who may set it is the caller's decision
   * (`mb serve`: `CountryQueryTrust` in src/lib/serve/delivery/client-address.ts).
   */
  country?: string
}

/** Everything one `select()` call takes, in its argument order. */
export interface SelectionContext {
  client: ClientInfo
  file: SelectFile
  mirrors: ReadonlyMap<number, SelectMirror>
  options: SelectOptions
}

/**
 * The client as selection sees it: GeoIP's country, continent, coordinates and AS for
 * `facts.ip`, or `facts.country` instead of GeoIP's location (the continent follows it and
 * the coordinates are dropped). `geoCountry` keeps GeoIP's country either way. Pure apart
 * from the (in-memory) GeoIP lookup.
 */
export function clientInfo(facts: ClientFacts, geo: GeoLookup): ClientInfo {
  const g = geo.lookup(facts.ip)
  const client: ClientInfo = {
    ip: facts.ip,
    address: facts.address,
    country: g.country,
    geoCountry: g.country,
    continent: g.continent,
    latitude: g.latitude,
    longitude: g.longitude,
    asn: g.asn,
    https: facts.https,
    userAgent: facts.userAgent,
    range: facts.range === true,
  }
  if (facts.country !== undefined) {
    client.country = facts.country
    client.continent = continentOf(facts.country)
    client.latitude = undefined
    client.longitude = undefined
  }
  return client
}

/**
 * Builds the selection context of one request: the client ({@link clientInfo}), then the
 * file, mirrors and options as given.
 */
export function selectionContext(facts: ClientFacts, geo: GeoLookup, file: SelectFile, mirrors: ReadonlyMap<number, SelectMirror>, options: SelectOptions): SelectionContext {
  return {client: clientInfo(facts, geo), file, mirrors, options}
}

/**
 * The client's network as text: its sticky network key (the /24 or /48 it sits in, by
 * `select.client_prefix_v4` / `_v6`; ./hash.ts), or its address when it has none. What the
 * scans on demand count as one asker (src/lib/scan/demand.ts).
 */
export function clientNetwork(client: Pick<ClientInfo, 'ip' | 'address'>, options: Pick<SelectOptions, 'clientPrefixV4' | 'clientPrefixV6'>): string {
  return client.address === undefined ? client.ip : String(clientNetworkKey(client.address, options.clientPrefixV4, options.clientPrefixV6))
}
