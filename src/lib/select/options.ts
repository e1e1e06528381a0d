/**
 * The compiled form of the `select:` config section: glob matchers, regular expressions and
 * CIDRs built once at start-up, so that `select()` never compiles anything per request.
 */
import picomatch from 'picomatch'
import {type Cidr, parseCidr} from '../net.js'
import {type SelectConfig, SelectConfigSchema} from './config.js'

/** What `select()` takes: the `select:` section, compiled. Sizes in bytes, times in seconds. */
export interface SelectOptions {
  /** Files smaller than this (bytes) are delivered from the origin. */
  minSize: number
  /** Origin-only glob patterns as configured. */
  originOnly: readonly string[]
  /** Returns the first origin-only pattern matching the path's basename or full path, or undefined. */
  originOnlyMatch: (path: string) => string | undefined
  /** User-Agent patterns (case-insensitive). */
  excludeUserAgents: readonly RegExp[]
  /** Client prefixes delivered from the origin. */
  excludeClients: readonly Cidr[]
  /** MIME type globs as configured. */
  excludeMime: readonly string[]
  /** Returns the first `exclude_mime` glob matching a MIME type, or undefined. */
  excludeMimeMatch: (type: string) => string | undefined
  /** Client country -> substitute country (upper case). */
  countrySubstitutions: ReadonlyMap<string, string>
  clientPrefixV4: number
  clientPrefixV6: number
  /** Rendezvous key: the client network (`network`), or the network and the file path (`network+path`). */
  stickyKey: 'network' | 'network+path'
  /** `geo`: the pool cascade and distance; `score`: every eligible mirror in one pool, ranked by score alone (stickiness kept). */
  ranking: 'geo' | 'score'
  /** Distance rule: pool members farther than this factor x the nearest one's distance rank after the near ones. */
  distanceFactor: number
  /** Distance rule: mirrors within this many km always count as near. */
  distanceFloorKm: number
  /** IPv6 clients: `prefer` ranks mirrors without IPv6 last in their pool, `require` excludes them (`no_ipv6`). */
  ipv6: 'prefer' | 'require'
  /** Null = scans never get too old. */
  maxScanAgeSeconds: number | null
  /** Mirrors (or a mirror's scheme) never probed: `use` counts them as up, `skip` passes them over (`unprobed`). */
  unprobed: 'use' | 'skip'
  /** Alternatives to list in Link headers / mirror lists (the caller applies it). */
  maxAlternatives: number
  /** Mirror URLs in a metalink at most (the caller applies it). */
  metalinkMaxMirrors: number
  /** Seconds a client's answer is remembered so that its retry reaches the next mirror (./retry.ts); 0 = off. */
  retryWindowSeconds: number
  /** Answers the retry memory holds at most. */
  retryMemoryEntries: number
  /** The clock for scan ages, Unix seconds (UTC); tests set it. Default: wall clock. */
  now?: () => number
  /** `sync.max_lag_seconds`: a mirror whose trace is further behind the origin's leaves selection (`sync_lag`); null = no limit. */
  maxSyncLagSeconds: number | null
  /** The origin's own trace time, Unix seconds, the reference of the sync lag (src/lib/sync/trace.ts `originTraceClock`); absent or null = the clock. */
  originTrace?: () => number | null
}

function firstMatch(patterns: readonly string[], options: picomatch.PicomatchOptions): (value: string) => string | undefined {
  if (patterns.length === 0) return () => undefined
  // Plain regular expressions (picomatch.makeRe) are several times faster than picomatch's
  // matcher functions, which build a result object per test.
  const each = patterns.map((p) => [p, picomatch.makeRe(p, options)] as const)
  const any = new RegExp(each.map(([, re]) => `(?:${re.source})`).join('|'), each[0][1].flags)
  return (value) => {
    if (!any.test(value)) return undefined
    for (const [pattern, re] of each) if (re.test(value)) return pattern
    return undefined
  }
}

/**
 * Compiles a parsed `select:` section (or a partial one; missing keys get their defaults)
 * into {@link SelectOptions}.
 *
 * Origin-only patterns are picomatch globs (`dot: true`), tested against the basename and
 * against the full origin-relative path, so `Packages*` matches `dists/x/main/Packages.gz`
 * and `repodata/repomd.xml` matches only that path.
 *
 * @throws ZodError when a value is invalid (the config loader validates earlier and says where)
 */
export function compileSelectOptions(config: Partial<SelectConfig> = {}, sync: {maxLagSeconds?: number; originTrace?: () => number | null} = {}): SelectOptions {
  const c = SelectConfigSchema.parse(config)
  const origin = firstMatch(c.origin_only, {dot: true})
  const mime = firstMatch(c.exclude_mime, {dot: true, nocase: true})
  const substitutions = new Map<string, string>()
  for (const [from, to] of Object.entries(c.country_substitutions)) substitutions.set(from.trim().toUpperCase(), to)
  return {
    minSize: c.min_size,
    originOnly: c.origin_only,
    originOnlyMatch(path: string) {
      if (c.origin_only.length === 0) return undefined
      const slash = path.lastIndexOf('/')
      const base = slash >= 0 ? path.slice(slash + 1) : path
      return origin(base) ?? (slash >= 0 ? origin(path) : undefined)
    },
    excludeUserAgents: c.exclude_user_agents.map((p) => new RegExp(p, 'i')),
    excludeClients: c.exclude_clients.map((text) => parseCidr(text)),
    excludeMime: c.exclude_mime,
    excludeMimeMatch: mime,
    countrySubstitutions: substitutions,
    clientPrefixV4: c.client_prefix_v4,
    clientPrefixV6: c.client_prefix_v6,
    stickyKey: c.sticky_key,
    ranking: c.ranking,
    distanceFactor: c.distance_factor,
    distanceFloorKm: c.distance_floor_km,
    ipv6: c.ipv6,
    maxScanAgeSeconds: c.max_scan_age_seconds,
    maxAlternatives: c.max_alternatives,
    metalinkMaxMirrors: c.metalink_max_mirrors,
    unprobed: c.unprobed ?? 'use',
    retryWindowSeconds: c.retry_window_seconds,
    retryMemoryEntries: c.retry_memory_entries,
    maxSyncLagSeconds: sync.maxLagSeconds ?? null,
    ...(sync.originTrace ? {originTrace: sync.originTrace} : {}),
  }
}
