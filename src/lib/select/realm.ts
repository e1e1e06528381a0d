/**
 * The pools of step 3, as small numbers most specific first (the order in which a client's
 * pools are tried), with the names `Selection` reports.
 */
import type {Realm, SelectMirror} from './types.js'

export const PREFIX = 0
export const AS = 1
export const COUNTRY = 2
export const CONTINENT = 3
export const WORLD = 4
export const FALLBACK = 5
/** Tentative pool while assigning: only `otherCountries` ties the mirror to the client's country. */
export const OTHER = 6

/** Pool names by number. */
export const REALMS: readonly Realm[] = ['prefix', 'as', 'country', 'continent', 'world', 'fallback']

/** The most specific pool a mirror's `*_only` flags allow it in (WORLD when none is set). */
export function maxRealm(m: SelectMirror): number {
  return m.prefixOnly ? PREFIX : m.asOnly ? AS : m.countryOnly ? COUNTRY : m.regionOnly ? CONTINENT : WORLD
}
