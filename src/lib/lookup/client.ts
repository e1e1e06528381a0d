/**
 * The client a command selects for (`mb file lookup --client-ip`, `mb metalink --client-ip`):
 * the address checked and made canonical, and GeoIP opened from the configured databases.
 */
import {UsageError} from '../errors.js'
import {isCountryCode} from '../geo/countries.js'
import {openGeo} from '../geo/geoip.js'
import {addressProblem, parseIp} from '../net.js'
import type {ClientFacts, GeoLookup} from '../select/context.js'

/**
 * Parses a `--client-ip` value into the client facts of a plain request over `https`, in
 * `country` when given (`--country`: GeoIP's country and location are replaced, as a
 * trusted `?country=` does on `mb serve`).
 * @throws UsageError when the value is not an IPv4 (dotted quad) or IPv6 address, or
 *   `country` is not an ISO 3166-1 alpha-2 code
 */
export function clientFromFlag(text: string, https: boolean, country?: string): ClientFacts {
  const address = parseIp(text)
  if (!address) throw new UsageError(`--client-ip ${text} is not an IPv4 or IPv6 address (${addressProblem(text)}); pass one such as 203.0.113.7 or 2001:db8::1.`)
  if (country === undefined) return {ip: address.toString(), address, https}
  return {ip: address.toString(), address, https, country: forcedCountry(country)}
}

/**
 * A forced client country (`mb file lookup --country`, as `?country=` forces it on
 * `mb serve`), upper-cased; its continent then comes from the country (../geo/countries.ts).
 * @throws UsageError when `text` is not an ISO 3166-1 alpha-2 code
 */
function forcedCountry(text: string): string {
  const code = text.toUpperCase()
  if (!isCountryCode(code)) throw new UsageError(`--country ${JSON.stringify(text)} is not an ISO 3166-1 alpha-2 country code; pass one such as DE or RU.`)
  return code
}

/** The GeoIP settings of a configuration (`geoip`, `asn_db`). */
export interface GeoSettings {
  geoip: string[]
  asn_db?: string
}

/** Opens the GeoIP and ASN databases of `config` (`geoip`, `asn_db`; default the bundled data). */
export async function configuredGeo(config: GeoSettings): Promise<GeoLookup> {
  return openGeo({geoip: config.geoip, asnDb: config.asn_db})
}
