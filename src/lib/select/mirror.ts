/**
 * Compiles a mirror row into the shape the selection engine uses on the hot path: CIDRs
 * parsed once, country lists as sets, base URLs ending in `/`, times as Unix seconds.
 * Built once per snapshot, never per request.
 */
import type {MirrorRow} from '../db/schema.js'
import {continentOf} from '../geo/countries.js'
import {type Cidr, parseCidr} from '../net.js'
import type {SelectMirror} from './types.js'
import {trimLeadingSlashes, withTrailingSlash} from '../text.js'
import {textArray} from '../db/sql.js'

function cidrs(value: unknown): Cidr[] {
  const out: Cidr[] = []
  for (const text of textArray(value)) {
    if (text) out.push(parseCidr(text))
  }
  return out
}

function codes(value: unknown): Set<string> {
  return new Set(textArray(value).map((s) => s.trim().toUpperCase()).filter(Boolean))
}

function baseUrl(url: string | null | undefined): string | null {
  if (!url) return null
  return withTrailingSlash(url)
}

function num(value: unknown): number | null {
  if (value === null || value === undefined || value === '') return null
  const n = Number(value)
  return Number.isFinite(n) ? n : null
}

function unixSeconds(value: unknown): number | null {
  if (value === null || value === undefined) return null
  const ms = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : Date.parse(String(value))
  return Number.isFinite(ms) ? Math.floor(ms / 1000) : null
}

/**
 * Compiles one `mirror` row (as read by kysely from `pg` or PGlite; bigint columns may be
 * strings, arrays may be `{…}` text) into a {@link SelectMirror}.
 *
 * - `http_url` / `https_url` get a trailing `/`; `base_path` too (or stays '').
 * - `prefixes` and `client_prefixes` are parsed into CIDRs.
 * - `country`/`continent` are upper-cased; a missing continent is derived from the country.
 * - `last_scan_ok_at` becomes Unix seconds (UTC).
 * - The result is frozen: `select()` caches per-mirror data by object identity, so a changed
 *   mirror must be a new object (compile the row again).
 *
 * @throws UsageError when a stored CIDR is not valid (the database's `cidr` type prevents it)
 */
export function compileMirror(row: MirrorRow): SelectMirror {
  const country = row.country ? row.country.trim().toUpperCase() || null : null
  const continent = row.continent ? row.continent.trim().toUpperCase() || null : country ? continentOf(country) ?? null : null
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
    ipv6: row.ipv6 === null || row.ipv6 === undefined ? null : Boolean(row.ipv6),
    countryOnly: Boolean(row.country_only),
    regionOnly: Boolean(row.region_only),
    asOnly: Boolean(row.as_only),
    prefixOnly: Boolean(row.prefix_only),
    fallback: Boolean(row.fallback),
    fileMaxsize: num(row.file_maxsize),
    basePath,
    lastScanOkAt: unixSeconds(row.last_scan_ok_at),
    needsRescan: Boolean(row.needs_rescan),
  })
}

/**
 * Compiled mirrors by id, as `select()` takes them: a `Map` that is read-only once built,
 * plus `byId`, a dense array indexed by id (ids are `smallint`), which spares `select()` a
 * hash lookup per mirror and request. `set`, `delete` and `clear` throw after construction,
 * so the array can never disagree with the map.
 */
export class MirrorTable extends Map<number, SelectMirror> {
  readonly byId: Array<SelectMirror | undefined> = []
  private sealed = false

  constructor(mirrors: Iterable<SelectMirror> = []) {
    super()
    for (const m of mirrors) {
      super.set(m.id, m)
      this.byId[m.id] = m
    }
    this.sealed = true
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
}

/** Compiles every row into a {@link MirrorTable} (a read-only map by mirror id), as `select()` takes it. */
export function compileMirrors(rows: Iterable<MirrorRow>): MirrorTable {
  const compiled: SelectMirror[] = []
  for (const row of rows) compiled.push(compileMirror(row))
  return new MirrorTable(compiled)
}
