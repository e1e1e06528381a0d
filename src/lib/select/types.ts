/**
 * The selection engine's contract, shared by `mb serve`, `mb file lookup`, metalinks and the
 * mirror list. `select()` in `./index.ts` is a pure function of these shapes.
 */
import type {UrlSigner} from '../sign.js'
import type {Cidr, IpAddress} from '../net.js'

/** The pool a mirror was chosen from, most specific first (MirrorBrain's "realm"). */
export type Realm = 'prefix' | 'as' | 'country' | 'continent' | 'world' | 'fallback'

/** What is known about the requesting client. Coordinates in degrees (WGS84). */
export interface ClientInfo {
  /** Canonical address text (IPv4-mapped IPv6 already reduced to IPv4). */
  ip: string
  address?: IpAddress
  /** ISO 3166-1 alpha-2, upper case, after country substitution is NOT yet applied. */
  country?: string
  /**
   * GeoIP's country for `ip`, whatever `country` says: the two differ only when a testing
   * override (`?country=`, `--country`) replaced it. What statistics and the access log
   * record, so that a forced country never shows up as a download from there.
   */
  geoCountry?: string
  continent?: string
  latitude?: number
  longitude?: number
  asn?: number
  /** The request arrived over HTTPS (directly or via a trusted proxy's X-Forwarded-Proto). */
  https: boolean
  userAgent?: string
  /** The request carries `Range` (RFC 9110 §14.2): only mirrors that honour it qualify. */
  range?: boolean
}

/** The origin file as the index knows it. Size in bytes, mtime in Unix seconds (UTC). */
export interface SelectFile {
  path: string
  size: number
  mtime: number
  /** Ids of mirrors whose scanned copy matches this size (and mtime). */
  mirrors: ArrayLike<number>
  /**
   * Optional: copies known to differ from the origin (from `mirror_file_stale`), by mirror
   * id, so that an exclusion can say "stale: 60000 bytes, origin 65536" instead of
   * "not held". Size in bytes, mtime in Unix seconds (null when the listing had none).
   */
  stale?: ReadonlyMap<number, {size: number; mtime: number | null}>
  /**
   * Optional: copies of this version a content check found corrupt (`mirror_file_bad`), by
   * mirror id: the piece (0-based) that did not match and when (Unix seconds, UTC), so that
   * an exclusion can say "corrupt" instead of "not held".
   */
  corrupt?: ReadonlyMap<number, {piece: number; foundAt: number}>
  /**
   * Optional: the origin's tree no longer holds the file (a mirror-only file the origin
   * pruned, `serve.mirror_only`), so no origin exception (step 1) applies: the origin could
   * not deliver it, and the mirrors holding it are chosen as for any file.
   */
  originLacks?: boolean
}

/**
 * A mirror compiled for selection (built once per snapshot from a `MirrorRow`, not per
 * request). URLs are base URLs ending in `/`. Immutable (`compileMirror()` freezes it): a
 * `MirrorTable` compiles data derived from it when the table is built.
 */
export interface SelectMirror {
  id: number
  identifier: string
  httpUrl: string | null
  httpsUrl: string | null
  /**
   * The FTP and rsync base URLs as clients may be told them (MirrorManager lists them for
   * `protocol=ftp`/`rsync`): null when the mirror has none, or when the URL carries user
   * information, which makes it a private scan address rather than a public one.
   */
  ftpUrl: string | null
  rsyncUrl: string | null
  country: string | null
  continent: string | null
  latitude: number | null
  longitude: number | null
  asn: number | null
  prefixes: Cidr[]
  /** When non-empty, only clients inside these prefixes may use this mirror. */
  clientPrefixes: Cidr[]
  excludeCountries: ReadonlySet<string>
  otherCountries: ReadonlySet<string>
  score: number
  enabled: boolean
  up: boolean
  /**
   * Probe health of the HTTP and HTTPS base URLs (`mirror.http_up`, `mirror.https_up`): null
   * until that scheme has been probed. Both null: the mirror has never been probed.
   */
  httpUp: boolean | null
  httpsUp: boolean | null
  /** null until probing has recorded whether the mirror serves IPv6. */
  ipv6: boolean | null
  /**
   * Probe health per scheme and address family (`mirror.status` checks): keys `http/ipv4`,
   * `http/ipv6`, `https/ipv4`, `https/ipv6`, present only when probed.
   */
  familyUp: Readonly<Partial<Record<FamilyCheck, boolean>>>
  /** Probing found the mirror honours `Range` (206), or not (200 with the whole file); null = not known. */
  rangeOk: boolean | null
  /** Signs the mirror's URLs (`sign_scheme`, ../sign.ts); null when it serves unsigned URLs. */
  sign?: UrlSigner | null
  /** Unix seconds (UTC) when `mb mirror edit` changed a base URL, until the next successful scan; null = none waiting. */
  urlChangedAt: number | null
  /** Unix seconds (UTC) in the mirror's copy of the sync trace (`sync.trace_path`): when the origin state it last copied was written; null = not read. */
  syncedAt: number | null
  countryOnly: boolean
  regionOnly: boolean
  asOnly: boolean
  prefixOnly: boolean
  fallback: boolean
  /** Largest file size in bytes this mirror should get; null = no limit. */
  fileMaxsize: number | null
  /** Origin subtree carried at the base URL ('' = whole tree, else e.g. `distribution/`). */
  basePath: string
  /** Unix seconds (UTC) of the last successful scan, or null. */
  lastScanOkAt: number | null
  /** Probing says it was down long enough that it needs a fresh scan before use. */
  needsRescan: boolean
  /** Unix seconds (UTC, may be fractional) until which the mirror is in maintenance and not used; null = none. */
  maintenanceUntil: number | null
  /** Unix seconds (UTC) when its last scan was refused by the safety check (the mirror is suspect); null = not suspect. */
  scanRefusedAt: number | null
  /** Unix seconds (UTC) since when content checks have found too many corrupt copies on it (`probe.suspect_bad_copies`: the mirror is suspect); null = not. */
  badCopiesSuspectAt: number | null
}

/** A probe check's scheme and family, the keys of `SelectMirror.familyUp`. */
export type FamilyCheck = 'http/ipv4' | 'http/ipv6' | 'https/ipv4' | 'https/ipv6'

/** An eligible mirror in ranked order. */
export interface Candidate {
  mirror: SelectMirror
  realm: Realm
  /** 1-based rank over all candidates (winning pool first). */
  rank: number
  /** Full URL of the file on this mirror, scheme chosen for the client, path percent-encoded. */
  url: string
  /** Great-circle distance to the client in km, when both positions are known (explained selections only: the redirect hot path skips it). */
  distanceKm?: number
  /**
   * Why the mirror ranks after others of its pool (explained selections only): beyond the
   * distance factor, or without IPv6 for an IPv6 client under `select.ipv6: prefer`.
   */
  note?: string
}

/**
 * Why a mirror was passed over; stable codes for JSON, with a human detail: an eligibility
 * rule's reason (./rules.ts, in the order they are checked) or a pool restriction flag
 * (./pools.ts). Distance never excludes: it orders (./distance.ts).
 */
export type ExclusionReason = EligibilityReason | PoolReason

/** The reason of an eligibility rule: each entry of `ELIGIBILITY_RULES` (./rules.ts) carries one, in the order they are checked. */
export type EligibilityReason =
  | 'disabled'
  | 'down'
  | 'zero_score'
  | 'maintenance'
  | 'scan_refused'
  | 'bad_copies'
  | 'not_in_subtree'
  | 'corrupt'
  | 'stale'
  | 'not_held'
  | 'too_large'
  | 'scan_too_old'
  | 'url_changed'
  | 'sync_lag'
  | 'needs_rescan'
  | 'no_https'
  | 'no_http'
  | 'scheme_down'
  | 'family_down'
  | 'no_range'
  | 'unprobed'
  | 'no_ipv6'
  | 'client_not_allowed'
  | 'country_excluded'

/** The reasons of step 3 (./pools.ts): a pool restriction flag that forbids the mirror's pool. */
export type PoolReason = 'prefix_only' | 'as_only' | 'country_only' | 'region_only'

export interface Exclusion {
  mirror: SelectMirror
  reason: ExclusionReason
  detail: string
}

/** Why the origin delivers the file itself instead of redirecting. */
/**
 * Why the origin delivers a file. `not_indexed` (on disk, not in the index yet) and
 * `index_stale` (changed on disk since it was indexed) are decided by `mb serve` before
 * any selection; the others by `select()`.
 */
export type OriginReason = 'small_file' | 'origin_only' | 'excluded_agent' | 'excluded_client' | 'excluded_mime' | 'directory' | 'no_mirror' | 'not_indexed' | 'index_stale' | 'rule'

export interface Selection {
  /** The winning pool, or null when the origin serves the file. */
  realm: Realm | null
  /**
   * All eligible mirrors: the chosen one (weighted rendezvous over the near members of the
   * winning pool) first, then the rest of each pool nearest-first, pool after pool.
   */
  ranked: Candidate[]
  excluded: Exclusion[]
  /** Set when the origin delivers the file. */
  origin?: {reason: OriginReason; detail: string}
  /** Set under `select.ranking: score`: the mirrors were ranked by score alone, in one pool (`world`). */
  ranking?: 'score'
  /**
   * The redirect rule (src/lib/rules) that decided this request, set by the caller that
   * applied it (`select()` itself knows no rules): `mirrors` limited the choice to its
   * mirrors, `url` sends the client to `url`, `origin` delivers locally.
   */
  rule?: {name: string; target: 'url' | 'mirrors' | 'origin'; url?: string}
}
