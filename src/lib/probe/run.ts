/**
 * A probe round over many mirrors: choose the mirrors, probe them with a concurrency limit
 * (`p-limit`), and record each mirror's results in its own transaction.
 */
import pLimit from 'p-limit'
import type {Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {MbError} from '../errors.js'
import type {ProbeConfig} from './config.js'
import {ProbeClient, type ProbeClientOptions, type Resolver} from './http.js'
import {probeMirror, type CheckResult, type ProbeRequest} from './probe.js'
import {chooseRequest, recordProbe, type Transition} from './state.js'
import {readMirrorTrace, recordTrace, type TraceRead, type TraceTarget, traceUrl} from './trace.js'
import {trustTrace} from './trust.js'

/** Options of one round. */
export interface ProbeRoundOptions {
  /** Mirror identifiers to probe (enabled or not); empty = every enabled mirror. */
  names?: string[]
  /** Also probe disabled mirrors, and re-enable those that answer. */
  enable?: boolean
  /** Concurrency (default `probe.jobs`). */
  jobs?: number
  /** Pooled clients per mirror id, kept by the caller across rounds (background probing). */
  clients?: Map<number, ProbeClient>
  /** Host name resolver (tests); default `dns.lookup`. */
  resolver?: Resolver
  /** `sync.trace_path`: also read each mirror's copy of the sync trace (./trace.ts). */
  tracePath?: string
  /** `sync.margin_seconds` under `select.trust_trace`: a trace that moved vouches for new files (./trust.ts). */
  trustMarginSeconds?: number
  /** Ends the round when aborted (`mb serve` stopping): the mirrors not probed to the end are skipped, their state untouched. */
  signal?: AbortSignal
}

/** One mirror's outcome in a round (the `--json` shape of `mb probe`, per mirror). */
export interface MirrorRoundResult {
  id: number
  identifier: string
  enabled: boolean
  reenabled: boolean
  /** Summary state before and after this round. */
  was_up: boolean
  up: boolean
  /** The HTTP and HTTPS summaries after this round; null when that scheme was not probed (no URL). */
  http_up: boolean | null
  https_up: boolean | null
  ipv6: boolean | null
  reason: string | null
  needs_rescan: boolean
  /** What was requested: an origin path, the sentinel, or the base URL. */
  request: ProbeRequest
  checks: Array<{
    key: string
    protocol: string
    family: string
    address: string | null
    url: string
    ok: boolean
    reason: string
    http_status: number | null
    latency_ms: number
    at: string
    detail?: string
  }>
  transitions: Array<{scope: string; from: string; to: string; reason: string; at: string}>
  /** Set when the mirror could not be probed (no HTTP/HTTPS URL, or recording failed). */
  skipped?: string
  /** The read of the mirror's sync trace, with `tracePath`: the time it holds, unchanged since the last read, or why it could not be read. */
  trace?: {synced_at: string; trusted?: string[]} | {unchanged: true} | {error: string}
}

/** The result of a round. */
export interface ProbeRound {
  /** Start of the round (UTC). */
  at: string
  /** Mirrors that were probed (skipped ones excluded). */
  probed: number
  up: number
  down: number
  skipped: number
  mirrors: MirrorRoundResult[]
}

/** Client options from the probe configuration. */
export function clientOptions(config: ProbeConfig, resolver?: Resolver, signal?: AbortSignal): ProbeClientOptions {
  return {
    signal,
    connectTimeout: config.connect_timeout,
    timeout: config.timeout,
    insecureTls: config.insecure_tls,
    userAgent: config.user_agent,
    userAgents: config.user_agents,
    redirects: config.redirects,
    maxRedirects: config.max_redirects,
    resolver,
  }
}

function checkJson(c: CheckResult) {
  return {
    key: c.key,
    protocol: c.protocol,
    family: c.family,
    address: c.address,
    url: c.url,
    ok: c.ok,
    reason: c.reason,
    http_status: c.httpStatus,
    latency_ms: c.latencyMs,
    at: c.at.toISOString(),
    ...(c.detail ? {detail: c.detail} : {}),
  }
}

function transitionJson(t: Transition) {
  return {scope: t.scope, from: t.from_state, to: t.to_state, reason: t.reason, at: t.at.toISOString()}
}

/**
 * Reads and records `mirror`'s trace over the family of its first passing check (IPv4 first).
 * @returns the `trace` entry of the round's result
 */
async function readTrace(
  db: Kysely<DB>,
  client: ProbeClient,
  mirror: TraceTarget & {id: number},
  checks: CheckResult[],
  options: {tracePath: string; trustMarginSeconds?: number},
): Promise<NonNullable<MirrorRoundResult['trace']>> {
  const {tracePath, trustMarginSeconds} = options
  const where = traceUrl(mirror, tracePath)
  const family = checks.find((c) => c.ok && c.family === 'ipv4')?.family ?? checks.find((c) => c.ok)?.family ?? 'ipv4'
  const read: TraceRead = 'error' in where ? {kind: 'error', error: where.error} : await readMirrorTrace(client, family, where.url, mirror.sync_validator)
  await recordTrace(db, mirror.id, read)
  if (read.kind === 'time') {
    const trusted = trustMarginSeconds === undefined ? [] : await trustTrace(db, mirror.id, trustMarginSeconds)
    return {synced_at: read.at.toISOString(), ...(trusted.length > 0 ? {trusted} : {})}
  }
  return read.kind === 'unchanged' ? {unchanged: true} : {error: read.error}
}

/** The mirror columns a round reads. */
type RoundMirror = {
  id: number
  identifier: string
  http_url: string | null
  https_url: string | null
  base_path: string
  enabled: boolean
  up: boolean
  http_up: boolean | null
  https_up: boolean | null
  status: unknown
  sync_validator: string | null
}

/** Probes and records one mirror of a round (its trace too, with `options.tracePath`). */
async function probeOne(db: Kysely<DB>, config: ProbeConfig, mirror: RoundMirror, clients: Map<number, ProbeClient>, options: ProbeRoundOptions): Promise<MirrorRoundResult> {
  const base = {
    id: mirror.id,
    identifier: mirror.identifier,
    enabled: mirror.enabled,
    reenabled: false,
    was_up: mirror.up,
    up: mirror.up,
    http_up: mirror.http_up,
    https_up: mirror.https_up,
    ipv6: null,
    reason: null,
    needs_rescan: false,
    request: {kind: 'base'} as ProbeRequest,
    checks: [],
    transitions: [],
  }
  if (!mirror.http_url && !mirror.https_url) return {...base, skipped: 'no HTTP or HTTPS URL to probe'}
  let client = clients.get(mirror.id)
  if (!client) {
    client = new ProbeClient(clientOptions(config, options.resolver, options.signal))
    clients.set(mirror.id, client)
  }
  const stopped = {...base, skipped: 'the round was stopped'}
  if (client.stopped) return stopped
  const request = await chooseRequest(db, mirror, config)
  const result = await probeMirror(mirror, {client, request})
  // Checks cut short by the stop say nothing about the mirror.
  if (client.stopped) return {...stopped, request}
  const recorded = await recordProbe(db, result, config, {enable: options.enable})
  if (!recorded) return {...base, request, checks: result.checks.map(checkJson), skipped: 'mirror was deleted while probing'}
  const trace =
    options.tracePath && recorded.up && !client.stopped ? await readTrace(db, client, mirror, result.checks, {tracePath: options.tracePath, trustMarginSeconds: options.trustMarginSeconds}) : undefined
  return {
    id: mirror.id,
    identifier: mirror.identifier,
    enabled: recorded.enabled,
    reenabled: recorded.reenabled,
    was_up: recorded.wasUp,
    up: recorded.up,
    http_up: recorded.httpUp,
    https_up: recorded.httpsUp,
    ipv6: recorded.ipv6,
    reason: recorded.reason,
    needs_rescan: recorded.needsRescan,
    request,
    checks: result.checks.map(checkJson),
    transitions: recorded.transitions.map(transitionJson),
    ...(trace ? {trace} : {}),
  }
}

/**
 * Runs one probe round and records it.
 *
 * @throws MbError MIRROR_NOT_FOUND (exit 1, as for `mb mirror show`) when a named mirror does not exist (nothing is probed then)
 */
export async function probeMirrors(db: Kysely<DB>, config: ProbeConfig, options: ProbeRoundOptions = {}): Promise<ProbeRound> {
  const at = new Date()
  let query = db
    .selectFrom('mirror')
    .select(['id', 'identifier', 'http_url', 'https_url', 'base_path', 'sign_scheme', 'sign_secret', 'sign_ttl_seconds', 'enabled', 'up', 'http_up', 'https_up', 'status', 'sync_validator'])
    .orderBy('identifier')
  const names = options.names ?? []
  if (names.length > 0) query = query.where('identifier', 'in', names)
  else if (!options.enable) query = query.where('enabled', '=', true)
  const mirrors = await query.execute()
  if (names.length > 0) {
    const found = new Set(mirrors.map((m) => m.identifier))
    const missing = names.filter((n) => !found.has(n))
    if (missing.length > 0) throw new MbError(`No mirror named ${missing.map((n) => `"${n}"`).join(', ')}. See \`mb mirror list\` for the registered identifiers.`, {code: 'MIRROR_NOT_FOUND'})
  }

  const ownClients = !options.clients
  const clients = options.clients ?? new Map<number, ProbeClient>()
  const limit = pLimit(options.jobs ?? config.jobs)
  try {
    const results = await Promise.all(mirrors.map((mirror) => limit(() => probeOne(db, config, mirror, clients, options))))
    const probed = results.filter((r) => !r.skipped)
    return {
      at: at.toISOString(),
      probed: probed.length,
      up: probed.filter((r) => r.up).length,
      down: probed.filter((r) => !r.up).length,
      skipped: results.length - probed.length,
      mirrors: results,
    }
  } finally {
    if (ownClients) await Promise.all([...clients.values()].map((c) => c.close()))
  }
}
