/**
 * Reading probe history: recent transitions (for `mb mirror show`), recent checks, and a
 * per-mirror summary (state, per-scheme health, last probe time, reason) for `mb mirror list`.
 */
import {sql, type Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import type {Column} from '../output.js'
import type {UnprobedPolicy} from '../select/config.js'
import {parseStatus} from './state.js'
import {isoSeconds, shortIso} from '../time.js'

/** A recorded state change. `scope` is 'mirror' (the summary) or e.g. 'https/ipv6'. */
export interface TransitionRecord {
  at: Date
  scope: string
  from: 'up' | 'down' | 'unknown'
  to: 'up' | 'down'
  reason: string
}

/**
 * The newest `limit` state transitions of a mirror, newest first.
 * @param limit rows (default 10)
 */
export async function recentTransitions(db: Kysely<DB>, mirrorId: number, limit = 10): Promise<TransitionRecord[]> {
  const rows = await db.selectFrom('mirror_transition').select(['at', 'scope', 'from_state', 'to_state', 'reason']).where('mirror_id', '=', mirrorId).orderBy('id', 'desc').limit(limit).execute()
  return rows.map((r) => ({at: new Date(r.at), scope: r.scope, from: r.from_state, to: r.to_state, reason: r.reason}))
}

/** One scheme's probe health: null when the mirror has no URL for that scheme. */
export type SchemeState = 'up' | 'down' | 'unprobed' | null

/** A mirror's probe state at a glance. */
export interface ProbeSummary {
  /** 'up' / 'down' from the summary; 'unknown' when never probed. */
  state: 'up' | 'down' | 'unknown'
  /** Health of the HTTP and HTTPS base URLs (`mirror.http_up`, `mirror.https_up`). */
  http: SchemeState
  https: SchemeState
  /** Time (UTC) of the newest recorded check, or null. */
  last_probe_at: Date | null
  /** `ok`, or the failing reason with its scope, e.g. `tls_error (https/ipv4)`. */
  reason: string | null
}

/**
 * Summaries for the given mirrors (all when `mirrorIds` is omitted), keyed by mirror id.
 * One query over the mirror rows and one index-backed query per mirror for the last probe
 * time (a LATERAL join on `mirror_probe (mirror_id, id DESC)`).
 */
export async function probeSummaries(db: Kysely<DB>, mirrorIds?: number[]): Promise<Map<number, ProbeSummary>> {
  if (mirrorIds && mirrorIds.length === 0) return new Map()
  const rows = await sql<{
    id: number
    up: boolean
    http: boolean
    https: boolean
    http_up: boolean | null
    https_up: boolean | null
    status: unknown
    status_reason: string | null
    last_at: Date | string | null
  }>`
    SELECT m.id, m.up, m.http_url IS NOT NULL AS http, m.https_url IS NOT NULL AS https, m.http_up, m.https_up, m.status, m.status_reason, p.at AS last_at
    FROM mirror m
    LEFT JOIN LATERAL (SELECT at FROM mirror_probe WHERE mirror_id = m.id ORDER BY id DESC LIMIT 1) p ON true
    ${mirrorIds ? sql`WHERE m.id = ANY(${mirrorIds}::smallint[])` : sql``}`.execute(db)
  const result = new Map<number, ProbeSummary>()
  for (const row of rows.rows) {
    const status = parseStatus(row.status)
    const failing = Object.entries(status.checks).find(([, s]) => s.reason !== 'ok')
    const probed = row.last_at !== null || Object.keys(status.checks).length > 0
    let reason = row.status_reason
    if (failing && (reason === null || reason === failing[1].reason)) reason = `${failing[1].reason} (${failing[0]})`
    result.set(row.id, {
      state: probed ? (row.up ? 'up' : 'down') : 'unknown',
      http: schemeState(row.http, row.http_up),
      https: schemeState(row.https, row.https_up),
      last_probe_at: row.last_at ? new Date(row.last_at) : null,
      reason: probed ? reason : null,
    })
  }
  return result
}

function schemeState(hasUrl: boolean, up: boolean | null): SchemeState {
  if (!hasUrl) return null
  return up === null ? 'unprobed' : up ? 'up' : 'down'
}

/** The `--json` shape of a {@link ProbeSummary} (time as ISO 8601 UTC). */
export interface ProbeSummaryJson {
  state: 'up' | 'down' | 'unknown'
  http: SchemeState
  https: SchemeState
  /**
   * What selection does with the schemes not probed yet (all of them when `state` is
   * `unknown`), by `select.unprobed`: `used` (counted as up) or `skipped`; null when every
   * scheme with a URL has been probed.
   */
  unprobed: 'used' | 'skipped' | null
  last_probe_at: string | null
  reason: string | null
}

/**
 * JSON form of a summary; a missing one is `unknown`.
 * @param unprobed  the effective `select.unprobed`
 */
export function probeSummaryJson(summary: ProbeSummary | undefined, unprobed: UnprobedPolicy): ProbeSummaryJson {
  const http = summary?.http ?? null
  const https = summary?.https ?? null
  const pending = !summary || summary.state === 'unknown' || http === 'unprobed' || https === 'unprobed'
  return {
    state: summary?.state ?? 'unknown',
    http,
    https,
    unprobed: pending ? (unprobed === 'skip' ? 'skipped' : 'used') : null,
    last_probe_at: summary?.last_probe_at?.toISOString() ?? null,
    reason: summary?.reason ?? null,
  }
}

/**
 * The probe state in a few words for a table cell: `up`, `down`, `unprobed (used)`,
 * `unprobed (skipped)`, or `up` followed by the schemes that are not up, e.g.
 * `up, https down` or `up, https unprobed (skipped)`.
 */
export function probeStateText(p: ProbeSummaryJson): string {
  const policy = p.unprobed === null ? '' : ` (${p.unprobed})`
  if (p.state === 'unknown') return `unprobed${policy}`
  if (p.state === 'down') return 'down'
  const notUp = (['http', 'https'] as const).filter((s) => p[s] === 'down' || p[s] === 'unprobed').map((s) => `${s} ${p[s]}${p[s] === 'unprobed' ? policy : ''}`)
  return ['up', ...notUp].join(', ')
}

/** Columns that `mb mirror list` appends: probe state (per scheme, and how unprobed ones are treated), last probe time (UTC), reason. */
export const PROBE_LIST_COLUMNS: Array<Column<{probe: ProbeSummaryJson}>> = [
  {header: 'probe', get: (m) => probeStateText(m.probe)},
  {header: 'last_probe', get: (m) => shortIso(m.probe.last_probe_at)},
  {header: 'probe_reason', get: (m) => m.probe.reason},
]

/** The `--json` shape of a transition. */
export function transitionJson(t: TransitionRecord): {at: string; scope: string; from: string; to: string; reason: string} {
  return {at: t.at.toISOString(), scope: t.scope, from: t.from, to: t.to, reason: t.reason}
}

/** Text lines for a "recent transitions" section (newest first), or a note when there are none. */
export function renderTransitions(transitions: TransitionRecord[]): string {
  if (transitions.length === 0) return 'recent transitions: none recorded'
  const lines = transitions.map((t) => `  ${isoSeconds(t.at)}  ${t.scope.padEnd(10)}  ${t.from} -> ${t.to}  (${t.reason})`)
  return ['recent transitions:', ...lines].join('\n')
}
