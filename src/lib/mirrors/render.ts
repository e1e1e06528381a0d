/**
 * Human rendering of mirrors for `mb mirror list` (a table) and `mb mirror show` (key: value
 * lines). Both are lists of [label, getter] entries over {@link PublicMirror}, so other areas
 * (probe, scan) can add columns by appending entries here.
 */
import type {Column} from '../output.js'
import type {PublicMirror} from './public.js'
import {prefixOverride} from './location.js'
import {shortDuration, shortIso} from '../time.js'

/**
 * The probe's checks of `mirror.status` (see probe/state.ts), one per protocol and address
 * family: `http/ipv4 down since 2026-12-07T14:04:07Z (refused, 1 failed in a row)`; null
 * when never probed. A status of another shape is shown as its JSON.
 */
function checkLines(status: Record<string, unknown>): string | null {
  const checks = status.checks
  if (checks === undefined || checks === null) return Object.keys(status).length === 0 ? null : JSON.stringify(status)
  if (typeof checks !== 'object') return JSON.stringify(status)
  const lines = Object.entries(checks as Record<string, {up?: boolean; since?: string; reason?: string; ok_count?: number; fail_count?: number}>).map(([key, c]) => {
    const run = c.up ? `${c.ok_count ?? 0} passed in a row` : `${c.fail_count ?? 0} failed in a row`
    return `${key} ${c.up ? 'up' : 'down'} since ${shortIso(c.since ?? null) ?? '?'} (${c.reason ?? '?'}, ${run})`
  })
  return lines.length === 0 ? null : lines.join('; ')
}

/**
 * One-line result of the mirror's last scan: `ok rsync 1200/1300` (matched/files listed),
 * `refused, suspect: REASON` when the safety check refused it (the mirror is out of
 * selection), `failed: REASON` when the last attempt failed, or null when never scanned.
 */
export function scanResult(m: PublicMirror): string | null {
  if (!m.last_scan_at) return null
  if (m.scan_refused_at) return `refused, suspect: ${m.last_scan_error ?? 'the safety check refused the scan'}`
  const failed = m.last_scan_error && (!m.last_scan_ok_at || m.last_scan_ok_at < m.last_scan_at)
  if (failed) return `failed: ${m.last_scan_error}`
  const counts = m.last_scan_files === null ? '' : ` ${m.last_scan_matched ?? '?'}/${m.last_scan_files}`
  return `ok${m.last_scan_protocol ? ` ${m.last_scan_protocol}` : ''}${counts}`
}

/**
 * One-line result of the mirror's last push: `ok`, `failed: REASON`, `never` for a push
 * mirror not pushed yet, or null for a mirror without a push_url.
 */
function pushResult(m: PublicMirror): string | null {
  if (!m.push_url) return null
  if (!m.last_push_at) return 'never'
  return m.last_push_error ? `failed: ${m.last_push_error}` : 'ok'
}

/** A stored prefix, marked when it was stored with `--force` (`10.0.0.0/8 (reserved, forced)`). */
function markedPrefix(prefix: string): string {
  const override = prefixOverride(prefix)
  return override === undefined ? prefix : `${prefix} (${override}, forced)`
}

function yesNo(value: boolean | null): string | null {
  return value === null ? null : value ? 'yes' : 'no'
}

/** `mb mirror show`'s `suspect` line: since when the mirror is out of selection after a refused scan, and how it returns; `no` otherwise. */
function suspect(m: PublicMirror): string {
  if (!m.scan_refused_at && m.bad_copies_suspect_at)
    return `yes, since ${shortIso(m.bad_copies_suspect_at)}: content checks found too many corrupt copies (probe.suspect_bad_copies), so no client is sent here (bad_copies) until a content round finds fewer or \`mb mirror edit ${m.identifier} --trust-scan\``
  if (!m.scan_refused_at) return 'no'
  return `yes, since ${shortIso(m.scan_refused_at)}: the last scan was refused by the safety check, so no client is sent here (scan_refused) until a good \`mb scan ${m.identifier}\` or \`mb mirror edit ${m.identifier} --trust-scan\``
}

/** `up`, with the state of a mirror that redirects to another host (`probe.redirects: same_origin`) said as such. */
function upState(m: PublicMirror): string | null {
  if (m.up === false && m.status_reason === 'redirect_offsite') return 'no (redirects off-host)'
  return yesNo(m.up)
}

/** How far behind the origin the mirror's sync trace is (`3h12m behind`), why it could not be read, or null when traces are off or unread. */
function syncState(m: PublicMirror): string | null {
  if (m.sync_error) return `unknown: ${m.sync_error}`
  if (m.sync_lag_seconds === null) return null
  return m.sync_lag_seconds < 60 ? 'in sync' : `${shortDuration(m.sync_lag_seconds)} behind`
}

/**
 * Columns of `mb mirror list` (TTY table and tab-separated lines). Append to extend. On a
 * narrow terminal the lowest `priority` goes first (src/lib/output.ts).
 */
export const MIRROR_LIST_COLUMNS: Array<Column<PublicMirror>> = [
  {header: 'name', get: (m) => m.identifier},
  {header: 'country', get: (m) => m.country, priority: 4},
  {header: 'continent', get: (m) => m.continent, priority: 0.5},
  {header: 'score', get: (m) => m.score, priority: 0.6},
  {header: 'enabled', get: (m) => yesNo(m.enabled), priority: 5},
  {header: 'up', get: (m) => upState(m), priority: 5},
  {header: 'status_reason', get: (m) => m.status_reason, priority: 0.3},
  {header: 'last_scan', get: (m) => shortIso(m.last_scan_at), priority: 0.7},
  {header: 'scan_result', get: (m) => scanResult(m), priority: 0.4},
  {header: 'push_result', get: (m) => pushResult(m), priority: 0.35},
  {header: 'sync', get: (m) => syncState(m), priority: 0.45},
  {header: 'base_url', get: (m) => m.base_url, priority: 0.2},
]

/** The `key: value` lines of `mb mirror show`, in order. Append to extend. */
export const MIRROR_SHOW_FIELDS: Array<[label: string, get: (m: PublicMirror) => unknown]> = [
  ['identifier', (m) => m.identifier],
  ['id', (m) => m.id],
  ['enabled', (m) => yesNo(m.enabled)],
  ['base_url', (m) => m.base_url],
  ['http_url', (m) => m.http_url],
  ['https_url', (m) => m.https_url],
  ['rsync_url', (m) => m.rsync_url],
  ['ftp_url', (m) => m.ftp_url],
  ['country', (m) => m.country],
  ['continent', (m) => m.continent],
  ['latitude', (m) => m.latitude],
  ['longitude', (m) => m.longitude],
  ['asn', (m) => m.asn],
  ['prefixes', (m) => m.prefixes.map(markedPrefix)],
  ['score', (m) => m.score],
  ['country_only', (m) => yesNo(m.country_only)],
  ['region_only', (m) => yesNo(m.region_only)],
  ['as_only', (m) => yesNo(m.as_only)],
  ['prefix_only', (m) => yesNo(m.prefix_only)],
  ['fallback', (m) => yesNo(m.fallback)],
  ['other_countries', (m) => m.other_countries],
  ['exclude_countries', (m) => m.exclude_countries],
  ['client_prefixes', (m) => m.client_prefixes],
  ['file_maxsize', (m) => m.file_maxsize],
  ['base_path', (m) => (m.base_path === '' ? '(whole tree)' : m.base_path)],
  ['sign_scheme', (m) => m.sign_scheme ?? 'none (unsigned URLs)'],
  ['sign_ttl_seconds', (m) => (m.sign_scheme ? m.sign_ttl_seconds : null)],
  ['include_patterns', (m) => m.include_patterns],
  ['exclude_patterns', (m) => m.exclude_patterns],
  ['push_url', (m) => m.push_url],
  ['push_include', (m) => m.push_include],
  ['admin', (m) => m.admin],
  ['admin_email', (m) => m.admin_email],
  ['comment', (m) => m.comment],
  ['up', (m) => upState(m)],
  ['ipv6', (m) => (m.ipv6 === null ? 'unknown' : yesNo(m.ipv6))],
  ['range_ok', (m) => (m.range_ok === null ? 'unknown' : m.range_ok ? 'yes' : 'no: answers Range with the whole file (200); ranged requests are not sent here')],
  ['status', (m) => checkLines(m.status)],
  ['status_reason', (m) => m.status_reason],
  ['status_changed_at', (m) => shortIso(m.status_changed_at)],
  ['needs_rescan', (m) => yesNo(m.needs_rescan)],
  // A window in the past is over: say so, or the time reads as a mirror still in maintenance.
  ['maintenance_until', (m) => (m.maintenance_until !== null && Date.parse(m.maintenance_until) <= Date.now() ? `${shortIso(m.maintenance_until)} (ended)` : shortIso(m.maintenance_until))],
  ['suspect', (m) => suspect(m)],
  ['scan_refused_at', (m) => shortIso(m.scan_refused_at)],
  ['bad_copies_suspect_at', (m) => shortIso(m.bad_copies_suspect_at)],
  ['url_changed_at', (m) => (m.url_changed_at === null ? null : `${shortIso(m.url_changed_at)} (URL changed, awaiting scan)`)],
  ['synced_at', (m) => shortIso(m.synced_at)],
  ['sync_lag_seconds', (m) => (m.sync_lag_seconds === null ? null : `${m.sync_lag_seconds} (${syncState(m)})`)],
  ['sync_error', (m) => m.sync_error],
  ['last_scan_at', (m) => shortIso(m.last_scan_at)],
  ['last_scan_ok_at', (m) => shortIso(m.last_scan_ok_at)],
  ['last_scan_result', (m) => scanResult(m)],
  ['last_scan_error', (m) => m.last_scan_error],
  ['last_scan_protocol', (m) => m.last_scan_protocol],
  ['last_scan_files', (m) => m.last_scan_files],
  ['last_scan_matched', (m) => m.last_scan_matched],
  ['last_scan_seconds', (m) => m.last_scan_seconds],
  ['last_push_at', (m) => shortIso(m.last_push_at)],
  ['last_push_ok_at', (m) => shortIso(m.last_push_ok_at)],
  ['last_push_result', (m) => pushResult(m)],
  ['last_push_error', (m) => m.last_push_error],
  ['created_at', (m) => shortIso(m.created_at)],
  ['updated_at', (m) => shortIso(m.updated_at)],
]

/** The `[label, value]` entries of one mirror for `renderRecord`. */
export function mirrorRecord(m: PublicMirror): Array<[string, unknown]> {
  return MIRROR_SHOW_FIELDS.map(([label, get]) => [label, get(m)])
}

/** The selection flags set on a mirror, by name (`country_only`, …, `fallback`). */
function setFlags(m: PublicMirror): string[] {
  const flags: Array<[string, boolean]> = [
    ['country_only', m.country_only],
    ['region_only', m.region_only],
    ['as_only', m.as_only],
    ['prefix_only', m.prefix_only],
    ['fallback', m.fallback],
  ]
  return flags.filter(([, on]) => on).map(([name]) => name)
}

/**
 * The short `key: value` lines `mb mirror add` prints (the full view is {@link mirrorRecord},
 * `mb mirror add --verbose` and `mb mirror show`): its URLs, where it is, its score, whether
 * it is enabled and up; the AS, prefixes and selection flags only when set.
 */
export function mirrorSummary(m: PublicMirror): Array<[string, unknown]> {
  const urls = [m.http_url, m.https_url, m.rsync_url, m.ftp_url].filter((u) => u !== null)
  const flags = setFlags(m)
  const entries: Array<[string, unknown]> = [
    ['urls', urls.join(' ')],
    ['country', m.country === null ? 'none (no location: only the world pool)' : `${m.country} (${m.continent})`],
    ['score', m.score],
    ['enabled', yesNo(m.enabled)],
    ['up', upState(m)],
  ]
  if (m.asn !== null) entries.splice(2, 0, ['asn', m.asn])
  if (m.prefixes.length > 0) entries.push(['prefixes', m.prefixes.map(markedPrefix)])
  if (flags.length > 0) entries.push(['flags', flags.join(' ')])
  return entries
}
