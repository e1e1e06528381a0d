/**
 * Probing one mirror: every base URL (HTTP, HTTPS) over every address family its host
 * resolves to, each as a separate check. Network only; recording the results and the
 * hysteresis live in `state.ts`.
 */
import {compileSigner} from '../sign.js'
import type {CheckOutcome, Family, ProbeClient, ReasonCode} from './http.js'
import {classifyError, mirrorFileUrl} from './http.js'

/** The protocols probed, in this order. */
export const PROBE_PROTOCOLS = ['http', 'https'] as const
export type ProbeProtocol = (typeof PROBE_PROTOCOLS)[number]

/** What a probe needs to know about a mirror (a subset of the mirror row). */
export interface ProbeTarget {
  id: number
  identifier: string
  http_url: string | null
  https_url: string | null
  /** Origin subtree the base URLs carry ('' = the whole tree). */
  base_path: string
  /** How the mirror's URLs are signed (../sign.ts): probes request what clients are sent, signed. */
  sign_scheme?: string | null
  sign_secret?: string | null
  sign_ttl_seconds?: number | null
}

/** What to request on the mirror. */
export type ProbeRequest =
  /** An origin path (relative, no leading slash), mapped through the mirror's base_path. */
  | {kind: 'file'; path: string}
  /** A path below the base URL, used as is (`probe.sentinel`). */
  | {kind: 'sentinel'; path: string}
  /**
   * Nothing known: the base URL itself (weak: an empty server answers 200 on `/`). A 401 or
   * 403 answer counts as success here: it is how a server without directory listings answers
   * for a directory, and it proves the host, port and TLS work (see {@link baseOutcome}).
   */
  | {kind: 'base'}

/** One check: one protocol over one address family. */
export interface CheckResult {
  /** `<protocol>/<family>`, e.g. `https/ipv6`: the key of the state in `mirror.status`. */
  key: string
  protocol: ProbeProtocol
  family: Family
  /** The address the host resolved to for this family (informational). */
  address: string | null
  url: string
  ok: boolean
  reason: ReasonCode
  httpStatus: number | null
  latencyMs: number
  /** When the check started (UTC). */
  at: Date
  /** Resource size in bytes when the answer told it. */
  size: number | null
  detail?: string
}

/** All checks of one mirror in one round. */
export interface MirrorProbeResult {
  mirrorId: number
  identifier: string
  at: Date
  request: ProbeRequest
  checks: CheckResult[]
  /**
   * False when every base URL's host resolved and none has an IPv6 address (a definite "no
   * IPv6"); null when that cannot be told from resolution alone.
   */
  noIpv6: boolean
}

/**
 * A check of the base URL itself (`kind: 'base'`, before any scan found a file) that got
 * 401 or 403 passes, with a detail saying so: a mirror that forbids directory listings is
 * reachable, and only a known file can tell more. Other outcomes are returned unchanged.
 */
export function baseOutcome(outcome: CheckOutcome): CheckOutcome {
  if (outcome.ok || (outcome.httpStatus !== 401 && outcome.httpStatus !== 403)) return outcome
  return {...outcome, ok: true, reason: 'ok', detail: `the base URL answers ${outcome.httpStatus} (no directory listing): reachable; a scanned file makes a stronger check`}
}

/** The URL a check requests for `request` below `baseUrl`. */
export function requestUrl(baseUrl: string, basePath: string, request: ProbeRequest): string {
  if (request.kind === 'file') return mirrorFileUrl(baseUrl, basePath, request.path)
  if (request.kind === 'sentinel') return mirrorFileUrl(baseUrl, '', request.path)
  return baseUrl
}

/**
 * Probes `mirror` once: for each of `http_url` and `https_url` that is set, resolves the
 * host (A and AAAA via the client's resolver) and checks the requested file over each
 * family found, in parallel, with the client's pooled connections. Never throws for
 * network failures; they become checks with a reason code (`dns` when the host does not
 * resolve, recorded on the ipv4 key).
 *
 * @param mirror  the mirror's URLs and base path
 * @param options.client   the mirror's {@link ProbeClient} (reuse it across rounds)
 * @param options.request  what to request (see {@link ProbeRequest})
 */
export async function probeMirror(mirror: ProbeTarget, options: {client: ProbeClient; request: ProbeRequest}): Promise<MirrorProbeResult> {
  const at = new Date()
  const jobs: Array<Promise<CheckResult>> = []
  let resolvedAll = true
  let sawIpv6 = false
  const sign = compileSigner(mirror.sign_scheme, mirror.sign_secret, mirror.sign_ttl_seconds)
  for (const protocol of PROBE_PROTOCOLS) {
    const baseUrl = protocol === 'http' ? mirror.http_url : mirror.https_url
    if (!baseUrl) continue
    const unsigned = requestUrl(baseUrl, mirror.base_path ?? '', options.request)
    const url = sign ? sign(unsigned) : unsigned
    let families: Map<Family, string>
    try {
      families = await options.client.families(new URL(baseUrl).hostname)
    } catch (error) {
      resolvedAll = false
      jobs.push(
        Promise.resolve({
          key: `${protocol}/ipv4`,
          protocol,
          family: 'ipv4',
          address: null,
          url,
          ok: false,
          reason: classifyError(error) === 'error' ? 'dns' : classifyError(error),
          httpStatus: null,
          latencyMs: 0,
          at: new Date(),
          size: null,
          detail: (error as Error).message,
        }),
      )
      continue
    }
    if (families.size === 0) resolvedAll = false
    if (families.has('ipv6')) sawIpv6 = true
    for (const [family, address] of families) {
      jobs.push(
        (async () => {
          const started = new Date()
          const checked: CheckOutcome = await options.client.check(url, family, baseUrl)
          const outcome = options.request.kind === 'base' ? baseOutcome(checked) : checked
          return {
            key: `${protocol}/${family}`,
            protocol,
            family,
            address,
            url,
            ok: outcome.ok,
            reason: outcome.reason,
            httpStatus: outcome.httpStatus,
            latencyMs: outcome.latencyMs,
            at: started,
            size: outcome.size,
            ...(outcome.detail ? {detail: outcome.detail} : {}),
          }
        })(),
      )
    }
  }
  const checks = await Promise.all(jobs)
  return {mirrorId: mirror.id, identifier: mirror.identifier, at, request: options.request, checks, noIpv6: resolvedAll && !sawIpv6 && checks.length > 0}
}
