/**
 * Reading probe history: recent transitions (for `mb mirror show`), recent checks, and a
 * per-mirror summary (state, last probe time, reason) for `mb mirror list`.
 */
import {sql, type Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import type {Column} from '../output.js'
import {parseStatus} from './state.js'
import {isoSeconds} from '../time.js'

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

/** A mirror's probe state at a glance. */
export interface ProbeSummary {
  /** 'up' / 'down' from the summary; 'unknown' when never probed. */
  state: 'up' | 'down' | 'unknown'
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
  const rows = await sql<{id: number; up: boolean; status: unknown; status_reason: string | null; last_at: Date | string | null}>`
    SELECT m.id, m.up, m.status, m.status_reason, p.at AS last_at
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
    result.set(row.id, {state: probed ? (row.up ? 'up' : 'down') : 'unknown', last_probe_at: row.last_at ? new Date(row.last_at) : null, reason: probed ? reason : null})
  }
  return result
}

/** The `--json` shape of a {@link ProbeSummary} (time as ISO 8601 UTC). */
export interface ProbeSummaryJson {
  state: 'up' | 'down' | 'unknown'
  last_probe_at: string | null
  reason: string | null
}

/** JSON form of a summary; a missing one is `unknown`. */
export function probeSummaryJson(summary: ProbeSummary | undefined): ProbeSummaryJson {
  return {state: summary?.state ?? 'unknown', last_probe_at: summary?.last_probe_at?.toISOString() ?? null, reason: summary?.reason ?? null}
}

/** Columns that `mb mirror list` appends: probe state, last probe time (UTC), reason. */
export const PROBE_LIST_COLUMNS: Array<Column<{probe: ProbeSummaryJson}>> = [
  {header: 'probe', get: (m) => m.probe.state},
  {header: 'last_probe', get: (m) => (m.probe.last_probe_at ? m.probe.last_probe_at.replace(/\.\d{3}Z$/, 'Z') : null)},
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
