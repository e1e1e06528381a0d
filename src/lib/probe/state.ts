/**
 * Probe state with hysteresis, and recording a round's results.
 *
 * Per protocol/family (`http/ipv4`, `https/ipv6`, ...) the mirror row's `status` jsonb holds
 * `{up, ok_count, fail_count, reason, since}`. A key seen for the first time takes its first
 * result directly. After that it goes down after `fail_threshold` consecutive failures and
 * back up after `ok_threshold` consecutive successes. Counts are capped at their threshold,
 * so a mirror in a steady state leaves its row untouched (no snapshot churn in `mb serve`).
 *
 * The mirror-level summary `mirror.up` (what selection reads) is: some IPv4 check is up (or,
 * for an IPv6-only mirror, some IPv6 check is up). The same rule over one scheme's checks
 * gives `mirror.http_up` and `mirror.https_up`, so that selection can send HTTPS clients only
 * where HTTPS works; a scheme without checks in the round (no URL for it) is null.
 * `mirror.ipv6` is true when some IPv6 check is up, false when the hosts have no IPv6
 * address or every IPv6 check is down, and unchanged otherwise. A mirror that comes back after being down longer than
 * `rescan_after_seconds` gets `needs_rescan = true` (cleared by a successful scan, in
 * scan/reconcile.ts).
 */
import {sql, type Kysely, type Transaction} from 'kysely'
import type {DB} from '../db/schema.js'
import type {ProbeConfig} from './config.js'
import type {CheckResult, MirrorProbeResult, ProbeRequest} from './probe.js'
import {trimLeadingSlashes} from '../text.js'

/** The state of one protocol/family, as stored in `mirror.status.checks[key]`. */
export interface CheckState {
  up: boolean
  /** Consecutive successes (capped at `ok_threshold`). */
  ok_count: number
  /** Consecutive failures (capped at `fail_threshold`). */
  fail_count: number
  /** Reason code of the latest check. */
  reason: string
  /** ISO time (UTC) when `up` last changed (or was first seen). */
  since: string
}

/** The `mirror.status` jsonb written by the prober. */
export interface ProbeStatus {
  checks: Record<string, CheckState>
  /** Origin path last used as the probe's known file (cached between rounds). */
  probe_path?: string
}

/** The mirror fields the state machine reads and writes. */
export interface MirrorState {
  up: boolean
  /** Summary of the HTTP checks; null when the last round had none (no http_url, or never probed). */
  http_up: boolean | null
  /** Summary of the HTTPS checks; null when the last round had none. */
  https_up: boolean | null
  ipv6: boolean | null
  status: ProbeStatus
  status_reason: string | null
  status_changed_at: Date | null
  needs_rescan: boolean
}

/** A state change to record in `mirror_transition`. */
export interface Transition {
  scope: string
  from_state: 'up' | 'down' | 'unknown'
  to_state: 'up' | 'down'
  reason: string
  at: Date
}

/** Reads `mirror.status` defensively (older or foreign shapes become empty). */
export function parseStatus(raw: unknown): ProbeStatus {
  const value = (typeof raw === 'string' ? safeJson(raw) : raw) as Partial<ProbeStatus> | null
  const checks = value && typeof value.checks === 'object' && value.checks !== null ? value.checks : {}
  return {checks: {...checks}, ...(typeof value?.probe_path === 'string' ? {probe_path: value.probe_path} : {})}
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return null
  }
}

const KEY_ORDER = ['http/ipv4', 'http/ipv6', 'https/ipv4', 'https/ipv6']
const keyRank = (key: string) => (KEY_ORDER.includes(key) ? KEY_ORDER.indexOf(key) : KEY_ORDER.length)

/**
 * Applies one round's checks to the previous state (pure; no I/O).
 *
 * @param previous  the mirror's state before the round
 * @param checks    this round's checks (keys absent from the round are dropped from status)
 * @param options.noIpv6  the hosts resolved without any IPv6 address
 * @param config    thresholds (`fail_threshold`, `ok_threshold`, `rescan_after_seconds`)
 * @param now       the time of the round (UTC)
 */
export function nextState(
  previous: MirrorState,
  checks: CheckResult[],
  options: {noIpv6: boolean; probePath?: string},
  config: Pick<ProbeConfig, 'fail_threshold' | 'ok_threshold' | 'rescan_after_seconds'>,
  now: Date,
): {state: MirrorState; transitions: Transition[]} {
  const transitions: Transition[] = []
  const states: Record<string, CheckState> = {}
  const sorted = [...checks].sort((a, b) => keyRank(a.key) - keyRank(b.key))
  for (const check of sorted) {
    const before = previous.status.checks[check.key]
    let state: CheckState
    if (!before) {
      state = {up: check.ok, ok_count: check.ok ? 1 : 0, fail_count: check.ok ? 0 : 1, reason: check.reason, since: now.toISOString()}
      transitions.push({scope: check.key, from_state: 'unknown', to_state: check.ok ? 'up' : 'down', reason: check.reason, at: now})
    } else {
      const okCount = check.ok ? Math.min(before.ok_count + 1, config.ok_threshold) : 0
      const failCount = check.ok ? 0 : Math.min(before.fail_count + 1, config.fail_threshold)
      let up = before.up
      if (!up && check.ok && okCount >= config.ok_threshold) up = true
      if (up && !check.ok && failCount >= config.fail_threshold) up = false
      state = {up, ok_count: okCount, fail_count: failCount, reason: check.reason, since: up === before.up ? before.since : now.toISOString()}
      if (up !== before.up) transitions.push({scope: check.key, from_state: before.up ? 'up' : 'down', to_state: up ? 'up' : 'down', reason: check.reason, at: now})
    }
    states[check.key] = state
  }

  const entries = Object.entries(states)
  const v6 = entries.filter(([key]) => key.endsWith('/ipv6'))
  const up = summaryUp(entries) ?? previous.up
  const probed = sorted.length > 0
  const httpUp = probed ? (summaryUp(entries.filter(([key]) => key.startsWith('http/'))) ?? null) : previous.http_up
  const httpsUp = probed ? (summaryUp(entries.filter(([key]) => key.startsWith('https/'))) ?? null) : previous.https_up

  let ipv6 = previous.ipv6
  if (v6.some(([, s]) => s.up)) ipv6 = true
  else if (v6.length > 0) ipv6 = false
  else if (options.noIpv6) ipv6 = false

  const failing = sorted.find((c) => !c.ok)
  const relevant = up ? failing : (sorted.find((c) => !c.ok && !states[c.key].up) ?? failing)
  const statusReason = sorted.length === 0 ? previous.status_reason : relevant ? relevant.reason : 'ok'

  let statusChangedAt = previous.status_changed_at
  let needsRescan = previous.needs_rescan
  if (up !== previous.up) {
    if (up && statusChangedAt && config.rescan_after_seconds >= 0 && now.getTime() - statusChangedAt.getTime() > config.rescan_after_seconds * 1000) needsRescan = true
    transitions.push({scope: 'mirror', from_state: previous.up ? 'up' : 'down', to_state: up ? 'up' : 'down', reason: up ? 'ok' : (statusReason ?? 'error'), at: now})
    statusChangedAt = now
  }

  const status: ProbeStatus = {checks: states}
  const probePath = options.probePath ?? previous.status.probe_path
  if (probePath) status.probe_path = probePath
  return {state: {up, http_up: httpUp, https_up: httpsUp, ipv6, status, status_reason: statusReason, status_changed_at: statusChangedAt, needs_rescan: needsRescan}, transitions}
}

/**
 * The summary rule over some protocol/family states: some IPv4 state is up, or, without
 * IPv4 states, some IPv6 state is up; undefined when there are no states.
 */
function summaryUp(entries: Array<[key: string, state: CheckState]>): boolean | undefined {
  const v4 = entries.filter(([key]) => key.endsWith('/ipv4'))
  if (v4.length > 0) return v4.some(([, s]) => s.up)
  const v6 = entries.filter(([key]) => key.endsWith('/ipv6'))
  if (v6.length > 0) return v6.some(([, s]) => s.up)
  return undefined
}

/**
 * Whether a round's checks show the mirror honours `Range` (RFC 9110 §14): every check asks
 * for `bytes=0-0`, so a `206` from a check that passed says yes, and a `200` (the whole file)
 * of more than one byte says no; undefined when the round tells nothing (the base URL was
 * checked, not a file; no check passed; a file of one byte or none, whose whole is its range).
 */
export function rangeSupport(checks: readonly CheckResult[], request: ProbeRequest): boolean | undefined {
  if (request.kind === 'base') return undefined
  let verdict: boolean | undefined
  for (const c of checks) {
    if (!c.ok) continue
    if (c.httpStatus === 206) return true
    if (c.httpStatus === 200 && c.size !== null && c.size > 1) verdict = false
  }
  return verdict
}

/** Stable JSON (sorted keys) for change detection. */
function stable(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stable).join(',')}]`
  if (value && typeof value === 'object')
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stable((value as Record<string, unknown>)[k])}`)
      .join(',')}}`
  return JSON.stringify(value)
}

/** What recording one mirror's round produced. */
export interface RecordedProbe {
  mirrorId: number
  identifier: string
  /** The summary before and after this round. */
  wasUp: boolean
  up: boolean
  /** The per-scheme summaries after this round (null: that scheme was not probed). */
  httpUp: boolean | null
  httpsUp: boolean | null
  ipv6: boolean | null
  reason: string | null
  needsRescan: boolean
  enabled: boolean
  /** True when `--enable` re-enabled this mirror in this round. */
  reenabled: boolean
  transitions: Transition[]
}

/**
 * Writes one mirror's round in one transaction: locks the mirror row, applies
 * {@link nextState} and {@link rangeSupport} (`range_ok`), updates the row only when something changed, appends the checks to
 * `mirror_probe` and the transitions to `mirror_transition`, and trims both to the newest
 * `probe.history` / `probe.transitions` rows of that mirror.
 *
 * @param options.enable  re-enable the mirror when it is disabled and some check succeeded
 * @throws MbError-free: database errors propagate (the transaction is rolled back)
 */
export async function recordProbe(db: Kysely<DB>, result: MirrorProbeResult, config: ProbeConfig, options: {enable?: boolean; now?: Date} = {}): Promise<RecordedProbe | undefined> {
  const now = options.now ?? new Date()
  return db.transaction().execute(async (trx) => {
    const row = await trx
      .selectFrom('mirror')
      .select(['id', 'identifier', 'up', 'http_up', 'https_up', 'ipv6', 'status', 'status_reason', 'status_changed_at', 'needs_rescan', 'enabled', 'range_ok'])
      .where('id', '=', result.mirrorId)
      .forUpdate()
      .executeTakeFirst()
    if (!row) return undefined // deleted while probing
    const previous: MirrorState = {
      up: row.up,
      http_up: row.http_up,
      https_up: row.https_up,
      ipv6: row.ipv6,
      status: parseStatus(row.status),
      status_reason: row.status_reason,
      status_changed_at: row.status_changed_at ? new Date(row.status_changed_at) : null,
      needs_rescan: row.needs_rescan,
    }
    const probePath = result.request.kind === 'file' ? result.request.path : undefined
    const {state, transitions} = nextState(previous, result.checks, {noIpv6: result.noIpv6, probePath}, config, now)
    const reenable = Boolean(options.enable) && !row.enabled && result.checks.some((c) => c.ok)
    const rangeOk = rangeSupport(result.checks, result.request) ?? row.range_ok
    const changed =
      reenable ||
      rangeOk !== row.range_ok ||
      state.up !== previous.up ||
      state.http_up !== previous.http_up ||
      state.https_up !== previous.https_up ||
      state.ipv6 !== previous.ipv6 ||
      state.status_reason !== previous.status_reason ||
      state.needs_rescan !== previous.needs_rescan ||
      stable(state.status) !== stable(previous.status)
    if (changed) {
      await trx
        .updateTable('mirror')
        .set({
          up: state.up,
          http_up: state.http_up,
          https_up: state.https_up,
          ipv6: state.ipv6,
          status: JSON.stringify(state.status),
          status_reason: state.status_reason,
          status_changed_at: state.status_changed_at,
          needs_rescan: state.needs_rescan,
          range_ok: rangeOk,
          ...(reenable ? {enabled: true} : {}),
        })
        .where('id', '=', row.id)
        .execute()
    }
    await appendHistory(trx, row.id, result.checks, transitions, config)
    return {
      mirrorId: row.id,
      identifier: row.identifier,
      wasUp: previous.up,
      up: state.up,
      httpUp: state.http_up,
      httpsUp: state.https_up,
      ipv6: state.ipv6,
      reason: state.status_reason,
      needsRescan: state.needs_rescan,
      enabled: row.enabled || reenable,
      reenabled: reenable,
      transitions,
    }
  })
}

/** Appends a round's checks and transitions to the mirror's history, each trimmed to its configured length. */
async function appendHistory(trx: Transaction<DB>, mirrorId: number, checks: MirrorProbeResult['checks'], transitions: Transition[], config: ProbeConfig): Promise<void> {
  if (checks.length > 0) {
    await trx
      .insertInto('mirror_probe')
      .values(
        checks.map((c) => ({
          mirror_id: mirrorId,
          at: c.at,
          protocol: c.protocol,
          family: c.family,
          ok: c.ok,
          http_status: c.httpStatus,
          latency_ms: c.latencyMs,
          reason: c.reason,
          url: c.url,
          detail: c.detail ?? null,
        })),
      )
      .execute()
    await trim(trx, 'mirror_probe', mirrorId, config.history)
  }
  if (transitions.length > 0) {
    await trx
      .insertInto('mirror_transition')
      .values(transitions.map((t) => ({mirror_id: mirrorId, at: t.at, scope: t.scope, from_state: t.from_state, to_state: t.to_state, reason: t.reason})))
      .execute()
    await trim(trx, 'mirror_transition', mirrorId, config.transitions)
  }
}

/** Keeps the newest `keep` rows of `mirrorId` in a history table. */
async function trim(trx: Transaction<DB>, table: 'mirror_probe' | 'mirror_transition', mirrorId: number, keep: number): Promise<void> {
  await sql`
    DELETE FROM ${sql.table(table)}
    WHERE mirror_id = ${mirrorId}
      AND id < (SELECT id FROM ${sql.table(table)} WHERE mirror_id = ${mirrorId} ORDER BY id DESC OFFSET ${keep - 1} LIMIT 1)`.execute(trx)
}

/**
 * Chooses what to request on a mirror: `probe.sentinel` when configured; else the cached
 * known file (`status.probe_path`) while the mirror still holds it; else the smallest file
 * the scans found on this mirror (non-empty files first); else the base URL.
 */
export async function chooseRequest(db: Kysely<DB>, mirror: {id: number; status: unknown}, config: Pick<ProbeConfig, 'sentinel'>): Promise<ProbeRequest> {
  if (config.sentinel) return {kind: 'sentinel', path: trimLeadingSlashes(config.sentinel)}
  const cached = parseStatus(mirror.status).probe_path
  if (cached) {
    const still = await db.selectFrom('file').select('id').where('path', '=', cached).where(sql<boolean>`${mirror.id}::smallint = ANY(mirrors)`).executeTakeFirst()
    if (still) return {kind: 'file', path: cached}
  }
  const smallest = await db
    .selectFrom('file')
    .select('path')
    .where(sql<boolean>`${mirror.id}::smallint = ANY(mirrors)`)
    .orderBy(sql`size = 0`)
    .orderBy('size')
    .orderBy('path')
    .limit(1)
    .executeTakeFirst()
  if (smallest) return {kind: 'file', path: smallest.path}
  return {kind: 'base'}
}
