/**
 * The client a command selects for (`mb file lookup --client-ip`, `mb metalink --client-ip`):
 * the address checked and made canonical, and GeoIP opened from the configured databases.
 */
import {UsageError} from '../errors.js'
import {openGeo} from '../geo/geoip.js'
import {addressProblem, parseIp} from '../net.js'
import type {ClientFacts, GeoLookup} from '../select/context.js'

/**
 * Parses a `--client-ip` value into the client facts of a plain request over `https`.
 * @throws UsageError when the value is not an IPv4 (dotted quad) or IPv6 address
 */
export function clientFromFlag(text: string, https: boolean): ClientFacts {
  const address = parseIp(text)
  if (!address) throw new UsageError(`--client-ip ${text} is not an IPv4 or IPv6 address (${addressProblem(text)}); pass one such as 203.0.113.7 or 2001:db8::1.`)
  return {ip: address.toString(), address, https}
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
