/**
 * The selection engine: MirrorBrain's pool cascade with a weighted, sticky, stateless choice.
 *
 * `select()` is a pure function of (client, file, mirrors, options): no I/O, no clock other
 * than `options.now` (for scan ages), no randomness other than the stable rendezvous hash of
 * (client network, mirror id). The rules are written out in README ("How a mirror is chosen").
 */
import mime from 'mime-types'
import {continentOf} from '../geo/countries.js'
import {EARTH_RADIUS_KM} from '../geo/distance.js'
import {cidrContains, type IpAddress, parseIp} from '../net.js'
import {clientNetworkKey, fnv1a32, rendezvousKey} from './hash.js'
import type {SelectOptions} from './options.js'
import type {Candidate, ClientInfo, Exclusion, ExclusionReason, OriginReason, Realm, SelectFile, SelectMirror, Selection} from './types.js'
import {MirrorTable} from './mirror.js'
import {encodePath, mirrorBase} from './url.js'
import {unixIso} from '../time.js'

export * from './types.js'
export {compileSelectOptions, type SelectOptions} from './options.js'
export {compileMirror, compileMirrors, MirrorTable} from './mirror.js'
export {encodePath, mirrorBase, mirrorUrl} from './url.js'
export {clientNetworkKey, rendezvousKey, uniform} from './hash.js'

const PREFIX = 0
const AS = 1
const COUNTRY = 2
const CONTINENT = 3
const WORLD = 4
const FALLBACK = 5
/** Pool names by index, most specific first. */
export const REALMS: readonly Realm[] = ['prefix', 'as', 'country', 'continent', 'world', 'fallback']

const OTHER = 6 // tentative pool: only other_countries ties the mirror to the client's country
const RAD = Math.PI / 180

// Scratch buffers indexed by position in the eligible list, reused across calls.
let scratchRealm = new Int8Array(256)
let scratchOrder = new Int32Array(256)
let scratchDistance = new Float64Array(256)
let scratchKey = new Float64Array(256)
function growScratch(n: number): void {
  const size = Math.max(n, scratchRealm.length * 2)
  scratchRealm = new Int8Array(size)
  scratchOrder = new Int32Array(size)
  scratchDistance = new Float64Array(size)
  scratchKey = new Float64Array(size)
}

// Per-mirror data compiled once per mirror object and cached by id, checked by identity
// (`compiledOwner[slot] === m`), so that a new snapshot's mirror objects recompile on first
// use. The hot path then reads typed arrays instead of a dozen object fields per mirror and
// request, compares interned country/continent numbers instead of strings, and needs no
// trigonometry for the distance term.
const compiledOwner: Array<SelectMirror | undefined> = []
const mirrorFlags = new Uint16Array(65536)
const mirrorMaxRealm = new Int8Array(65536)
const mirrorCountry = new Int32Array(65536)
const mirrorContinent = new Int32Array(65536)
/** Unix seconds of the last successful scan, NaN when none. */
const mirrorScanOk = new Float64Array(65536)
const posX = new Float64Array(65536)
const posY = new Float64Array(65536)
const posZ = new Float64Array(65536)

/** Enabled, up, score > 0, no rescan pending, and none of the checks that need the client or the file beyond the scan age, scheme and family. */
const PLAIN = 1
const HAS_HTTPS = 2
const HAS_URL = 4
const NO_IPV6 = 8
const HAS_PREFIXES = 16
const HAS_OTHER_COUNTRIES = 32
const IS_FALLBACK = 64
const HAS_POSITION = 128

/** Country and continent codes as small numbers (mirrors' codes are added; clients' codes are only looked up). */
const codeNumbers = new Map<string, number>()
const NO_CODE = -3
function codeNumber(code: string | null): number {
  if (code === null) return NO_CODE
  let n = codeNumbers.get(code)
  if (n === undefined) {
    n = codeNumbers.size
    codeNumbers.set(code, n)
  }
  return n
}

/** The number of a client's code, or `absent` when no mirror has that code. */
function clientCode(code: string | undefined, absent: number): number {
  return code === undefined ? absent : codeNumbers.get(code) ?? absent
}

/** Fills the typed-array slots of `m` (slot = id & 0xffff). */
function compileSlot(m: SelectMirror, slot: number): void {
  compiledOwner[slot] = m
  let flags = 0
  if (m.enabled && m.up && m.score > 0 && !m.needsRescan && !m.basePath && m.fileMaxsize === null && m.clientPrefixes.length === 0 && m.excludeCountries.size === 0) flags |= PLAIN
  if (m.httpsUrl !== null) flags |= HAS_HTTPS
  if (m.httpUrl !== null || m.httpsUrl !== null) flags |= HAS_URL
  if (m.ipv6 === false) flags |= NO_IPV6
  if (m.prefixes.length > 0) flags |= HAS_PREFIXES
  if (m.otherCountries.size > 0) flags |= HAS_OTHER_COUNTRIES
  if (m.fallback) flags |= IS_FALLBACK
  if (m.latitude !== null && m.longitude !== null) {
    flags |= HAS_POSITION
    const lat = m.latitude * RAD
    const lon = m.longitude * RAD
    posX[slot] = Math.cos(lat) * Math.cos(lon)
    posY[slot] = Math.cos(lat) * Math.sin(lon)
    posZ[slot] = Math.sin(lat)
  }
  mirrorFlags[slot] = flags
  mirrorMaxRealm[slot] = maxRealm(m)
  mirrorCountry[slot] = codeNumber(m.country)
  mirrorContinent[slot] = codeNumber(m.continent)
  mirrorScanOk[slot] = m.lastScanOkAt ?? Number.NaN
}

/**
 * The haversine term a = sin²(Δσ/2) between the client (unit vector x, y, z) and the mirror
 * in `slot`, computed as a quarter of the squared chord between their unit vectors (the same
 * quantity: chord = 2 sin(Δσ/2)), without cancellation at short distances. NaN without
 * coordinates. Distance = 2R asin(√a), monotonic in a.
 */
function haversineA(slot: number, x: number, y: number, z: number): number {
  if ((mirrorFlags[slot] & HAS_POSITION) === 0) return Number.NaN
  const dx = posX[slot] - x
  const dy = posY[slot] - y
  const dz = posZ[slot] - z
  return (dx * dx + dy * dy + dz * dz) / 4
}

function kmFromA(a: number): number {
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(a)))
}

function inAny(list: readonly [IpAddress, number][], address: IpAddress): boolean {
  for (let i = 0; i < list.length; i++) if (cidrContains(list[i], address)) return true
  return false
}

// Per-call marks of the mirrors that hold the file, by mirror id (smallint), stamped with a
// generation number so that nothing is cleared between calls. select() is synchronous.
const held = new Uint32Array(65536)
let generation = 0

function origin(reason: OriginReason, detail: string): Selection {
  return {realm: null, ranked: [], excluded: [], origin: {reason, detail}}
}

function cidrList(list: readonly [IpAddress, number][]): string {
  const shown = list.slice(0, 3).map(([a, b]) => `${a.toString()}/${b}`).join(', ')
  return list.length > 3 ? `${shown}, … (${list.length})` : shown
}

/** The most specific pool a mirror's flags allow it in. */
function maxRealm(m: SelectMirror): number {
  return m.prefixOnly ? PREFIX : m.asOnly ? AS : m.countryOnly ? COUNTRY : m.regionOnly ? CONTINENT : WORLD
}

function flagReason(limit: number): ExclusionReason {
  return limit === PREFIX ? 'prefix_only' : limit === AS ? 'as_only' : limit === COUNTRY ? 'country_only' : 'region_only'
}

/**
 * Chooses mirrors for one request.
 *
 * 1. Origin exceptions first (`origin` set, `realm` null, nothing ranked): files under
 *    `minSize`, origin-only patterns, excluded User-Agents, client CIDRs and MIME types.
 * 2. Eligibility of every mirror in `mirrors` (each failure is one {@link Exclusion}, first
 *    failing check wins): enabled, up, score > 0, inside its subtree, holds this version
 *    (`file.mirrors`; `stale` when `file.stale` knows a differing copy), size within
 *    `fileMaxsize`, last scan within `maxScanAgeSeconds`, not `needsRescan`, an https_url for
 *    HTTPS clients (an HTTP or HTTPS URL for others), IPv6 unless an IPv6 client meets a
 *    mirror probed without IPv6, client inside `clientPrefixes` when set, client country not
 *    in `excludeCountries`.
 * 3. Each eligible mirror goes to its most specific pool: prefix (client address in its
 *    prefixes) → AS → country (the client's country or its substitute; `otherCountries`
 *    holding it only when no own-country mirror is usable) → continent → world. Fallback
 *    mirrors form their own last pool. A mirror whose flags forbid its pool
 *    (prefix_only/as_only/country_only/region_only) is excluded.
 * 4. In each pool, with client coordinates known, mirrors farther than
 *    `distanceFactor` × the nearest one's distance (and beyond `distanceFloorKm`) are
 *    excluded as `too_far`; mirrors without coordinates stay.
 * 5. Each pool is ordered by weighted rendezvous hashing of (client network, mirror id) with
 *    the score as weight. The first non-empty pool of prefix…world wins (else fallback, else
 *    the origin with `no_mirror`); `ranked` holds the winning pool, then the later pools,
 *    then the fallback mirrors, with 1-based ranks.
 *
 * @param client    the resolved client (country before substitution); `address` is parsed
 *                  from `ip` when absent
 * @param file      the origin file (size in bytes, mtime in Unix seconds) and its mirror set
 * @param mirrors   every mirror of the snapshot, compiled by `compileMirror()`; a {@link MirrorTable}
 *                  (what `compileMirrors()` and the snapshot build) is read through its dense
 *                  `byId` array
 * @param options   the compiled `select:` section (`compileSelectOptions()`)
 * @param explain   false skips building `excluded` (the redirect hot path needs only `ranked`)
 * @param limit     with `explain` false: build at most this many candidates (the redirect
 *                  needs 1 + max_alternatives); later pools are then not ranked at all.
 *                  Ignored when `explain` is true, so that explanations stay complete.
 */
export function select(client: ClientInfo, file: SelectFile, mirrors: ReadonlyMap<number, SelectMirror>, options: SelectOptions, explain = true, limit = Infinity): Selection {
  // 1. Files the origin always delivers itself.
  if (file.size < options.minSize) return origin('small_file', `${file.size} bytes, below min_size ${options.minSize}`)
  const pattern = options.originOnlyMatch(file.path)
  if (pattern !== undefined) return origin('origin_only', `matches origin_only pattern ${pattern}`)
  if (client.userAgent && options.excludeUserAgents.length > 0) {
    for (const re of options.excludeUserAgents) if (re.test(client.userAgent)) return origin('excluded_agent', `User-Agent matches ${re.source}`)
  }
  const address = client.address ?? parseIp(client.ip)
  if (address && options.excludeClients.length > 0) {
    for (const cidr of options.excludeClients) if (cidrContains(cidr, address)) return origin('excluded_client', `client ${client.ip} is in excluded ${cidr[0].toString()}/${cidr[1]}`)
  }
  if (options.excludeMime.length > 0) {
    const type = mime.lookup(file.path)
    const glob = type ? options.excludeMimeMatch(type) : undefined
    if (glob !== undefined) return origin('excluded_mime', `MIME type ${type} matches ${glob}`)
  }

  // 2. Eligibility.
  generation = (generation + 1) >>> 0
  if (generation === 0) {
    held.fill(0)
    generation = 1
  }
  const fileMirrors = file.mirrors
  // Explaining walks every mirror (each gets a verdict); the hot path walks only the mirrors
  // that hold the file (deduplicated through the marks).
  const all = explain ? Array.from(mirrors.values()) : undefined
  const byId = mirrors instanceof MirrorTable ? mirrors.byId : undefined
  if (all) for (let i = 0; i < fileMirrors.length; i++) held[fileMirrors[i] & 0xffff] = generation
  const total = all ? all.length : fileMirrors.length

  const country = client.country ? client.country.toUpperCase() : undefined
  const substitute = country ? options.countrySubstitutions.get(country) : undefined
  const continent = client.continent ?? (country ? continentOf(country) : undefined)
  const asn = client.asn
  const v6 = address !== undefined && address.kind() === 'ipv6'
  const https = client.https
  const maxAge = options.maxScanAgeSeconds
  const now = maxAge === null ? 0 : options.now ? options.now() : Date.now() / 1000
  const excluded: Exclusion[] = []
  const eligible: SelectMirror[] = []

  for (let k = 0; k < total; k++) {
    let m: SelectMirror | undefined
    if (all) {
      m = all[k]
    } else {
      const id = fileMirrors[k]
      if (held[id & 0xffff] === generation) continue // listed twice
      held[id & 0xffff] = generation
      m = byId !== undefined ? byId[id] : mirrors.get(id)
      if (m === undefined) continue
    }
    const slot = m.id & 0xffff
    if (compiledOwner[slot] !== m) compileSlot(m, slot)
    const flags = mirrorFlags[slot]
    if (!explain && (flags & PLAIN) !== 0) {
      // The hot path: the same verdict as the checks below, from the compiled slot (only
      // the reason, which nobody reads here, would differ in order).
      if (maxAge !== null && !(now - mirrorScanOk[slot] <= maxAge)) continue
      if ((flags & (https ? HAS_HTTPS : HAS_URL)) === 0) continue
      if (v6 && (flags & NO_IPV6) !== 0) continue
      eligible.push(m)
      continue
    }
    let reason: ExclusionReason | undefined
    let detail = ''
    if (!m.enabled) {
      reason = 'disabled'
      if (explain) detail = 'disabled by the operator (`mb mirror enable` turns it back on)'
    } else if (!m.up) {
      reason = 'down'
      if (explain) detail = 'down: the last probe failed'
    } else if (!(m.score > 0)) {
      reason = 'zero_score'
      if (explain) detail = 'score is 0 (takes no traffic)'
    } else if (m.basePath && !file.path.startsWith(m.basePath)) {
      reason = 'not_in_subtree'
      if (explain) detail = `carries only ${m.basePath}`
    } else if (all && held[m.id & 0xffff] !== generation) {
      const stale = file.stale?.get(m.id)
      if (stale) {
        reason = 'stale'
        if (explain) {
          detail =
            stale.size !== file.size
              ? `stale: ${stale.size} bytes, origin ${file.size}`
              : `stale: mtime ${stale.mtime === null ? 'unknown' : unixIso(stale.mtime)}, origin ${unixIso(file.mtime)}`
        }
      } else {
        reason = 'not_held'
        if (explain) detail = m.lastScanOkAt === null ? 'not held: no successful scan yet' : 'not held: its last scan did not list this file'
      }
    } else if (m.fileMaxsize !== null && file.size > m.fileMaxsize) {
      reason = 'too_large'
      if (explain) detail = `${file.size} bytes, above its file_maxsize ${m.fileMaxsize}`
    } else if (maxAge !== null && (m.lastScanOkAt === null || now - m.lastScanOkAt > maxAge)) {
      reason = 'scan_too_old'
      if (explain) detail = m.lastScanOkAt === null ? 'no successful scan' : `last successful scan ${Math.round(now - m.lastScanOkAt)} s ago, max_scan_age_seconds ${maxAge}`
    } else if (m.needsRescan) {
      reason = 'needs_rescan'
      if (explain) detail = 'was down; needs a fresh scan before it is used again'
    } else if (https && m.httpsUrl === null) {
      reason = 'no_https'
      if (explain) detail = 'HTTPS client and the mirror has no https_url'
    } else if (!https && m.httpUrl === null && m.httpsUrl === null) {
      reason = 'no_http'
      if (explain) detail = 'the mirror has no http_url or https_url'
    } else if (v6 && m.ipv6 === false) {
      reason = 'no_ipv6'
      if (explain) detail = 'IPv6 client and probing found no IPv6 on the mirror'
    } else if (m.clientPrefixes.length > 0 && !(address && inAny(m.clientPrefixes, address))) {
      reason = 'client_not_allowed'
      if (explain) detail = `serves only clients in ${cidrList(m.clientPrefixes)}; client ${client.ip}`
    } else if (country !== undefined && m.excludeCountries.size > 0 && m.excludeCountries.has(country)) {
      reason = 'country_excluded'
      if (explain) detail = `excludes clients from ${country}`
    }
    if (reason === undefined) eligible.push(m)
    else if (explain) excluded.push({mirror: m, reason, detail})
  }

  // 3. Pools. realm[i] is the pool of eligible[i], or -1 when its flags exclude it.
  const n = eligible.length
  if (scratchRealm.length < n) growScratch(n)
  const realmOf = scratchRealm
  let ownCountryUsable = false
  // Codes as numbers: a client code no mirror has never matches (-1, -2 against NO_CODE).
  const countryCode = clientCode(country, -1)
  const substituteCode = clientCode(substitute, -2)
  const continentCode = clientCode(continent, -1)
  for (let i = 0; i < n; i++) {
    const m = eligible[i]
    const slot = m.id & 0xffff
    const flags = mirrorFlags[slot]
    let realm: number
    if ((flags & IS_FALLBACK) !== 0) realm = FALLBACK
    else if ((flags & HAS_PREFIXES) !== 0 && address !== undefined && inAny(m.prefixes, address)) realm = PREFIX
    else if (asn !== undefined && m.asn !== null && m.asn === asn) realm = AS
    else if (country !== undefined && (mirrorCountry[slot] === countryCode || mirrorCountry[slot] === substituteCode)) realm = COUNTRY
    else if (country !== undefined && (flags & HAS_OTHER_COUNTRIES) !== 0 && (m.otherCountries.has(country) || (substitute !== undefined && m.otherCountries.has(substitute)))) realm = OTHER
    else if (mirrorContinent[slot] === continentCode) realm = CONTINENT
    else realm = WORLD
    if (realm === COUNTRY && mirrorMaxRealm[slot] >= COUNTRY) ownCountryUsable = true
    realmOf[i] = realm
  }
  let present = 0 // bit p set when pool p has a member
  for (let i = 0; i < n; i++) {
    const m = eligible[i]
    let realm = realmOf[i]
    const other = realm === OTHER
    if (other) realm = ownCountryUsable ? (continent !== undefined && m.continent === continent ? CONTINENT : WORLD) : COUNTRY
    const limit = realm === FALLBACK ? FALLBACK : mirrorMaxRealm[m.id & 0xffff]
    if (realm > limit) {
      if (explain) excluded.push({mirror: m, reason: flagReason(limit), detail: flagDetail(m, limit, client, country, continent, other)})
      realm = -1
    } else {
      present |= 1 << realm
    }
    realmOf[i] = realm
  }

  // 4 and 5. Distance rule and weighted rendezvous order in each pool.
  const hasPosition = typeof client.latitude === 'number' && typeof client.longitude === 'number'
  let clientX = 0
  let clientY = 0
  let clientZ = 0
  if (hasPosition) {
    const lat = client.latitude! * RAD
    const lon = client.longitude! * RAD
    clientX = Math.cos(lat) * Math.cos(lon)
    clientY = Math.cos(lat) * Math.sin(lon)
    clientZ = Math.sin(lat)
  }
  const networkKey = address ? clientNetworkKey(address, options.clientPrefixV4, options.clientPrefixV6) : fnv1a32(client.ip) // an address text that did not parse (never on the normal path)
  const ranked: Candidate[] = []
  const idx = scratchOrder
  const dist = scratchDistance
  const key = scratchKey
  let winner = -1
  let encodedWhole: string | undefined
  const max = explain ? Infinity : Math.max(1, limit)
  for (let p = 0; p <= FALLBACK && ranked.length < max; p++) {
    if ((present & (1 << p)) === 0) continue
    let count = 0
    for (let i = 0; i < n; i++) if (realmOf[i] === p) idx[count++] = i
    if (hasPosition) {
      // Compare haversine terms ("a", monotonic in distance) and take asin only where needed.
      let nearestA = Infinity
      for (let k = 0; k < count; k++) {
        const i = idx[k]
        const a = haversineA(eligible[i].id & 0xffff, clientX, clientY, clientZ)
        dist[i] = a
        if (a < nearestA) nearestA = a
      }
      if (nearestA < Infinity && count > 1) {
        const nearest = kmFromA(nearestA)
        const limitKm = Math.max(nearest * options.distanceFactor, options.distanceFloorKm)
        const half = limitKm / (2 * EARTH_RADIUS_KM)
        const limitA = half >= Math.PI / 2 ? Infinity : Math.sin(half) ** 2
        let kept = 0
        for (let k = 0; k < count; k++) {
          const i = idx[k]
          if (dist[i] > limitA) {
            if (explain) excluded.push({mirror: eligible[i], reason: 'too_far', detail: `${Math.round(kmFromA(dist[i]))} km away, beyond ${options.distanceFactor} x the nearest ${REALMS[p]} mirror's ${Math.round(nearest)} km`})
          } else {
            idx[kept++] = i
          }
        }
        count = kept
      }
    }
    for (let k = 0; k < count; k++) {
      const m = eligible[idx[k]]
      key[idx[k]] = rendezvousKey(networkKey, m.id, m.score)
    }
    // Bounded insertion sort by key (ties by id): the first `want` places in order, no
    // comparator calls, no allocation. Pools are small.
    const want = Math.min(count, max - ranked.length)
    let filled = 0
    for (let k = 0; k < count; k++) {
      const i = idx[k]
      const ki = key[i]
      const id = eligible[i].id
      let j: number
      if (filled < want) {
        j = filled - 1
        filled++
      } else {
        const last = idx[want - 1]
        if (!(key[last] > ki || (key[last] === ki && eligible[last].id > id))) continue
        j = want - 2
      }
      while (j >= 0 && (key[idx[j]] > ki || (key[idx[j]] === ki && eligible[idx[j]].id > id))) {
        idx[j + 1] = idx[j]
        j--
      }
      idx[j + 1] = i
    }
    count = want
    if (winner < 0) winner = p
    const realm = REALMS[p]
    for (let k = 0; k < count; k++) {
      const i = idx[k]
      const m = eligible[i]
      const url = m.basePath ? mirrorBase(m, https)! + encodePath(file.path.slice(m.basePath.length)) : mirrorBase(m, https)! + (encodedWhole ??= encodePath(file.path))
      const candidate: Candidate = {mirror: m, realm, rank: ranked.length + 1, url}
      if (explain && hasPosition && !Number.isNaN(dist[i])) candidate.distanceKm = kmFromA(dist[i])
      ranked.push(candidate)
    }
  }

  if (winner < 0) {
    const total = mirrors.size
    return {realm: null, ranked, excluded, origin: {reason: 'no_mirror', detail: total === 0 ? 'no mirrors are registered' : `no eligible mirror holds this version (${total} mirror${total === 1 ? '' : 's'} checked)`}}
  }
  return {realm: REALMS[winner], ranked, excluded}
}

function flagDetail(m: SelectMirror, limit: number, client: ClientInfo, country: string | undefined, continent: string | undefined, other: boolean): string {
  switch (limit) {
    case PREFIX:
      return `prefix_only: client ${client.ip} is outside its prefixes ${m.prefixes.length > 0 ? cidrList(m.prefixes) : '(none)'}`
    case AS:
      return `as_only: mirror in AS${m.asn ?? '?'}, client in ${client.asn === undefined ? 'an unknown AS' : `AS${client.asn}`}`
    case COUNTRY:
      return other
        ? `country_only: mirror in ${m.country ?? '?'} serves ${country} only when ${country} has no mirror of its own`
        : `country_only: mirror in ${m.country ?? '?'}, client in ${country ?? 'an unknown country'}`
    default:
      return `region_only: mirror in ${m.continent ?? '?'}, client in ${continent ?? 'an unknown continent'}`
  }
}
