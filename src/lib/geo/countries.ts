/**
 * ISO 3166-1 alpha-2 countries and their continents, from the `countries-list` package.
 * Continent codes are the seven used by MaxMind and MirrorBrain: AF AN AS EU NA OC SA.
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

/** The continent code of an ISO country code, or undefined for an unknown code. */
export function continentOf(country: string): string | undefined {
  const entry = (countries as Record<string, {continent: string}>)[country.toUpperCase()]
  return entry?.continent
}
