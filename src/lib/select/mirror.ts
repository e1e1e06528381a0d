/**
 * Compiles a mirror row into the shape the selection engine uses on the hot path: CIDRs
 * parsed once, country lists as sets, base URLs ending in `/`, times as Unix seconds.
 * Built once per snapshot, never per request.
 */
import {compileSigner} from '../sign.js'
import type {MirrorRow} from '../db/schema.js'
import {continentOf} from '../geo/countries.js'
import {type Cidr, parseCidr} from '../net.js'
import type {SelectOptions} from './options.js'
import {emptyQuery, type Query, type SchemeFacts} from './query.js'
import {positionFlags} from './distance.js'
import {maxRealm, poolFlags} from './pools.js'
import {ipv6Flags} from './rank.js'
import {ELIGIBILITY_RULES, type ExclusionRule, type RequestRule} from './rules.js'
import type {FamilyCheck, SelectMirror} from './types.js'
import {headerSafe, trimLeadingSlashes, withTrailingSlash} from '../text.js'
import {textArray} from '../db/sql.js'

function cidrs(value: unknown): Cidr[] {
  const out: Cidr[] = []
  for (const text of textArray(value)) {
    if (text) out.push(parseCidr(text))
  }
  return out
}

function codes(value: unknown): Set<string> {
  return new Set(
    textArray(value)
      .map((s) => s.trim().toUpperCase())
      .filter(Boolean),
  )
}

/**
 * A base URL with a trailing `/`, made header-safe ({@link headerSafe}): a mirror's URLs are
 * its base plus an encoded path (select/url.ts), which is printable ASCII, so every URL built
 * on it can go into `Location` and `Link` as it is, even from a row edited in SQL that breaks
 * the registry's rules.
 */
function baseUrl(url: string | null | undefined): string | null {
  if (!url) return null
  return headerSafe(withTrailingSlash(url))
}

/** {@link baseUrl} of a URL that clients may be given: null when it carries user information (RFC 3986 §3.2.1). */
function publicBaseUrl(url: string | null | undefined): string | null {
  if (!url) return null
  const authority = url.slice(url.indexOf('//') + 2).split('/', 1)[0]
  return authority.includes('@') ? null : baseUrl(url)
}

function num(value: unknown): number | null {
  if (value === null || value === undefined || value === '') return null
  const n = Number(value)
  return Number.isFinite(n) ? n : null
}

/** Milliseconds since the epoch of a `Date`, a number of ms, or timestamp text; null when none. */
function epochMs(value: unknown): number | null {
  if (value === null || value === undefined) return null
  const ms = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : Date.parse(String(value))
  return Number.isFinite(ms) ? ms : null
}

/** Unix seconds (fractional) of a maintenance window's end: a moment, so not rounded. */
function maintenanceEnd(value: unknown): number | null {
  const ms = epochMs(value)
  return ms === null ? null : ms / 1000
}

const FAMILY_CHECKS = ['http/ipv4', 'http/ipv6', 'https/ipv4', 'https/ipv6'] as const satisfies readonly FamilyCheck[]

/**
 * The `up` of each probe check in `mirror.status` (`{checks: {'http/ipv4': {up}, …}}`,
 * written by src/lib/probe/state.ts; JSON text or an object), by key; empty when there are
 * none or the shape is foreign.
 */
function familyChecks(status: unknown): Partial<Record<FamilyCheck, boolean>> {
  let value = status
  if (typeof value === 'string') {
    try {
      value = JSON.parse(value)
    } catch {
      return {}
    }
  }
  const checks = (value as {checks?: unknown} | null)?.checks
  const out: Partial<Record<FamilyCheck, boolean>> = {}
  if (typeof checks !== 'object' || checks === null) return out
  for (const key of FAMILY_CHECKS) {
    const up = (checks as Record<string, {up?: unknown} | undefined>)[key]?.up
    if (typeof up === 'boolean') out[key] = up
  }
  return Object.freeze(out)
}

/** A nullable boolean column: null (or absent, as in rows from before migration 0010) stays null. */
function optionalBoolean(value: unknown): boolean | null {
  return value === null || value === undefined ? null : Boolean(value)
}

function unixSeconds(value: unknown): number | null {
  const ms = epochMs(value)
  return ms === null ? null : Math.floor(ms / 1000)
}

/**
 * Compiles one `mirror` row (as read by kysely from `pg` or PGlite; bigint columns may be
 * strings, arrays may be `{…}` text) into a {@link SelectMirror}.
 *
 * - `http_url` / `https_url` get a trailing `/` and are made header-safe; `base_path` gets a
 *   trailing `/` too (or stays '').
 * - `prefixes` and `client_prefixes` are parsed into CIDRs.
 * - `country`/`continent` are upper-cased; a missing continent is derived from the country.
 * - `last_scan_ok_at` and `scan_refused_at` become Unix seconds (UTC); `maintenance_until`
 *   too, keeping fractions.
 * - `http_up` / `https_up` / `ipv6` / `range_ok` stay null when unknown (not probed);
 *   `status` gives the per-scheme-and-family checks (`familyUp`).
 * - `url_changed_at` and `synced_at` become Unix seconds (UTC).
 * - The result is frozen: a `MirrorTable` compiles per-mirror data when it is built, so a
 *   changed mirror must be a new object in a new table (compile the row again).
 *
 * @throws UsageError when a stored CIDR is not valid (the database's `cidr` type prevents it)
 */
export function compileMirror(row: MirrorRow): SelectMirror {
  const country = row.country ? row.country.trim().toUpperCase() || null : null
  const continent = row.continent ? row.continent.trim().toUpperCase() || null : country ? (continentOf(country) ?? null) : null
  const latitude = num(row.latitude)
  const longitude = num(row.longitude)
  const hasPosition = latitude !== null && longitude !== null
  const bare = trimLeadingSlashes(row.base_path ?? '')
  const basePath = bare && withTrailingSlash(bare)
  return Object.freeze({
    id: Number(row.id),
    identifier: row.identifier,
    httpUrl: baseUrl(row.http_url),
    httpsUrl: baseUrl(row.https_url),
    ftpUrl: publicBaseUrl(row.ftp_url),
    rsyncUrl: publicBaseUrl(row.rsync_url),
    country,
    continent,
    latitude: hasPosition ? latitude : null,
    longitude: hasPosition ? longitude : null,
    asn: num(row.asn),
    prefixes: cidrs(row.prefixes),
    clientPrefixes: cidrs(row.client_prefixes),
    excludeCountries: codes(row.exclude_countries),
    otherCountries: codes(row.other_countries),
    score: num(row.score) ?? 0,
    enabled: Boolean(row.enabled),
    up: row.up !== false,
    httpUp: optionalBoolean(row.http_up),
    httpsUp: optionalBoolean(row.https_up),
    ipv6: optionalBoolean(row.ipv6),
    familyUp: familyChecks(row.status),
    rangeOk: optionalBoolean(row.range_ok),
    sign: compileSigner(row.sign_scheme, row.sign_secret, num(row.sign_ttl_seconds)),
    urlChangedAt: unixSeconds(row.url_changed_at),
    syncedAt: unixSeconds(row.synced_at),
    countryOnly: Boolean(row.country_only),
    regionOnly: Boolean(row.region_only),
    asOnly: Boolean(row.as_only),
    prefixOnly: Boolean(row.prefix_only),
    fallback: Boolean(row.fallback),
    fileMaxsize: num(row.file_maxsize),
    basePath,
    lastScanOkAt: unixSeconds(row.last_scan_ok_at),
    needsRescan: Boolean(row.needs_rescan),
    maintenanceUntil: maintenanceEnd(row.maintenance_until),
    scanRefusedAt: unixSeconds(row.scan_refused_at),
    badCopiesSuspectAt: unixSeconds(row.bad_copies_suspect_at ?? null),
  })
}

/** The code number of a mirror without that code (never a client's). */
const NO_CODE = -3
const RAD = Math.PI / 180
/** The client classes by number: bit 0 https, bit 1 IPv6, bit 2 Range (as `Query.schemeBit` counts them). */
const SCHEME_CLASSES: readonly SchemeFacts[] = [0, 1, 2, 3, 4, 5, 6, 7].map((c) => ({https: (c & 1) !== 0, v6: (c & 2) !== 0, range: (c & 4) !== 0}))
const NO_RULES: readonly RequestRule[] = Object.freeze([])

/**
 * Compiled mirrors by id, as `select()` takes them: a `Map` that is read-only once built,
 * plus what the selection steps read per mirror and request, compiled once per table so that
 * the redirect path reads typed arrays instead of a dozen object fields, compares interned
 * country and continent numbers instead of strings, and needs no trigonometry for the
 * distance term. Every per-mirror array is indexed by mirror id (ids are `smallint`).
 *
 * `set`, `delete` and `clear` throw after construction, so the compiled data can never
 * disagree with the map. The scratch buffers make a table single-threaded: `select()` is
 * synchronous, and each worker builds its own table.
 */
export class MirrorTable extends Map<number, SelectMirror> {
  /** The mirrors by id (a dense array: no hash lookup per mirror and request). */
  readonly byId: Array<SelectMirror | undefined> = []
  /** Bit `Query.schemeBit` set when a `mirror` or `scheme` rule (./rules.ts) excludes the mirror for that client class (8 classes: HTTPS, IPv6, Range). */
  readonly excludedFor: Uint8Array
  /** Bits read by the pool step (`poolFlags`, ./pools.ts), the distance step (`positionFlags`, ./distance.ts) and the ranking (`ipv6Flags`, ./rank.ts). */
  readonly flags: Uint8Array
  /** How many mirrors probing found without IPv6 (the ranking splits pools for IPv6 clients only when some are). */
  readonly withoutIpv6: number = 0
  /** The most specific pool its `*_only` flags allow (./pools.ts). */
  readonly maxRealm: Int8Array
  readonly countryCode: Int32Array
  readonly continentCode: Int32Array
  /** The mirror's position as a unit vector (when `positionFlags` is set). */
  readonly posX: Float64Array
  readonly posY: Float64Array
  readonly posZ: Float64Array
  /** Holding marks of the current call, by id, stamped with a generation so nothing is cleared between calls. */
  readonly held: Uint32Array
  /** Per-call buffers indexed by position in the eligible list: pool, pool order, haversine term, rendezvous key. */
  readonly scratch: {realm: Int8Array; order: Int32Array; distance: Float64Array; key: Float64Array}
  /** One query object, refilled by every call (./query.ts). */
  readonly query: Query = emptyQuery()
  private readonly codes = new Map<string, number>()
  private rulesOptions: SelectOptions | undefined
  private rules: Array<readonly RequestRule[]> = []
  private anyRules = false
  private generation = 0
  private sealed = false

  constructor(mirrors: Iterable<SelectMirror> = []) {
    super()
    const list = [...mirrors]
    let slots = 1
    for (const m of list) slots = Math.max(slots, m.id + 1)
    this.excludedFor = new Uint8Array(slots)
    this.flags = new Uint8Array(slots)
    this.maxRealm = new Int8Array(slots)
    this.countryCode = new Int32Array(slots)
    this.continentCode = new Int32Array(slots)
    this.posX = new Float64Array(slots)
    this.posY = new Float64Array(slots)
    this.posZ = new Float64Array(slots)
    this.held = new Uint32Array(slots)
    const n = Math.max(1, list.length)
    this.scratch = {realm: new Int8Array(n), order: new Int32Array(n), distance: new Float64Array(n), key: new Float64Array(n)}
    for (const m of list) {
      super.set(m.id, m)
      this.byId[m.id] = m
      this.compile(m)
      if (m.ipv6 === false) this.withoutIpv6++
    }
    this.sealed = true
  }

  /** The number of a code (mirrors' codes are interned here), or `absent` when no mirror has it. */
  codeOf(code: string | undefined, absent: number): number {
    return code === undefined ? absent : (this.codes.get(code) ?? absent)
  }

  /**
   * The `request` rules (./rules.ts) that apply to each mirror under `options`, by id, in
   * table order: computed for the options object last used (`select()` treats an options
   * object as fixed).
   */
  requestRules(options: SelectOptions): ReadonlyArray<readonly RequestRule[]> {
    if (options === this.rulesOptions) return this.rules
    const byId: Array<readonly RequestRule[]> = []
    const request = (ELIGIBILITY_RULES as readonly ExclusionRule[]).filter((r): r is RequestRule => r.needs === 'request')
    let any = false
    for (const m of this.values()) {
      const rules = request.filter((r) => r.appliesTo === undefined || r.appliesTo(m, options))
      byId[m.id] = rules.length === 0 ? NO_RULES : rules
      if (rules.length > 0) any = true
    }
    this.rulesOptions = options
    this.rules = byId
    this.anyRules = any
    return byId
  }

  /** True when a `request` rule applies to some mirror under `options` (see {@link requestRules}). */
  hasRequestRules(options: SelectOptions): boolean {
    this.requestRules(options)
    return this.anyRules
  }

  /** A new generation of the holding marks (one per `select()` call). */
  nextGeneration(): number {
    this.generation = (this.generation + 1) >>> 0
    if (this.generation === 0) {
      this.held.fill(0)
      this.generation = 1
    }
    return this.generation
  }

  override set(id: number, mirror: SelectMirror): this {
    if (this.sealed) throw new TypeError('MirrorTable is read-only: build a new one')
    return super.set(id, mirror)
  }

  override delete(_id: number): boolean {
    throw new TypeError('MirrorTable is read-only: build a new one')
  }

  override clear(): void {
    throw new TypeError('MirrorTable is read-only: build a new one')
  }

  private intern(code: string | null): number {
    if (code === null) return NO_CODE
    let n = this.codes.get(code)
    if (n === undefined) {
      n = this.codes.size
      this.codes.set(code, n)
    }
    return n
  }

  /** Fills the per-mirror arrays of `m`. */
  private compile(m: SelectMirror): void {
    const id = m.id
    let excluded = 0
    for (const rule of ELIGIBILITY_RULES as readonly ExclusionRule[]) {
      if (rule.needs !== 'mirror' && rule.needs !== 'scheme') continue
      for (let c = 0; c < SCHEME_CLASSES.length; c++) if (rule.excludes(m, SCHEME_CLASSES[c])) excluded |= 1 << c
    }
    this.excludedFor[id] = excluded
    if (m.latitude !== null && m.longitude !== null) {
      const lat = m.latitude * RAD
      const lon = m.longitude * RAD
      this.posX[id] = Math.cos(lat) * Math.cos(lon)
      this.posY[id] = Math.cos(lat) * Math.sin(lon)
      this.posZ[id] = Math.sin(lat)
    }
    this.flags[id] = poolFlags(m) | positionFlags(m) | ipv6Flags(m)
    this.maxRealm[id] = maxRealm(m)
    this.countryCode[id] = this.intern(m.country)
    this.continentCode[id] = this.intern(m.continent)
  }
}

/** Compiles every row into a {@link MirrorTable} (a read-only map by mirror id), as `select()` takes it. */
export function compileMirrors(rows: Iterable<MirrorRow>): MirrorTable {
  const compiled: SelectMirror[] = []
  for (const row of rows) compiled.push(compileMirror(row))
  return new MirrorTable(compiled)
}
