/**
 * Step 3 of `select()`: each eligible mirror goes to its most specific pool: prefix (client
 * address in its prefixes) → AS → country (the client's country or its substitute, or a
 * mirror whose `otherCountries` holds either: its admin offered it to that country, as
 * MirrorBrain counts it) → continent → world. Fallback mirrors form their own last pool. A mirror whose `*_only` flag forbids
 * its pool is excluded (prefix_only, as_only, country_only, region_only).
 */
import type {Query} from './query.js'
import {cidrList, inAny} from './rules.js'
import type {Exclusion, PoolReason, Realm, SelectMirror} from './types.js'

// The pools as small numbers, most specific first (the order in which they are tried), and
// the bits of `MirrorTable.flags` this step reads. Module-private on purpose: V8 folds a
// module's own constants into optimised code, but loads exported or imported ones from their
// module cell on every use, which cost this per-mirror loop a sixth of its time.
const PREFIX = 0
const AS = 1
const COUNTRY = 2
const CONTINENT = 3
const WORLD = 4
const FALLBACK = 5
const HAS_PREFIXES = 1
const HAS_OTHER_COUNTRIES = 2
const IS_FALLBACK = 4

/** Pool names by number (the number is the index). */
export const REALMS: readonly Realm[] = ['prefix', 'as', 'country', 'continent', 'world', 'fallback']

/**
 * True when a redirect from `realm` leaves the client's own tier: no mirror of its network,
 * AS or country was eligible, so it is sent to its continent, the world or a fallback.
 */
export function outsideOwnTier(realm: Realm): boolean {
  return realm === 'continent' || realm === 'world' || realm === 'fallback'
}

/** The most specific pool a mirror's `*_only` flags allow it in (WORLD when none is set). */
export function maxRealm(m: SelectMirror): number {
  return m.prefixOnly ? PREFIX : m.asOnly ? AS : m.countryOnly ? COUNTRY : m.regionOnly ? CONTINENT : WORLD
}

/** The bits of `MirrorTable.flags` that this step reads, for one mirror. */
export function poolFlags(m: SelectMirror): number {
  return (m.prefixes.length > 0 ? HAS_PREFIXES : 0) | (m.otherCountries.size > 0 ? HAS_OTHER_COUNTRIES : 0) | (m.fallback ? IS_FALLBACK : 0)
}

/**
 * Writes the pool of `eligible[i]` to `realmOf[i]` (-1 when its flags exclude it, then
 * appended to `excluded` when given).
 * @returns the pools that have a member, as bits (bit p for pool p)
 */
/** The mirror table's columns that this step reads (`MirrorTable`, ./mirror.ts). */
interface PoolColumns {
  readonly flags: Uint8Array
  readonly countryCode: Int32Array
  readonly continentCode: Int32Array
  readonly maxRealm: Int8Array
}

export function assignPools(table: PoolColumns, q: Query, eligible: readonly SelectMirror[], realmOf: Int8Array, excluded: Exclusion[] | undefined): number {
  const n = eligible.length
  // The table's arrays and the client's codes in locals: this loop runs for every eligible mirror.
  const {flags, countryCode, continentCode, maxRealm} = table
  const {address, asn, country, substitute, countryCode: clientCountry, substituteCode: clientSubstitute, continentCode: clientContinent} = q
  let present = 0
  for (let i = 0; i < n; i++) {
    const m = eligible[i]
    const id = m.id
    const f = flags[id]
    let realm: number
    if ((f & IS_FALLBACK) !== 0) realm = FALLBACK
    else if ((f & HAS_PREFIXES) !== 0 && inAny(m.prefixes, address)) realm = PREFIX
    else if (asn !== undefined && m.asn !== null && m.asn === asn) realm = AS
    else if (country !== undefined && (countryCode[id] === clientCountry || countryCode[id] === clientSubstitute)) realm = COUNTRY
    else if (country !== undefined && (f & HAS_OTHER_COUNTRIES) !== 0 && (m.otherCountries.has(country) || (substitute !== undefined && m.otherCountries.has(substitute)))) realm = COUNTRY
    else realm = continentCode[id] === clientContinent ? CONTINENT : WORLD
    const limit = realm === FALLBACK ? FALLBACK : maxRealm[id]
    if (realm > limit) {
      if (excluded) excluded.push({mirror: m, reason: flagReason(limit), detail: flagDetail(m, limit, q)})
      realm = -1
    } else {
      present |= 1 << realm
    }
    realmOf[i] = realm
  }
  return present
}

/**
 * `select.ranking: score`: puts every pooled mirror but the fallback ones into the world pool,
 * so that one weighted rendezvous over all of them decides (distance and location no longer
 * rank; the `*_only` flags, already applied, still exclude).
 * @returns the pools that have a member afterwards, as bits
 */
export function onePool(realmOf: Int8Array, n: number, present: number): number {
  if ((present & ~(1 << FALLBACK)) === 0) return present
  for (let i = 0; i < n; i++) if (realmOf[i] >= 0 && realmOf[i] < FALLBACK) realmOf[i] = WORLD
  return (present & (1 << FALLBACK)) | (1 << WORLD)
}

function flagReason(limit: number): PoolReason {
  return limit === PREFIX ? 'prefix_only' : limit === AS ? 'as_only' : limit === COUNTRY ? 'country_only' : 'region_only'
}

/** Where a mirror or client is, by a country, continent or AS, or `location unknown`. */
function place(prefix: string, code: string | null | undefined, what = 'location'): string {
  return code === null || code === undefined ? `${prefix} ${what} unknown` : `${prefix} in ${code}`
}

/** Why a pool flag excludes `m`, without the flag's name (the reason is printed beside it). */
function flagDetail(m: SelectMirror, limit: number, q: Query): string {
  switch (limit) {
    case PREFIX:
      return `client ${q.client.ip} is outside its prefixes ${m.prefixes.length > 0 ? cidrList(m.prefixes) : '(none)'}`
    case AS:
      return `${place('mirror', m.asn === null ? null : `AS${m.asn}`, 'AS')}, ${place('client', q.client.asn === undefined ? null : `AS${q.client.asn}`, 'AS')}`
    case COUNTRY:
      return `${place('mirror', m.country)}, ${place('client', q.country)}`
    default:
      return `${place('mirror', m.continent)}, ${place('client', q.continent)}`
  }
}
