/**
 * ISO 3166-1 alpha-2 countries and their continents, from the `countries-list` package,
 * corrected where it parts from MaxMind's GeoIP2 databases (which take GeoNames' continent):
 * a country given by name (a forced `?country=`, a mirror's `--country`) must land on the
 * continent a GeoIP lookup of an address there gives. Continent codes are the seven used by
 * MaxMind and MirrorBrain: AF AN AS EU NA OC SA.
 */
import {continents, countries} from 'countries-list'

/** True when `code` (any case) is an assigned ISO 3166-1 alpha-2 code. */
export function isCountryCode(code: string): boolean {
  return Object.hasOwn(countries, code.toUpperCase())
}

/** True when `code` (any case) is one of AF AN AS EU NA OC SA. */
export function isContinentCode(code: string): boolean {
  return Object.hasOwn(continents, code.toUpperCase())
}

/**
 * Where `countries-list` names another continent than MaxMind's GeoIP2 data for a country
 * that spans two: `countries-list` puts Russia in Asia, GeoIP2 (and so every lookup of a
 * Russian address) in Europe. test/unit/geo.test.ts checks every country of MaxMind's test
 * databases against {@link continentOf}.
 */
const GEOIP_CONTINENT: Readonly<Record<string, string>> = {RU: 'EU'}

/**
 * The continent code of an ISO country code (any case) as MaxMind's GeoIP2 data gives it,
 * or undefined for an unknown code.
 */
export function continentOf(country: string): string | undefined {
  const code = country.toUpperCase()
  const entry = (countries as Record<string, {continent: string}>)[code]
  return entry === undefined ? undefined : (GEOIP_CONTINENT[code] ?? entry.continent)
}
