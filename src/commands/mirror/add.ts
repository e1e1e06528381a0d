import {closeSync, openSync, readSync} from 'node:fs'
import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {addMirror, resolveMirror} from '../../lib/mirrors/registry.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {IDENTIFIER_RULE, validateMirrorInput} from '../../lib/mirrors/validate.js'
import {mirrorRecord, mirrorSummary} from '../../lib/mirrors/render.js'
import {renderRecord} from '../../lib/output.js'
import {describeProbe, probeOnce, probeOnceJson} from '../../lib/probe/once.js'
import {openGeo} from '../../lib/geo/geoip.js'
import {MbError, UsageError, errorMessage} from '../../lib/errors.js'
import type {MirrorInput} from '../../lib/mirrors/fields.js'
import {describeLocation, type Location, locateHost, mirrorHost, severalCountries} from '../../lib/mirrors/locate.js'

/**
 * `--[no-]probe` of `mb mirror add` and `mb mirror enable`: one probe of the mirror right
 * after the change, reported but never failing the command.
 */
export const probeFlag = Flags.boolean({
  description:
    'probe the mirror once right away and report what it found (default); --no-probe skips it. A failed probe does not fail the command: the mirror is then down. Never probed, it counts as up only under select.unprobed: use',
  allowNo: true,
  default: true,
})

/**
 * The mirror field flags shared by `mb mirror add` and `mb mirror edit`. On edit, an empty
 * value (`--asn ''`) clears an optional field.
 */
export const mirrorFieldFlags = {
  'http-url': Flags.string({description: 'HTTP base URL (http:// only), e.g. http://mirror.example.org/pub/', helpGroup: 'URLS'}),
  'https-url': Flags.string({description: 'HTTPS base URL (https:// only)', helpGroup: 'URLS'}),
  'rsync-url': Flags.string({description: 'rsync URL for scans: rsync://[user[:pass]@]host/module/path or host::module/path', helpGroup: 'URLS'}),
  'ftp-url': Flags.string({description: 'FTP URL for scans: ftp:// or ftps://, credentials allowed (never printed)', helpGroup: 'URLS'}),
  country: Flags.string({description: 'ISO 3166-1 alpha-2 country code; implies the continent unless --continent is given', helpGroup: 'LOCATION'}),
  continent: Flags.string({description: 'continent code: AF AN AS EU NA OC SA', helpGroup: 'LOCATION'}),
  lat: Flags.string({description: 'latitude in degrees (-90..90), with --lon', helpGroup: 'LOCATION'}),
  lon: Flags.string({description: 'longitude in degrees (-180..180), with --lat', helpGroup: 'LOCATION'}),
  asn: Flags.string({description: 'autonomous system number (1..4294967295)', helpGroup: 'LOCATION'}),
  prefix: Flags.string({description: 'network prefix (CIDR) this mirror serves best; repeatable (edit: replaces the list)', multiple: true, helpGroup: 'LOCATION'}),
  score: Flags.string({description: 'selection weight, integer >= 0 (default 100; 0 = never selected)', helpGroup: 'SELECTION'}),
  'other-countries': Flags.string({description: 'comma list of further countries this mirror serves as their own, e.g. LU,BE', helpGroup: 'SELECTION'}),
  'exclude-countries': Flags.string({description: 'comma list of countries whose clients are never sent here', helpGroup: 'SELECTION'}),
  'client-prefix': Flags.string({description: 'only clients inside this CIDR may use the mirror; repeatable (edit: replaces the list)', multiple: true, helpGroup: 'SELECTION'}),
  'country-only': Flags.boolean({description: 'only for clients of its own country (and other countries)', allowNo: true, helpGroup: 'SELECTION'}),
  'region-only': Flags.boolean({description: 'only for clients of its own continent', allowNo: true, helpGroup: 'SELECTION'}),
  'as-only': Flags.boolean({description: 'only for clients of its own AS', allowNo: true, helpGroup: 'SELECTION'}),
  'prefix-only': Flags.boolean({description: 'only for clients inside its --prefix networks', allowNo: true, helpGroup: 'SELECTION'}),
  fallback: Flags.boolean({description: 'a complete fallback mirror, used when no regular mirror is eligible', allowNo: true, helpGroup: 'SELECTION'}),
  'file-maxsize': Flags.string({description: 'largest file to send to this mirror, bytes or 4G/700M (powers of 1024)', helpGroup: 'SELECTION'}),
  'maintenance-until': Flags.string({description: 'in maintenance (never selected) until this ISO 8601 time, e.g. 2026-12-01T18:00:00Z; none ends the window', helpGroup: 'SELECTION'}),
  sign: Flags.string({
    description: 'sign every URL mb hands out for this mirror, as its nginx checks them: nginx_secure_link_md5 (secure_link_md5 "$secure_link_expires$uri SECRET"), or none',
    helpGroup: 'SELECTION',
  }),
  'sign-secret-file': Flags.string({description: 'file holding the signing secret on one line (at least 16 characters, at most 4096 bytes; a trailing newline is dropped)', helpGroup: 'SELECTION'}),
  'sign-ttl': Flags.string({description: 'seconds a signed URL stays valid, 60 to 604800 (default 21600)', helpGroup: 'SELECTION'}),
  'base-path': Flags.string({description: 'origin subtree this mirror carries at its base URL, e.g. pub/iso (default: whole tree)', helpGroup: 'SCAN'}),
  include: Flags.string({description: 'glob of origin paths the mirror carries; repeatable (edit: replaces the list)', multiple: true, helpGroup: 'SCAN'}),
  exclude: Flags.string({description: 'glob of origin paths the mirror does not carry; repeatable (edit: replaces the list)', multiple: true, helpGroup: 'SCAN'}),
  'push-url': Flags.string({
    description: 'where `mb push` uploads the origin tree (for a mirror that does not pull): rsync://host/module/path/ (a daemon module with read only = no) or user@host:path over ssh',
    helpGroup: 'PUSH',
  }),
  'push-include': Flags.string({description: 'glob of origin paths pushed to this mirror (default: all); repeatable (edit: replaces the list)', multiple: true, helpGroup: 'PUSH'}),
  admin: Flags.string({description: 'name of the mirror admin', helpGroup: 'CONTACT'}),
  'admin-email': Flags.string({description: 'e-mail address of the mirror admin', helpGroup: 'CONTACT'}),
  comment: Flags.string({description: 'free text', helpGroup: 'CONTACT'}),
}

type FieldFlags = {[K in keyof typeof mirrorFieldFlags]?: unknown}

/** Bytes a `--sign-secret-file` may hold at most: a secret is one short line. */
const MAX_SECRET_FILE_BYTES = 4096

/**
 * The signing secret held in `file` (`--sign-secret-file`): on the command line it would
 * stay in the shell's history and in every process listing. At most
 * {@link MAX_SECRET_FILE_BYTES} are read, so that a device such as /dev/zero or a large file
 * named by mistake is refused instead of filling the memory.
 * @throws UsageError naming the file when it cannot be read, is empty or is too large
 */
function readSecretFile(file: string): string {
  const buffer = Buffer.alloc(MAX_SECRET_FILE_BYTES + 1)
  let length = 0
  try {
    const fd = openSync(file, 'r')
    try {
      // One byte more than allowed tells a file that is too large; a device without end stops there too.
      let n: number
      do {
        n = readSync(fd, buffer, length, buffer.length - length, null)
        length += n
      } while (n > 0 && length < buffer.length)
    } finally {
      closeSync(fd)
    }
  } catch (error) {
    throw new UsageError(`--sign-secret-file ${file} cannot be read: ${errorMessage(error)}`, 'INVALID_MIRROR_FIELD')
  }
  if (length > MAX_SECRET_FILE_BYTES)
    throw new UsageError(`--sign-secret-file ${file} holds more than ${MAX_SECRET_FILE_BYTES} bytes: give a file with the secret alone, on one line`, 'INVALID_MIRROR_FIELD')
  const secret = buffer.toString('utf8', 0, length)
  // An empty value clears a field (`--comment ''`); an empty file is a mistake, never a way to clear the secret.
  if (secret.trim() === '') throw new UsageError(`--sign-secret-file ${file} holds no secret (it is empty or blank): put the secret in it, e.g. openssl rand -hex 24 > FILE`, 'INVALID_MIRROR_FIELD')
  return secret
}

/** Maps parsed field flags to registry input (flags not given stay undefined). */
export function mirrorInputFromFlags(flags: FieldFlags): MirrorInput {
  // biome-ignore lint/suspicious/noExplicitAny: oclif has parsed each flag to its MirrorInput field's type; FieldFlags only names the keys
  const f = flags as Record<string, any>
  return {
    http_url: f['http-url'],
    https_url: f['https-url'],
    rsync_url: f['rsync-url'],
    ftp_url: f['ftp-url'],
    country: f.country,
    continent: f.continent,
    latitude: f.lat,
    longitude: f.lon,
    asn: f.asn,
    prefixes: f.prefix,
    score: f.score,
    other_countries: f['other-countries'],
    exclude_countries: f['exclude-countries'],
    client_prefixes: f['client-prefix'],
    country_only: f['country-only'],
    region_only: f['region-only'],
    as_only: f['as-only'],
    prefix_only: f['prefix-only'],
    fallback: f.fallback,
    file_maxsize: f['file-maxsize'],
    maintenance_until: f['maintenance-until'],
    sign_scheme: f.sign,
    sign_secret: f['sign-secret-file'] === undefined ? undefined : readSecretFile(f['sign-secret-file']),
    sign_ttl_seconds: f['sign-ttl'],
    base_path: f['base-path'],
    include_patterns: f.include,
    exclude_patterns: f.exclude,
    push_url: f['push-url'],
    push_include: f['push-include'],
    admin: f.admin,
    admin_email: f['admin-email'],
    comment: f.comment,
  }
}

export default class MirrorAdd extends BaseCommand<typeof MirrorAdd> {
  static override description = `Register a mirror. A country implies its continent; bad values are refused and nothing is written.

Without --country the mirror is located from its host: the host of its first URL is resolved (A and AAAA records) and looked up in the GeoIP and ASN databases (the geoip and asn_db settings), which fill its country, continent, coordinates and AS number (what --continent, --lat/--lon and --asn give is kept). What was found is printed, with a warning when the host's addresses lie in several countries. A host that does not resolve, or whose addresses GeoIP knows no country of, is refused (nothing is added) unless --country is given or --no-locate adds it without a location.

What is printed is a summary (URLs, country, AS, score, enabled, up, prefixes and flags when set, the probe result); --verbose prints every field, as \`mb mirror show\` does.

The new mirror is then probed once (its HTTP and HTTPS base URLs, as \`mb probe\` does) and the result is shown; --no-probe skips that. A mirror that fails the probe is still added, but gets no redirects until probes find it up. A mirror never probed gets redirects only under select.unprobed: use (the default unless a probe loop, serve.probe_interval, is configured).`
  static override examples = [
    '<%= config.bin %> mirror add ftp.example.de --http-url http://ftp.example.de/pub/ --https-url https://ftp.example.de/pub/ --rsync-url rsync://ftp.example.de/pub/ --country DE --asn 3320 --score 150',
    '<%= config.bin %> mirror add mirror.example.nz --https-url https://mirror.example.nz/ --country NZ --lat=-41.29 --lon 174.78 --other-countries AU --region-only',
    '<%= config.bin %> mirror add campus --http-url http://10.1.2.3/mirror/ --prefix 10.0.0.0/8 --force --client-prefix 10.0.0.0/8 --prefix-only --file-maxsize 4G --disabled',
    '<%= config.bin %> mirror add cdn --https-url https://cdn.example.net/ --fallback --no-locate --json',
    '<%= config.bin %> mirror add mirror.example.fr --https-url https://mirror.example.fr/pub/',
    '<%= config.bin %> mirror add staging.example.org --http-url http://staging.example.org/pub/ --country DE --no-probe',
  ]

  static override args = {
    name: Args.string({description: `unique mirror name (identifier): ${IDENTIFIER_RULE}, e.g. ftp.example.de`, required: true}),
  }

  static override flags = {
    ...mirrorFieldFlags,
    disabled: Flags.boolean({description: 'register the mirror disabled (enable it later with `mb mirror enable`)'}),
    probe: probeFlag,
    locate: Flags.boolean({
      description: 'without --country, locate the mirror from its host (DNS, then GeoIP and ASN) (default); --no-locate adds it without a location',
      allowNo: true,
      default: true,
    }),
    verbose: Flags.boolean({char: 'v', description: 'print every field of the new mirror (as `mb mirror show`), not only the summary'}),
    force: Flags.boolean({
      description: 'store a --prefix shorter than /16 (IPv4) or /32 (IPv6), or in a reserved range (private, loopback, link-local, ...): every client of such a range goes to this mirror first',
    }),
  }

  public async run(): Promise<PublicMirror & {probe: ReturnType<typeof probeOnceJson>; location?: Location}> {
    const input = {...mirrorInputFromFlags(this.flags), identifier: this.args.name, enabled: this.flags.disabled ? false : undefined}
    // A bad field is a usage error (exit 2) before any lookup: locating first would report a
    // malformed URL as a mirror that cannot be located (exit 1).
    validateMirrorInput(input)
    const location = input.country === undefined && this.flags.locate ? await this.locate(input) : null
    const database = await this.openDb({create: true})
    const added = await addMirror(database.db, input, {force: this.flags.force})
    const probe = this.flags.probe ? await probeOnce(database.db, this.mbConfig.probe, added.identifier) : null
    const mirror = publicMirror(probe?.probed ? await resolveMirror(database.db, added.identifier) : added)
    const record = this.flags.verbose ? mirrorRecord(mirror) : mirrorSummary(mirror)
    this.print(`Added mirror ${mirror.identifier} (id ${mirror.id}).\n${renderRecord(record)}\n${describeProbe(mirror.identifier, probe, this.mbConfig.select.unprobed)}`)
    return {...mirror, probe: probeOnceJson(probe), ...(location ? {location} : {})}
  }

  /**
   * Locates the mirror from the host of its first URL and fills the location fields not
   * given (see the description).
   * @throws MbError LOCATE_FAILED (the host does not resolve), LOCATION_UNKNOWN (no URL, or no country known)
   */
  private async locate(input: MirrorInput): Promise<Location> {
    const host = mirrorHost(input)
    if (host === undefined) throw new MbError('Cannot locate the mirror: it has no URL to take a host from. Give --country, or --no-locate.', {code: 'LOCATION_UNKNOWN'})
    const location = await locateHost(host, await openGeo({geoip: this.mbConfig.geoip, asnDb: this.mbConfig.asn_db}))
    if (location.country === null)
      throw new MbError(`Cannot locate the mirror: ${describeLocation(location)}. Nothing was added; give --country, or add it without a location with --no-locate.`, {code: 'LOCATION_UNKNOWN'})
    input.country = location.country
    input.continent ??= location.continent ?? undefined
    if (input.latitude === undefined && input.longitude === undefined && location.latitude !== null && location.longitude !== null) {
      input.latitude = location.latitude
      input.longitude = location.longitude
    }
    if (input.asn === undefined && location.asn !== null) input.asn = location.asn
    if (!this.jsonEnabled()) this.log(`Located ${describeLocation(location)}.`)
    const warning = severalCountries(location)
    if (warning) this.warn(warning)
    return location
  }
}
