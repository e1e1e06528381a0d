/**
 * The mirror network as a whole, for the per-mirror metrics (./metrics.ts) and the overview
 * page (`GET /mirrors`, ./network-page.ts): what each mirror holds of the origin's current
 * version, from the in-memory snapshot, and its probe and scan record, from one cached
 * database read.
 *
 * Holdings: a mirror holds a file when the file's mirror set (the snapshot's) names it, i.e.
 * its copy matched the origin's size and mtime at its last scan. Its share is counted over
 * the origin files it is meant to carry: those under its `base_path` (and under the subtree
 * asked for). Both come from the snapshot's per-directory counts
 * (../snapshot/directory-counts.ts), kept as the snapshot loads and changes, so holdings cost
 * a few lookups per mirror, whatever the number of files.
 */
import {publicBase} from '../select/url.js'
import {isoDay, unixIso} from '../time.js'
import {type OriginShareRow, queryOriginShare} from '../stats/origin.js'
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import {parseStatus} from '../probe/state.js'
import type {MirrorSample} from './metrics.js'
import type {SelectMirror} from '../select/types.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import {syncLagSeconds} from '../sync/trace.js'

/** What one mirror holds of (a subtree of) the origin, in files and bytes. */
export interface Holding {
  /** Files it holds in the current version. */
  files: number
  /** Bytes of those files; counted for the whole tree only (null for a subtree). */
  bytes: number | null
  /** Origin files it is meant to carry (under its base path and the subtree). */
  originFiles: number
  /** Bytes of those origin files. */
  originBytes: number
}

/** One probe check's state (`mirror.status.checks`), by protocol and address family. */
export interface CheckUp {
  protocol: string
  family: string
  up: boolean
}

/** A mirror's probe and scan record, as the database holds it. Times in Unix ms (UTC). */
export interface MirrorRecord {
  id: number
  identifier: string
  rsync: boolean
  ftp: boolean
  checks: CheckUp[]
  lastProbeAt: number | null
  lastScanAt: number | null
  lastScanOkAt: number | null
  /** The last scan's failure reason code ({@link scanFailureReason}) when it failed, else null. */
  lastScanFailure: string | null
  /** Copies a content check found corrupt, at the files' current versions (`mirror_file_bad`). */
  badCopies: number
  /** Seconds the mirror is behind the origin by their sync traces (`sync.trace_path`); null = no trace read. */
  syncLagSeconds: number | null
  /** Failed probe checks seen by this process (the first read counts all kept in `mirror_probe`), by reason. */
  probeFailures: Map<string, number>
  /** Failed scans seen by this process (the first read counts a last scan that failed), by reason. */
  scanFailures: Map<string, number>
}

/** How long the database record is kept (ms). */
const RECORD_TTL_MS = 10_000

/**
 * A bounded reason code for a scan failure message (the stored message is free text):
 * `timeout`, `refused`, `dns`, `tls`, `http_status`, `auth`, `listing`, or `other`.
 */
function scanFailureReason(message: string): string {
  const m = message.toLowerCase()
  if (/timed? ?out|timeout/.test(m)) return 'timeout'
  if (/refused|econnrefused/.test(m)) return 'refused'
  if (/enotfound|eai_again|resolve|dns/.test(m)) return 'dns'
  if (/certificate|tls|ssl/.test(m)) return 'tls'
  if (/auth|password|permission|denied/.test(m)) return 'auth'
  if (/\b[45]\d\d\b/.test(m)) return 'http_status'
  if (/listing|parse|unexpected/.test(m)) return 'listing'
  return 'other'
}

function ms(value: unknown): number | null {
  if (value === null || value === undefined) return null
  const t = value instanceof Date ? value.getTime() : new Date(String(value)).getTime()
  return Number.isFinite(t) ? t : null
}

/** Adds `n` to `counts[id][reason]`. */
function count(counts: Map<number, Map<string, number>>, id: number, reason: string, n: number): void {
  let byReason = counts.get(id)
  if (!byReason) {
    byReason = new Map()
    counts.set(id, byReason)
  }
  byReason.set(reason, (byReason.get(reason) ?? 0) + n)
}

/** `base` and `subtree` overlap: one contains the other (both '' or ending in '/'). */
function overlaps(base: string, subtree: string): boolean {
  return base.startsWith(subtree) || subtree.startsWith(base)
}

/**
 * Per-mirror holdings of `subtree` ('' or ending in '/') in `snapshot`, from its directory
 * counts: every mirror whose base path overlaps the subtree. O(mirrors).
 */
export function holdingsOf(snapshot: Snapshot, subtree: string): Map<number, Holding> {
  const counts = snapshot.files.counts
  const result = new Map<number, Holding>()
  for (const m of snapshot.mirrors.values()) {
    if (!overlaps(m.basePath, subtree)) continue
    const carried = counts.subtree(m.basePath.startsWith(subtree) ? m.basePath : subtree)
    result.set(m.id, {
      files: counts.heldFiles(subtree, m.id),
      bytes: subtree === '' ? counts.heldTreeBytes(m.id) : null,
      originFiles: carried.files,
      originBytes: carried.bytes,
    })
  }
  return result
}

/**
 * The network view of one `mb serve` process: holdings from the current snapshot and the
 * mirrors' records from the database, the records cached (see the module doc).
 */
export class NetworkView {
  private record: {at: number; value: Promise<Map<number, MirrorRecord>>} | undefined
  /** Probe failures counted so far (monotonic), by mirror id and reason, and the last probe row id read. */
  private readonly probeFailures = new Map<number, Map<string, number>>()
  private probeIdSeen = 0
  /** Today's origin share (src/lib/stats/origin.ts), read at most every {@link RECORD_TTL_MS}. */
  private originToday: {at: number; value: Promise<OriginShareRow | null>} | undefined
  /** Scan failures counted so far, by mirror id and reason, and the last scan time seen per mirror. */
  private readonly scanFailures = new Map<number, Map<string, number>>()
  private readonly scanSeen = new Map<number, number | null>()

  /**
   * @param sync.originTrace        the origin's own trace time (Unix seconds; null: unknown, the clock is the reference)
   * @param sync.lagWarningSeconds  a mirror at least this far behind is `lagging` in the overview (`sync.lag_warning_seconds`)
   */
  constructor(
    private readonly database: Pick<Database, 'db'>,
    private readonly snapshot: () => Snapshot,
    private readonly sync: {originTrace?: () => number | null; lagWarningSeconds?: number} = {},
  ) {}

  /** Whether a lag (seconds, null = unknown) reaches the warning threshold. */
  lagging(lag: number | null): boolean {
    return lag !== null && this.sync.lagWarningSeconds !== undefined && lag >= this.sync.lagWarningSeconds
  }

  /** Holdings of `subtree` ('' = whole tree, else ending in '/') per mirror id, in the current snapshot ({@link holdingsOf}). */
  holdings(subtree = ''): Map<number, Holding> {
    return holdingsOf(this.snapshot(), subtree)
  }

  /** The mirrors' probe and scan records by id, read at most every {@link RECORD_TTL_MS}. @throws what the database driver throws */
  records(): Promise<Map<number, MirrorRecord>> {
    const now = Date.now()
    if (this.record && now - this.record.at < RECORD_TTL_MS) return this.record.value
    const value = this.readRecords()
    this.record = {at: now, value}
    value.catch(() => {
      this.record = undefined
    })
    return value
  }

  /**
   * Today's (UTC) origin share as the statistics have it (`stats_origin` beside `stats_daily`,
   * as flushed so far), read at most every {@link RECORD_TTL_MS}; null when nothing was counted.
   * @throws what the database driver throws
   */
  originShare(): Promise<OriginShareRow | null> {
    const now = Date.now()
    if (this.originToday && now - this.originToday.at < RECORD_TTL_MS) return this.originToday.value
    const day = isoDay(now)
    const value = queryOriginShare(this.database, {since: day, until: day}).then((rows) => rows[0] ?? null)
    this.originToday = {at: now, value}
    value.catch(() => {
      this.originToday = undefined
    })
    return value
  }

  private async readRecords(): Promise<Map<number, MirrorRecord>> {
    const db = this.database.db
    const rows = await sql<{
      id: number
      identifier: string
      rsync: boolean
      ftp: boolean
      status: unknown
      last_scan_at: unknown
      last_scan_ok_at: unknown
      last_scan_error: string | null
      last_probe_at: unknown
      bad_copies: number
      synced_at: unknown
    }>`SELECT m.id, m.identifier, m.rsync_url IS NOT NULL AS rsync, m.ftp_url IS NOT NULL AS ftp, m.status, m.last_scan_at, m.last_scan_ok_at, m.last_scan_error, m.synced_at,
        (SELECT max(at) FROM mirror_probe p WHERE p.mirror_id = m.id) AS last_probe_at,
        (SELECT count(*)::int FROM mirror_file_bad b JOIN file f ON f.id = b.file_id AND f.size = b.size AND f.mtime = b.mtime WHERE b.mirror_id = m.id) AS bad_copies
      FROM mirror m ORDER BY m.id`.execute(db)
    const failures = await sql<{mirror_id: number; reason: string; n: number; last: string}>`
      SELECT mirror_id, reason, count(*)::int AS n, max(id)::text AS last FROM mirror_probe WHERE NOT ok AND id > ${this.probeIdSeen} GROUP BY mirror_id, reason`.execute(db)
    for (const f of failures.rows) {
      count(this.probeFailures, Number(f.mirror_id), f.reason, f.n)
      this.probeIdSeen = Math.max(this.probeIdSeen, Number(f.last))
    }
    const result = new Map<number, MirrorRecord>()
    const originTrace = this.sync.originTrace?.() ?? null
    const reference = originTrace === null ? null : new Date(originTrace * 1000)
    for (const r of rows.rows) {
      const syncedAt = ms(r.synced_at)
      const checks = Object.entries(parseStatus(r.status).checks).map(([key, s]) => {
        const [protocol, family] = key.split('/')
        return {protocol, family: family ?? 'any', up: s.up}
      })
      const lastScanAt = ms(r.last_scan_at)
      const lastScanOkAt = ms(r.last_scan_ok_at)
      const failed = r.last_scan_error !== null && lastScanAt !== null && (lastScanOkAt === null || lastScanOkAt < lastScanAt)
      const id = Number(r.id)
      if (failed && this.scanSeen.get(id) !== lastScanAt) count(this.scanFailures, id, scanFailureReason(r.last_scan_error!), 1)
      this.scanSeen.set(id, lastScanAt)
      result.set(Number(r.id), {
        id: Number(r.id),
        identifier: r.identifier,
        rsync: r.rsync,
        ftp: r.ftp,
        checks,
        lastProbeAt: ms(r.last_probe_at),
        lastScanAt,
        lastScanOkAt,
        lastScanFailure: failed ? scanFailureReason(r.last_scan_error!) : null,
        badCopies: Number(r.bad_copies ?? 0),
        syncLagSeconds: syncLagSeconds(syncedAt === null ? null : new Date(syncedAt), reference),
        probeFailures: this.probeFailures.get(id) ?? new Map(),
        scanFailures: this.scanFailures.get(id) ?? new Map(),
      })
    }
    return result
  }
}

/**
 * The per-mirror metrics samples (./metrics.ts) of every mirror in the current snapshot:
 * probe checks and ages from the database record, holdings of the whole tree.
 * @throws what the database driver throws
 */
export async function mirrorSamples(view: NetworkView, now = Date.now()): Promise<MirrorSample[]> {
  const records = await view.records()
  const holdings = view.holdings('')
  const samples: MirrorSample[] = []
  for (const [id, record] of records) {
    const h = holdings.get(id)
    samples.push({
      mirror: record.identifier,
      checks: record.checks,
      scanAgeSeconds: record.lastScanOkAt === null ? undefined : Math.max(0, (now - record.lastScanOkAt) / 1000),
      probeAgeSeconds: record.lastProbeAt === null ? undefined : Math.max(0, (now - record.lastProbeAt) / 1000),
      files: h?.files ?? 0,
      badCopies: record.badCopies,
      ...(record.syncLagSeconds === null ? {} : {syncLagSeconds: record.syncLagSeconds}),
      filesRatio: h && h.originFiles > 0 ? h.files / h.originFiles : undefined,
      bytesRatio: h && h.bytes !== null && h.originBytes > 0 ? h.bytes / h.originBytes : undefined,
      probeFailures: record.probeFailures,
      scanFailures: record.scanFailures,
    })
  }
  return samples
}

/** A scheme's probe state in the overview: null when the mirror has no URL for it. */
type SchemeHealth = 'up' | 'down' | 'unprobed' | null

/** One row of the network overview (`GET /mirrors`, `mb mirror list --path`): public fields only. */
export interface OverviewRow {
  name: string
  country: string | null
  continent: string | null
  /** Degrees (WGS84), null when unknown. */
  latitude: number | null
  longitude: number | null
  /** Of `http`, `https`, `rsync`, `ftp`, the ones it offers. */
  protocols: string[]
  /**
   * Its public base URLs by protocol (`http`, `https`, `ftp`, `rsync`; those it has), for
   * tools that pick mirrors themselves. A URL carrying credentials is a private scan
   * address and is left out, though its protocol stays in `protocols`.
   */
  urls: Partial<Record<'http' | 'https' | 'ftp' | 'rsync', string>>
  http: SchemeHealth
  https: SchemeHealth
  /** `up` when probing found it up, `down`, or `unprobed`. */
  health: 'up' | 'down' | 'unprobed'
  /** It honours `Range` (true), answers a ranged request with the whole file (false: requests with Range are not sent there), or not known yet (null). */
  range: boolean | null
  /** The last successful scan, ISO 8601 UTC, or null. */
  last_scan: string | null
  /** Files of the (sub)tree it holds in the current version, and files of the (sub)tree it carries. */
  files: number
  origin_files: number
  /** files / origin_files (0..1, 4 digits), null when it carries no file of the subtree. */
  share: number | null
  /** Copies a content check found corrupt (`mb probe --content`); they get no clients. */
  bad_copies: number
  /** Seconds it is behind the origin by their sync traces (`sync.trace_path`); null = no trace read. */
  sync_lag: number | null
  /** `sync_lag` reaches `sync.lag_warning_seconds` (the map marks it). */
  lagging: boolean
  score: number
}

/**
 * The network overview of a subtree: its path ('' = whole tree) and one row per listed
 * mirror, by name. A page of it ({@link overviewPage}) also says which page of how many.
 */
export interface Overview {
  path: string
  /** Listed mirrors in all pages. */
  total: number
  /** 1-based page number and rows per page, when a page was asked for. */
  page?: number
  page_size?: number
  pages?: number
  /** Today's (UTC) origin share: what the origin delivered itself, by reason, beside the day's downloads; null when nothing was counted yet. */
  origin: OriginShareRow | null
  mirrors: OverviewRow[]
}

/**
 * Page `page` (1-based) of `overview`, `pageSize` rows each; a page past the last has no rows.
 * The rows are shared with `overview`, not copied.
 */
export function overviewPage(overview: Overview, page: number, pageSize: number): Overview {
  const start = (page - 1) * pageSize
  return {
    path: overview.path,
    total: overview.total,
    page,
    page_size: pageSize,
    pages: Math.ceil(overview.total / pageSize),
    origin: overview.origin,
    mirrors: overview.mirrors.slice(start, start + pageSize),
  }
}

/** A mirror's public base URLs by protocol (see {@link OverviewRow.urls}). */
function publicUrls(m: SelectMirror): OverviewRow['urls'] {
  const urls: OverviewRow['urls'] = {}
  for (const protocol of ['http', 'https', 'ftp', 'rsync'] as const) {
    const base = publicBase(m, protocol)
    if (base) urls[protocol] = base
  }
  return urls
}

function schemeHealth(url: string | null, up: boolean | null): SchemeHealth {
  if (url === null) return null
  return up === null ? 'unprobed' : up ? 'up' : 'down'
}

/**
 * Whether the overview lists mirror `m`: a mirror any client could be sent to (enabled, not
 * limited to client networks, `prefix_only` or `as_only`). The others are never named on a
 * public page.
 */
export function listedMirror(m: SelectMirror): boolean {
  return m.enabled && !m.prefixOnly && !m.asOnly && m.clientPrefixes.length === 0
}

/** The overview row of mirror `m` (public fields only, see {@link OverviewRow}) from its record and holding. */
export function overviewRow(view: NetworkView, m: SelectMirror, record: MirrorRecord | undefined, h: Holding): OverviewRow {
  const protocols = [m.httpUrl && 'http', m.httpsUrl && 'https', record?.rsync && 'rsync', record?.ftp && 'ftp'].filter((p): p is string => typeof p === 'string')
  const probed = m.httpUp !== null || m.httpsUp !== null
  return {
    name: m.identifier,
    country: m.country,
    continent: m.continent,
    latitude: m.latitude,
    longitude: m.longitude,
    protocols,
    urls: publicUrls(m),
    http: schemeHealth(m.httpUrl, m.httpUp),
    https: schemeHealth(m.httpsUrl, m.httpsUp),
    health: probed ? (m.up ? 'up' : 'down') : 'unprobed',
    range: m.rangeOk,
    last_scan: m.lastScanOkAt === null ? null : unixIso(m.lastScanOkAt),
    files: h.files,
    origin_files: h.originFiles,
    share: h.originFiles > 0 ? Math.round((h.files / h.originFiles) * 10000) / 10000 : null,
    bad_copies: record?.badCopies ?? 0,
    sync_lag: record?.syncLagSeconds ?? null,
    lagging: view.lagging(record?.syncLagSeconds ?? null),
    score: m.score,
  }
}

/**
 * The overview of `subtree` ('' or ending in '/'): every listed mirror ({@link listedMirror})
 * that carries part of the subtree, by name. Only public fields are copied (see
 * {@link OverviewRow}); prefixes, client networks, AS numbers, admin names, e-mail addresses
 * and comments never are.
 */
export async function buildOverview(view: NetworkView, snapshot: Snapshot, subtree: string): Promise<Overview> {
  const records = await view.records()
  const holdings = holdingsOf(snapshot, subtree)
  const rows: OverviewRow[] = []
  for (const m of snapshot.mirrors.values()) {
    if (!listedMirror(m)) continue
    const h = holdings.get(m.id)
    if (h === undefined) continue
    rows.push(overviewRow(view, m, records.get(m.id), h))
  }
  rows.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  return {path: subtree, total: rows.length, origin: await view.originShare(), mirrors: rows}
}
