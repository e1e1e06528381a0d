/**
 * Step 2 of `select()`, eligibility, as one ordered table: each rule names its reason, tests
 * whether it excludes a mirror, and says why in words. The first rule that excludes a mirror
 * gives its reason. A detail never repeats the reason: every view prints the two side by
 * side (`stale  outdated copy: 60000 bytes, origin 65536`). Both the explained walk (`mb file lookup`, mirror lists) and the redirect
 * path are derived from this table (./eligibility.ts), so a new reason is one entry here.
 *
 * `needs` says what a rule's test reads besides the mirror, which is how the redirect path
 * can skip most tests per request: `MirrorTable` evaluates the `mirror` and `scheme` rules
 * once per mirror for each scheme-and-family class, and keeps per mirror only the `request`
 * rules whose `appliesTo` holds under the options in use.
 */
import {type Cidr, cidrContains, type IpAddress} from '../net.js'
import type {SelectOptions} from './options.js'
import type {Query, SchemeFacts} from './query.js'
import type {EligibilityReason, SelectMirror} from './types.js'
import {shortDuration, unixIso, unixIsoMillis} from '../time.js'

/** A rule that reads only the mirror (`mirror`) or the mirror and {@link SchemeFacts} (`scheme`). */
interface SchemeRule {
  reason: EligibilityReason
  needs: 'mirror' | 'scheme'
  excludes(m: SelectMirror, q: SchemeFacts): boolean
  detail(m: SelectMirror, q: Query): string
}

/**
 * A rule that reads the request. `holding` rules ask whether the file's mirror set lists the
 * mirror: the redirect path walks only the listed mirrors, so they never exclude there.
 * `request` rules may read anything in the {@link Query}. `appliesTo` (default: always) is
 * false only where `excludes` is false for every request under those options, so that the
 * redirect path may skip the test there; `excludes` stays complete on its own.
 */
export interface RequestRule {
  reason: EligibilityReason
  needs: 'holding' | 'request'
  appliesTo?(m: SelectMirror, options: SelectOptions): boolean
  excludes(m: SelectMirror, q: Query): boolean
  detail(m: SelectMirror, q: Query): string
}

export type ExclusionRule = SchemeRule | RequestRule

/** Up to three CIDRs as text, then the count. */
export function cidrList(list: readonly Cidr[]): string {
  const shown = list
    .slice(0, 3)
    .map(([a, b]) => `${a.toString()}/${b}`)
    .join(', ')
  return list.length > 3 ? `${shown}, … (${list.length})` : shown
}

/** True when the file's mirror set lists `m` (the walk marks every listed id first). */
function holds(m: SelectMirror, q: Query): boolean {
  return q.held[m.id] === q.generation
}

/** True when the client address lies in one of `list` (false without an address). */
export function inAny(list: readonly Cidr[], address: IpAddress | undefined): boolean {
  if (address === undefined) return false
  for (let i = 0; i < list.length; i++) if (cidrContains(list[i], address)) return true
  return false
}

/**
 * The probe health of the scheme a client would be sent over: HTTPS clients get the
 * `https_url`, HTTP clients the `http_url`, else the `https_url` (as `mirrorBase()` in
 * ./url.ts picks). True/false from the probes, null when that scheme has not been probed,
 * undefined when the mirror has no such URL.
 */
function schemeHealth(m: SelectMirror, https: boolean): boolean | null | undefined {
  if (https || m.httpUrl === null) return m.httpsUrl === null ? undefined : m.httpsUp
  return m.httpUp
}

/**
 * The probe health of the scheme a client would be sent over, over the client's own address
 * family: the `http/ipv4`… check of that scheme (true/false), else false for an IPv4 client
 * when that scheme was probed over IPv6 only (the host has no IPv4 address), else null (not
 * probed over that family; for an IPv6 client `select.ipv6` decides).
 */
function familyHealth(m: SelectMirror, https: boolean, v6: boolean): boolean | null {
  const scheme = https || m.httpUrl === null ? 'https' : 'http'
  const up = m.familyUp[`${scheme}/${v6 ? 'ipv6' : 'ipv4'}`]
  if (up !== undefined) return up
  return !v6 && m.familyUp[`${scheme}/ipv6`] !== undefined ? false : null
}

/** The name of the scheme a client would be sent over (see {@link schemeHealth}). */
function schemeName(m: SelectMirror, https: boolean): 'HTTP' | 'HTTPS' {
  return https || m.httpUrl === null ? 'HTTPS' : 'HTTP'
}

/**
 * How a mirror's copy differs from the origin file, as every view says it:
 * `outdated copy: 60000 bytes, origin 65536`, or when the sizes agree
 * `outdated copy: mtime 2023-11-14T22:13:20Z, origin 2023-11-14T23:13:20Z` (mtimes in Unix
 * seconds, shown as UTC; a listing without mtimes shows `unknown`).
 */
export function outdatedCopy(copy: {size: number; mtime: number | null}, origin: {size: number; mtime: number}): string {
  if (copy.size !== origin.size) return `outdated copy: ${copy.size} bytes, origin ${origin.size}`
  return `outdated copy: mtime ${copy.mtime === null ? 'unknown' : unixIso(copy.mtime)}, origin ${unixIso(origin.mtime)}`
}

/** The eligibility rules, in the order they are checked (docs/selection.md, "Which mirrors are eligible"). */
export const ELIGIBILITY_RULES = [
  {reason: 'disabled', needs: 'mirror', excludes: (m) => !m.enabled, detail: () => 'disabled by the operator (`mb mirror enable` turns it back on)'},
  {
    // The summary `up` is the IPv4 checks' (IPv6's for a mirror without IPv4): a client whose
    // own family's check is up is not held back by the other family.
    reason: 'down',
    needs: 'scheme',
    excludes: (m, q) => !m.up && familyHealth(m, q.https, q.v6) !== true,
    detail: () => 'the last probe failed',
  },
  {reason: 'zero_score', needs: 'mirror', excludes: (m) => !(m.score > 0), detail: () => 'score is 0 (takes no traffic)'},
  {
    reason: 'maintenance',
    needs: 'request',
    appliesTo: (m) => m.maintenanceUntil !== null,
    excludes: (m, q) => m.maintenanceUntil !== null && q.now < m.maintenanceUntil,
    detail: (m) => `in maintenance until ${unixIsoMillis(m.maintenanceUntil!)} (\`mb mirror edit ${m.identifier} --maintenance-until none\` ends it)`,
  },
  {
    reason: 'scan_refused',
    needs: 'mirror',
    excludes: (m) => m.scanRefusedAt !== null,
    detail: (m) =>
      `suspect: its last scan, at ${unixIso(m.scanRefusedAt!)}, was refused by the safety check (far fewer files than before: a wiped or truncated tree); a good \`mb scan ${m.identifier}\` or \`mb mirror edit ${m.identifier} --trust-scan\` brings it back`,
  },
  {
    reason: 'bad_copies',
    needs: 'mirror',
    excludes: (m) => m.badCopiesSuspectAt !== null,
    detail: (m) =>
      `suspect: since ${unixIso(m.badCopiesSuspectAt!)}, content checks have found at least \`probe.suspect_bad_copies\` corrupt copies on it (\`mb mirror show ${m.identifier}\`); a content round that finds fewer or \`mb mirror edit ${m.identifier} --trust-scan\` brings it back`,
  },
  {
    reason: 'not_in_subtree',
    needs: 'request',
    appliesTo: (m) => m.basePath !== '',
    excludes: (m, q) => m.basePath !== '' && !q.file.path.startsWith(m.basePath),
    detail: (m) => `carries only ${m.basePath}`,
  },
  {
    reason: 'corrupt',
    needs: 'holding',
    excludes: (m, q) => !holds(m, q) && q.file.corrupt?.get(m.id) !== undefined,
    detail: (m, q) => {
      const bad = q.file.corrupt!.get(m.id)!
      return `piece ${bad.piece} of the copy did not match the index at ${unixIso(bad.foundAt)} (a scan seeing another size or mtime, or \`mb probe --content ${m.identifier}\` passing, brings it back)`
    },
  },
  {
    reason: 'stale',
    needs: 'holding',
    excludes: (m, q) => !holds(m, q) && q.file.stale?.get(m.id) !== undefined,
    detail: (m, q) => outdatedCopy(q.file.stale!.get(m.id)!, q.file),
  },
  {
    reason: 'not_held',
    needs: 'holding',
    excludes: (m, q) => !holds(m, q),
    detail: (m) => (m.lastScanOkAt === null ? 'no successful scan yet' : 'its last scan did not list this file'),
  },
  {
    reason: 'too_large',
    needs: 'request',
    appliesTo: (m) => m.fileMaxsize !== null,
    excludes: (m, q) => m.fileMaxsize !== null && q.file.size > m.fileMaxsize,
    detail: (m, q) => `${q.file.size} bytes, above its file_maxsize ${m.fileMaxsize}`,
  },
  {
    reason: 'scan_too_old',
    needs: 'request',
    appliesTo: (_m, options) => options.maxScanAgeSeconds !== null,
    excludes: (m, q) => q.maxScanAge !== null && (m.lastScanOkAt === null || q.now - m.lastScanOkAt > q.maxScanAge),
    detail: (m, q) => (m.lastScanOkAt === null ? 'no successful scan' : `last successful scan ${Math.round(q.now - m.lastScanOkAt)} s ago, max_scan_age_seconds ${q.maxScanAge}`),
  },
  {
    reason: 'url_changed',
    needs: 'mirror',
    excludes: (m) => m.urlChangedAt !== null,
    detail: (m) => `URL changed at ${unixIso(m.urlChangedAt!)}, awaiting scan (\`mb scan ${m.identifier}\`)`,
  },
  {
    reason: 'sync_lag',
    needs: 'request',
    appliesTo: (m, options) => options.maxSyncLagSeconds !== null && m.syncedAt !== null,
    excludes: (m, q) => q.maxSyncLag !== null && m.syncedAt !== null && q.syncReference - m.syncedAt > q.maxSyncLag,
    detail: (m, q) => `its sync trace says ${unixIso(m.syncedAt!)}, ${shortDuration(q.syncReference - m.syncedAt!)} behind the origin's, above sync.max_lag_seconds ${q.maxSyncLag}`,
  },
  {reason: 'needs_rescan', needs: 'mirror', excludes: (m) => m.needsRescan, detail: () => 'was down; needs a fresh scan before it is used again'},
  {reason: 'no_https', needs: 'scheme', excludes: (m, q) => q.https && m.httpsUrl === null, detail: () => 'HTTPS client and the mirror has no https_url'},
  {reason: 'no_http', needs: 'scheme', excludes: (m, q) => !q.https && m.httpUrl === null && m.httpsUrl === null, detail: () => 'the mirror has no http_url or https_url'},
  {
    reason: 'scheme_down',
    needs: 'scheme',
    excludes: (m, q) => schemeHealth(m, q.https) === false && familyHealth(m, q.https, q.v6) !== true,
    detail: (m, q) => {
      const scheme = schemeName(m, q.https)
      const other = scheme === 'HTTPS' ? m.httpUp : m.httpsUp
      return `${q.https ? 'HTTPS' : 'HTTP'} client and the mirror's ${scheme} failed its probes${other ? ` (its ${scheme === 'HTTPS' ? 'HTTP' : 'HTTPS'} works)` : ''}; \`mb probe ${m.identifier}\` shows why`
    },
  },
  {
    reason: 'family_down',
    needs: 'scheme',
    excludes: (m, q) => familyHealth(m, q.https, q.v6) === false,
    detail: (m, q) => {
      const scheme = schemeName(m, q.https)
      const key = scheme === 'HTTPS' ? 'https' : 'http'
      if (!q.v6 && m.familyUp[`${key}/ipv4`] === undefined) return `IPv4 client and the mirror's ${scheme} host has no IPv4 address (probed over IPv6 only)`
      const [own, other] = q.v6 ? ['IPv6', 'IPv4'] : ['IPv4', 'IPv6']
      const otherUp = m.familyUp[`${key}/${q.v6 ? 'ipv4' : 'ipv6'}`]
      return `${own} client and the mirror's ${scheme} over ${own} failed its probes${otherUp ? ` (over ${other} it works)` : ''}; \`mb probe ${m.identifier}\` shows why`
    },
  },
  {
    reason: 'no_range',
    needs: 'scheme',
    excludes: (m, q) => q.range && m.rangeOk === false,
    detail: () => 'the request carries Range, and probing found the mirror answers a ranged request with the whole file (200, not 206)',
  },
  {
    reason: 'unprobed',
    needs: 'request',
    appliesTo: (m, options) => options.unprobed === 'skip' && (m.httpUp === null || m.httpsUp === null),
    excludes: (m, q) => q.skipUnprobed && schemeHealth(m, q.https) === null,
    detail: (m, q) =>
      m.httpUp === null && m.httpsUp === null
        ? `never probed, and select.unprobed is skip (\`mb probe ${m.identifier}\` probes it)`
        : `its ${schemeName(m, q.https)} was not probed yet, and select.unprobed is skip (\`mb probe ${m.identifier}\` probes it)`,
  },
  {
    reason: 'no_ipv6',
    needs: 'request',
    appliesTo: (m, options) => options.ipv6 === 'require' && m.ipv6 === false,
    excludes: (m, q) => q.v6 && q.requireIpv6 && m.ipv6 === false,
    detail: () => 'IPv6 client, probing found no IPv6 on the mirror, and select.ipv6 is require',
  },
  {
    reason: 'client_not_allowed',
    needs: 'request',
    appliesTo: (m) => m.clientPrefixes.length > 0,
    excludes: (m, q) => m.clientPrefixes.length > 0 && !inAny(m.clientPrefixes, q.address),
    detail: (m, q) => `serves only clients in ${cidrList(m.clientPrefixes)}; client ${q.client.ip}`,
  },
  {
    reason: 'country_excluded',
    needs: 'request',
    appliesTo: (m) => m.excludeCountries.size > 0,
    excludes: (m, q) => q.country !== undefined && m.excludeCountries.has(q.country),
    detail: (_m, q) => `excludes clients from ${q.country}`,
  },
] as const satisfies readonly ExclusionRule[]

/** The first rule that excludes `m` for this request, or undefined when `m` is eligible. */
export function firstExcluding(m: SelectMirror, q: Query): ExclusionRule | undefined {
  for (let i = 0; i < ELIGIBILITY_RULES.length; i++) {
    const rule: ExclusionRule = ELIGIBILITY_RULES[i]
    if (rule.excludes(m, q)) return rule
  }
  return undefined
}
