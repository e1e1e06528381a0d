/**
 * The HTTP side of probing: connection pools per mirror and address family, one checked
 * request with a controlled redirect walk, and the classification of every outcome into a
 * stable reason code.
 *
 * Requests go through `undici` 7 Agents. A {@link ProbeClient} holds one Agent per address
 * family, whose connector resolves host names through the probe's resolver restricted to
 * that family, so a check over IPv6 really connects over IPv6 while the URL (hence the Host
 * header and the TLS SNI server name) keeps the mirror's host name. Agents keep connections
 * alive, so repeated checks (background probing) reuse them. A redirect target that the
 * `public` policy checked is connected to at the addresses checked, not looked up again.
 *
 * Sources: RFC 9110 §15.4 (redirections), §14 (range requests; `Content-Range`), RFC 6890
 * and the IANA special-purpose address registries (what counts as non-global).
 */
import {createHash} from 'node:crypto'
import {lookup as dnsLookup} from 'node:dns/promises'
import type {LookupAddress} from 'node:dns'
import {isIP, type LookupFunction} from 'node:net'
import {Agent} from 'undici'
import type {RedirectPolicy} from './config.js'
import {parseIp} from '../net.js'
import {encodePath} from '../select/url.js'
import {trimLeadingSlashes, withTrailingSlash} from '../text.js'

/** Address family of one check. */
export type Family = 'ipv4' | 'ipv6'

/**
 * Why a check ended as it did. `ok` is the only success. HTTP errors are `http_<status>`
 * (e.g. `http_403`, `http_404`, `http_500`).
 */
export type ReasonCode =
  | 'ok'
  | 'timeout'
  | 'refused'
  | 'reset'
  | 'unreachable'
  | 'dns'
  | 'no_address'
  | 'tls_error'
  | 'redirect_private'
  | 'redirect_offsite'
  | 'redirect_loop'
  | 'bad_redirect'
  | 'error'
  | `http_${number}`

/**
 * Resolves a host name to addresses, like `dns.lookup(host, {all: true})`. Injectable so
 * that tests can give a host name both a 127.0.0.1 and a ::1 address.
 */
export type Resolver = (hostname: string) => Promise<LookupAddress[]>

/** The system resolver (getaddrinfo via `dns.lookup`, all addresses, both families). */
const systemResolver: Resolver = (hostname) => dnsLookup(hostname, {all: true, verbatim: true})

/** Options of a {@link ProbeClient}. Times in seconds. */
export interface ProbeClientOptions {
  connectTimeout: number
  timeout: number
  insecureTls: boolean
  userAgent: string
  /** More User-Agent headers to check with: a check passes only when the mirror answers every one (`probe.user_agents`). */
  userAgents?: readonly string[]
  redirects: RedirectPolicy
  maxRedirects: number
  resolver?: Resolver
  /**
   * Ends the client's work when aborted (`mb serve` stopping): the requests under way fail at
   * once and later ones fail without a connection, so a round under way ends in moments
   * rather than after its timeouts; {@link ProbeClient.stopped} tells its caller not to record them.
   */
  signal?: AbortSignal
}

/** One HTTP answer (or failure) after the redirect walk. */
export interface CheckOutcome {
  ok: boolean
  reason: ReasonCode
  /** Status of the last response received, if any. */
  httpStatus: number | null
  /** Milliseconds from the first request to the last response's headers (or the failure). */
  latencyMs: number
  /** The URL requested last (after redirects). */
  finalUrl: string
  /** Total size of the resource in bytes: from `Content-Range` (206) or `Content-Length` (200). */
  size: number | null
  /** Human detail for failures (error message, redirect target). */
  detail?: string
}

/** True for addresses outside the global unicast space (private, loopback, link-local, ULA, CGN, ...). */
export function isNonGlobalAddress(address: string): boolean {
  const parsed = parseIp(address)
  return parsed !== undefined && parsed.range() !== 'unicast'
}

function stripBrackets(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

/** `scheme://host:port` with the default port made explicit, for same-origin comparisons. */
function originKey(url: URL): string {
  const port = url.port || (url.protocol === 'https:' ? '443' : '80')
  return `${url.protocol}//${url.hostname.toLowerCase()}:${port}`
}

/** Maps a thrown network/TLS error to a reason code. */
export function classifyError(error: unknown): ReasonCode {
  const e = error as {code?: string; name?: string; message?: string; cause?: unknown}
  const code = e?.code ?? ''
  const name = e?.name ?? ''
  if (name === 'TimeoutError' || name === 'AbortError' || code === 'UND_ERR_ABORTED') return 'timeout'
  if (['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'ETIMEDOUT', 'ESOCKETTIMEDOUT'].includes(code)) return 'timeout'
  if (code === 'ECONNREFUSED') return 'refused'
  if (code === 'ECONNRESET' || code === 'EPIPE' || code === 'UND_ERR_SOCKET' || code === 'UND_ERR_CLOSED') return 'reset'
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'EADDRNOTAVAIL' || code === 'EAFNOSUPPORT') return 'unreachable'
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN' || code === 'EAI_FAIL' || code === 'ENODATA') return 'dns'
  if (code.startsWith('ERR_TLS') || code.startsWith('ERR_SSL') || /CERT|SELF_SIGNED|UNABLE_TO_(GET|VERIFY)|HOSTNAME_MISMATCH/.test(code) || /certificate|SSL routines|TLS/i.test(e?.message ?? '')) {
    return 'tls_error'
  }
  if (e?.cause && e.cause !== error) {
    const inner = classifyError(e.cause)
    if (inner !== 'error') return inner
  }
  return 'error'
}

/** Reason code for a final HTTP status (2xx and 416 count as success: the file is there). */
export function classifyStatus(status: number): ReasonCode {
  if ((status >= 200 && status < 300) || status === 416) return 'ok'
  return `http_${status}`
}

/**
 * Total resource size from a response: the part after `/` in `Content-Range: bytes a-b/N`
 * (RFC 9110 §14.4) for 206 and 416, else `Content-Length` for a 200. Null when unknown.
 */
export function sizeFromHeaders(status: number, headers: Record<string, string | string[] | undefined>): number | null {
  const header = (key: string) => {
    const value = headers[key]
    return Array.isArray(value) ? value[0] : value
  }
  if (status === 206 || status === 416) {
    const match = /\/(\d+)\s*$/.exec(header('content-range') ?? '')
    return match ? Number(match[1]) : null
  }
  if (status === 200) {
    const length = header('content-length')
    return length !== undefined && /^\d+$/.test(length) ? Number(length) : null
  }
  return null
}

/**
 * Connection pools and checks for one mirror. Create one per mirror, reuse it for every
 * check of that mirror (each round of background probing), and `close()` it when done.
 */
export class ProbeClient {
  private readonly agents = new Map<Family, Agent>()
  /**
   * Addresses of redirect targets as the `public` redirect check resolved and accepted them,
   * by host name. The connector uses these instead of resolving again, so the address
   * checked is the address connected to (a second lookup could answer differently: DNS
   * rebinding). Each check of a host replaces its entry before the request that follows.
   */
  private readonly checkedAddresses = new Map<string, LookupAddress[]>()
  readonly resolver: Resolver

  private readonly onStop = () => void this.close()

  constructor(readonly options: ProbeClientOptions) {
    this.resolver = options.resolver ?? systemResolver
    options.signal?.addEventListener('abort', this.onStop, {once: true})
  }

  /** Whether `options.signal` was aborted: what the client answered since is no finding about the mirror. */
  get stopped(): boolean {
    return this.options.signal?.aborted ?? false
  }

  /**
   * The Agent that connects over `family` only (created on first use).
   * @throws Error once {@link stopped}: every request fails, as a network failure would
   */
  agent(family: Family): Agent {
    if (this.stopped) throw new Error('mb is stopping: check not made')
    let agent = this.agents.get(family)
    if (!agent) {
      const want = family === 'ipv4' ? 4 : 6
      const checked = this.checkedAddresses
      const resolver: Resolver = (hostname) => {
        const pinned = checked.get(hostname.toLowerCase())
        return pinned ? Promise.resolve(pinned) : this.resolver(hostname)
      }
      agent = new Agent({
        connections: 1, // one connection per origin and family: polite, and always reused
        keepAliveTimeout: 30_000,
        headersTimeout: this.options.timeout * 1000,
        bodyTimeout: this.options.timeout * 1000,
        connect: {
          timeout: this.options.connectTimeout * 1000,
          rejectUnauthorized: !this.options.insecureTls,
          family: want,
          autoSelectFamily: false,
          // net.connect ignores the address when the lookup fails, so the failures pass an empty one.
          lookup(hostname: string, opts: {all?: boolean}, callback: Parameters<LookupFunction>[2]) {
            resolver(hostname).then(
              (addresses) => {
                const matching = addresses.filter((a) => a.family === want)
                if (matching.length === 0) {
                  const error = Object.assign(new Error(`${hostname} has no IPv${want} address`), {code: 'ENODATA'})
                  callback(error, '')
                } else if (opts?.all) {
                  callback(null, matching)
                } else {
                  callback(null, matching[0].address, matching[0].family)
                }
              },
              (error: NodeJS.ErrnoException) => callback(error, ''),
            )
          },
        },
      })
      this.agents.set(family, agent)
    }
    return agent
  }

  /** The families a host name resolves to, with one address each; IP literals give their own. */
  async families(hostname: string): Promise<Map<Family, string>> {
    const host = stripBrackets(hostname)
    const literal = isIP(host)
    if (literal) return new Map([[literal === 4 ? 'ipv4' : 'ipv6', host]])
    const addresses = await this.resolver(host)
    const result = new Map<Family, string>()
    for (const a of addresses) {
      const family: Family = a.family === 6 ? 'ipv6' : 'ipv4'
      if (!result.has(family)) result.set(family, a.address)
    }
    return result
  }

  /**
   * Requests `url` over `family` with `GET` and `Range: bytes=0-0` (RFC 9110 §14.2) rather
   * than HEAD, which some mirrors reject; at most a byte of the body is read. Redirects are
   * walked by hand under the configured policy. With `userAgents`, the request is made once
   * with `userAgent` and once with each of them, in turn: the first failure is the outcome,
   * and its detail names every User-Agent the mirror refused with why ("with User-Agent
   * "Wget/1.21.4": HTTP 403; with User-Agent "curl/8.5.0": HTTP 403"), so the admin fixes
   * them all at once rather than meeting the next one on the following probe.
   * Never throws: failures become reason codes.
   */
  async check(url: string, family: Family, baseUrl: string): Promise<CheckOutcome> {
    const first = await this.walk(url, family, baseUrl, this.options.userAgent)
    const more = this.options.userAgents ?? []
    if (!first.ok || more.length === 0) return first
    let failed: CheckOutcome | undefined
    const refusals: string[] = []
    for (const agent of more) {
      if (agent === this.options.userAgent) continue
      const outcome = await this.walk(url, family, baseUrl, agent)
      if (outcome.ok) continue
      failed ??= outcome
      refusals.push(`with User-Agent "${agent}": ${outcome.detail ?? outcome.reason}`)
    }
    return failed === undefined ? first : {...failed, detail: refusals.join('; ')}
  }

  /** One request of {@link check} with `userAgent`, redirects walked. */
  private async walk(url: string, family: Family, baseUrl: string, userAgent: string): Promise<CheckOutcome> {
    const started = performance.now()
    const elapsed = () => Math.round(performance.now() - started)
    const signal = AbortSignal.timeout(this.options.timeout * 1000)
    const base = new URL(baseUrl)
    const seen = new Set<string>()
    let current = new URL(url)
    let lastStatus: number | null = null
    /** The first redirect target on another host, when followed. */
    let offsite: string | undefined
    for (let hop = 0; ; hop++) {
      seen.add(current.href)
      let status: number
      let headers: Record<string, string | string[] | undefined>
      try {
        const response = await this.agent(family).request({
          origin: current.origin,
          path: `${current.pathname}${current.search}`,
          method: 'GET',
          headers: {'user-agent': userAgent, range: 'bytes=0-0', accept: '*/*'},
          signal,
        })
        status = response.statusCode
        headers = response.headers
        await response.body.dump({limit: 65536}).catch(() => {})
      } catch (error) {
        return {ok: false, reason: classifyError(error), httpStatus: lastStatus, latencyMs: elapsed(), finalUrl: current.href, size: null, detail: (error as Error).message}
      }
      lastStatus = status
      if (status >= 300 && status < 400 && status !== 304) {
        const location = Array.isArray(headers.location) ? headers.location[0] : headers.location
        if (!location) return {ok: false, reason: `http_${status}`, httpStatus: status, latencyMs: elapsed(), finalUrl: current.href, size: null, detail: 'redirect without Location'}
        let next: URL
        try {
          next = new URL(location, current)
        } catch {
          return {ok: false, reason: 'bad_redirect', httpStatus: status, latencyMs: elapsed(), finalUrl: current.href, size: null, detail: `unparsable Location: ${location}`}
        }
        const fail = (reason: ReasonCode, detail: string): CheckOutcome => ({ok: false, reason, httpStatus: status, latencyMs: elapsed(), finalUrl: current.href, size: null, detail})
        if (next.protocol !== 'http:' && next.protocol !== 'https:') return fail('bad_redirect', `redirect to ${next.protocol} URL ${next.href}`)
        if (seen.has(next.href) || hop >= this.options.maxRedirects) return fail('redirect_loop', `redirect to ${next.href} after ${hop + 1} hop(s)`)
        if (originKey(next) !== originKey(base)) {
          if (this.options.redirects === 'same_origin') return fail('redirect_offsite', `redirects to another host: ${next.href} (probe.redirects: same_origin takes it out of selection)`)
          offsite ??= next.href
          if (this.options.redirects === 'public') {
            const host = stripBrackets(next.hostname)
            let resolved: LookupAddress[] = []
            try {
              if (!isIP(host)) resolved = await this.resolver(host)
            } catch (error) {
              return fail('dns', `redirect target ${host} does not resolve: ${(error as Error).message}`)
            }
            const addresses = isIP(host) ? [host] : resolved.map((a) => a.address)
            const bad = addresses.find((a) => isNonGlobalAddress(a))
            if (bad || host.toLowerCase() === 'localhost') return fail('redirect_private', `redirect to a private/loopback address: ${next.href}${bad && bad !== host ? ` (${bad})` : ''}`)
            // Connect to exactly the addresses just checked (the URL keeps the name for Host and SNI).
            if (!isIP(host)) this.checkedAddresses.set(host.toLowerCase(), resolved)
          }
        }
        current = next
        continue
      }
      const reason = classifyStatus(status)
      return {
        ok: reason === 'ok',
        reason,
        httpStatus: status,
        latencyMs: elapsed(),
        finalUrl: current.href,
        size: sizeFromHeaders(status, headers),
        ...(reason === 'ok' ? (offsite === undefined ? {} : {detail: `redirected to another host: ${offsite}`}) : {detail: `HTTP ${status}`}),
      }
    }
  }

  /** Closes every pooled connection; the requests under way fail. */
  async close(): Promise<void> {
    this.options.signal?.removeEventListener('abort', this.onStop)
    const agents = [...this.agents.values()]
    this.agents.clear()
    await Promise.all(agents.map((a) => a.destroy().catch(() => {})))
  }
}

/**
 * The URL of origin path `path` on a mirror whose base URL is `baseUrl` and which carries
 * the origin subtree `basePath` ('' = the whole tree). Path segments are percent-encoded as
 * redirects write them ({@link encodePath}), so the probe asks for the URL clients get.
 */
export function mirrorFileUrl(baseUrl: string, basePath: string, path: string): string {
  let relative = trimLeadingSlashes(path)
  const bare = trimLeadingSlashes(basePath)
  const prefix = bare && withTrailingSlash(bare)
  if (prefix && relative.startsWith(prefix)) relative = relative.slice(prefix.length)
  const base = withTrailingSlash(baseUrl)
  return base + encodePath(relative)
}

/** The final answer of {@link getWithinOrigin}: undici's response, whose body the caller reads or destroys. */
export type OriginAnswer = Awaited<ReturnType<Agent['request']>>

/**
 * GETs `url` over `family` with `headers` (plus the probe's User-Agent), following redirects
 * within the URL's own scheme, host and port (at most `probe.max_redirects`): the reads that
 * want a body, content checks and sync traces. The whole walk gets `probe.timeout`; the timer
 * is the request's own and ends when `use` returns, so a body given up is never aborted later
 * (an abort nothing listens to any more would be an unhandled 'error' event), and abort
 * errors of a body left unread are swallowed.
 *
 * @param use  reads the final answer (any status but a followed redirect) and returns the result
 * @param timeoutSeconds  the walk's time limit instead of `probe.timeout` (a long body's read)
 * @returns what `use` returns, or `{failure}` (`redirect_offsite: URL`, `redirect_loop`, or a
 *   reason code such as `timeout` or `refused`); never throws for network failures
 */
export async function getWithinOrigin<T>(
  client: ProbeClient,
  family: Family,
  url: string,
  headers: Record<string, string>,
  use: (answer: OriginAnswer, finalUrl: URL) => Promise<T>,
  timeoutSeconds = client.options.timeout,
): Promise<T | {failure: string}> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), timeoutSeconds * 1000)
  const origin = new URL(url).origin
  let current = new URL(url)
  try {
    for (let hop = 0; ; hop++) {
      const answer = await client.agent(family).request({
        origin: current.origin,
        path: `${current.pathname}${current.search}`,
        method: 'GET',
        headers: {'user-agent': client.options.userAgent, accept: '*/*', ...headers},
        signal: controller.signal,
      })
      answer.body.on('error', () => {})
      const location = answer.headers.location
      if (answer.statusCode >= 300 && answer.statusCode < 400 && answer.statusCode !== 304 && typeof location === 'string') {
        await answer.body.dump({limit: 65536}).catch(() => {})
        const next = new URL(location, current)
        if (next.origin !== origin) return {failure: `redirect_offsite: ${next.href}`}
        if (hop >= client.options.maxRedirects) return {failure: 'redirect_loop'}
        current = next
        continue
      }
      return await use(answer, current)
    }
  } catch (error) {
    return {failure: classifyError(error)}
  } finally {
    clearTimeout(timer)
  }
}

/**
 * Hashes the first `length` bytes of a response body with `algorithm` (a node:crypto hash
 * name: `md5`, `sha1`, `sha256`), for the checks that compare a mirror's bytes with the
 * index: a piece of a content check, a whole file of `mb probe file --hash`. Reading stops
 * once more than `length` bytes arrived.
 * @returns the bytes received, and the hex digest when exactly `length` arrived
 */
export async function digestBody(body: AsyncIterable<unknown>, algorithm: string, length: number): Promise<{bytes: number; digest?: string}> {
  const hash = createHash(algorithm)
  let received = 0
  for await (const chunk of body) {
    const buffer = chunk as Buffer
    if (received < length) hash.update(buffer.subarray(0, length - received))
    received += buffer.length
    if (received > length) break // longer than asked for: the caller's verdict says so
  }
  return {bytes: received, ...(received === length ? {digest: hash.digest('hex')} : {})}
}

/**
 * Hashes the first `length` bytes of a response body with SHA-1 piece by piece (`pieceSize`
 * bytes each, the last one shorter when `length` says so), as they stream: memory stays at one
 * chunk whatever the length (a whole-copy content check of a 4 GB ISO holds no more). Reading
 * stops once more than `length` bytes arrived.
 * @returns the bytes received, and the hex SHA-1 of each piece read whole (every piece once `length` bytes arrived)
 */
export async function digestPieces(body: AsyncIterable<unknown>, pieceSize: number, length: number): Promise<{bytes: number; sha1s: string[]}> {
  const sha1s: string[] = []
  let hash = createHash('sha1')
  let inPiece = 0
  let received = 0
  for await (const chunk of body) {
    const buffer = chunk as Buffer
    let usable = received < length ? buffer.subarray(0, length - received) : buffer.subarray(0, 0)
    received += buffer.length
    while (usable.length > 0) {
      const take = Math.min(usable.length, pieceSize - inPiece)
      hash.update(usable.subarray(0, take))
      inPiece += take
      usable = usable.subarray(take)
      if (inPiece === pieceSize) {
        sha1s.push(hash.digest('hex'))
        hash = createHash('sha1')
        inPiece = 0
      }
    }
    if (received > length) break // longer than asked for: the caller's verdict says so
  }
  if (inPiece > 0 && received >= length) sha1s.push(hash.digest('hex'))
  return {bytes: received, sha1s}
}
