/**
 * Verified redirects with escalation, as the Media Flow Controller's origin-escalation maps
 * do: before a redirect to a path that `select.verify_paths` names (or a file the origin
 * changed within `select.verify_recent_seconds`), the chosen mirror is asked with a HEAD
 * whether it serves the file. A connection error, a timeout or a configured status (404, 403,
 * 5xx by default) sends the client on to the next ranked mirror; when every candidate fails,
 * or the chain's time budget is spent, the origin delivers.
 *
 * Checks go over pooled keep-alive connections (an undici Agent, `verify_connections` per
 * host). A verdict is cached per (mirror, path) for `verify_cache_seconds`, and a check in
 * flight is shared by every request that needs it, so a popular file costs one HEAD per
 * mirror per interval.
 */
import picomatch from 'picomatch'
import {Agent} from 'undici'
import type {SelectConfig} from '../select/config.js'
import type {Candidate} from '../select/types.js'

/** The compiled `select.verify_*` settings. Times in ms, except `recentSeconds`. */
export interface VerifyOptions {
  /** True when a path matches `verify_paths` (basename or full path). */
  pathMatch: (path: string) => boolean
  /** Files with an origin mtime within this many seconds are checked; 0 = off. */
  recentSeconds: number
  budgetMs: number
  timeoutMs: number
  /** True for a HEAD status that fails the check. */
  failStatus: (status: number) => boolean
  cacheMs: number
  connections: number
}

/**
 * Compiles the `select:` section's verify settings, or undefined when verification is off
 * (no `verify_paths`, `verify_recent_seconds` 0): the redirect path then costs nothing more.
 */
export function compileVerifyOptions(select: SelectConfig): VerifyOptions | undefined {
  if (select.verify_paths.length === 0 && select.verify_recent_seconds === 0) return undefined
  const regexes = select.verify_paths.map((p) => picomatch.makeRe(p, {dot: true}))
  const codes = new Set<number>()
  const classes = new Set<number>()
  for (const s of select.verify_fail_statuses) {
    if (s.endsWith('xx')) classes.add(Number(s[0]))
    else codes.add(Number(s))
  }
  return {
    pathMatch: (path) => {
      const base = path.slice(path.lastIndexOf('/') + 1)
      for (const re of regexes) if (re.test(path) || re.test(base)) return true
      return false
    },
    recentSeconds: select.verify_recent_seconds,
    budgetMs: select.verify_budget_ms,
    timeoutMs: select.verify_timeout_ms,
    failStatus: (status) => codes.has(status) || classes.has(Math.floor(status / 100)),
    cacheMs: select.verify_cache_seconds * 1000,
    connections: select.verify_connections,
  }
}

/** One check's outcome: `ok`, or why it failed (`404`, `timeout`, `error: ECONNREFUSED`, `budget`). */
export interface Verdict {
  ok: boolean
  /** `200`, `404`, `timeout`, `error: ECONNREFUSED`, … */
  reason: string
  /** The verdict came from the cache (no HEAD for this request). */
  cached: boolean
}

/** What the chain of checks decided for one request. */
export interface VerifiedChoice {
  /** The first candidate whose check passed, or undefined: the origin delivers. */
  chosen: Candidate | undefined
  /** Every candidate checked before `chosen` (or all, when none passed), with its verdict. */
  failed: Array<{candidate: Candidate; verdict: Verdict}>
  /** Time the chain took (ms). */
  elapsedMs: number
}

/** Most cached verdicts kept; beyond it the oldest go. */
const MAX_CACHED = 100_000

/** The checks of one `mb serve` process: the connection pool, the verdict cache, the checks in flight. */
export class Verifier {
  private readonly agent: Agent
  private readonly cache = new Map<string, {verdict: Verdict; until: number}>()
  private readonly inFlight = new Map<string, Promise<Verdict>>()
  /** HEADs sent so far (for tests and metrics). */
  checks = 0

  constructor(readonly options: VerifyOptions) {
    this.agent = new Agent({connections: options.connections, keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000, connect: {timeout: options.timeoutMs}})
  }

  /** True when a redirect of `file` must be checked first (mtime in Unix seconds, `nowSeconds` UTC). */
  applies(file: {path: string; mtime: number}, nowSeconds = Date.now() / 1000): boolean {
    const o = this.options
    return (o.recentSeconds > 0 && nowSeconds - file.mtime <= o.recentSeconds) || o.pathMatch(file.path)
  }

  /**
   * Checks `candidates` in rank order until one passes, within the time budget.
   * @param path the origin path (the cache key with the mirror id)
   */
  async choose(candidates: readonly Candidate[], path: string): Promise<VerifiedChoice> {
    const started = performance.now()
    const deadline = started + this.options.budgetMs
    const failed: VerifiedChoice['failed'] = []
    for (const candidate of candidates) {
      const left = deadline - performance.now()
      const verdict = left <= 0 ? {ok: false, reason: 'budget', cached: false} : await this.check(candidate, path, Math.min(left, this.options.timeoutMs), left < this.options.timeoutMs)
      if (verdict.ok) return {chosen: candidate, failed, elapsedMs: performance.now() - started}
      failed.push({candidate, verdict})
      if (verdict.reason === 'budget') break
    }
    return {chosen: undefined, failed, elapsedMs: performance.now() - started}
  }

  /** The verdict for one candidate: cached, shared with a check in flight, or a new HEAD. */
  private check(candidate: Candidate, path: string, timeoutMs: number, budgetBound: boolean): Promise<Verdict> {
    const key = `${candidate.mirror.id}\u0000${path}`
    const now = Date.now()
    const hit = this.cache.get(key)
    if (hit !== undefined && hit.until > now) return Promise.resolve({...hit.verdict, cached: true})
    let pending = this.inFlight.get(key)
    if (pending === undefined) {
      pending = this.head(candidate.url, timeoutMs, budgetBound).then((verdict) => {
        this.inFlight.delete(key)
        // A check cut short by this request's budget says nothing about the mirror.
        if (this.options.cacheMs > 0 && verdict.reason !== 'budget') this.remember(key, verdict)
        return verdict
      })
      this.inFlight.set(key, pending)
    }
    return pending
  }

  private remember(key: string, verdict: Verdict): void {
    this.cache.delete(key)
    this.cache.set(key, {verdict, until: Date.now() + this.options.cacheMs})
    if (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value as string)
  }

  /**
   * One HEAD of `url` (RFC 9110 §9.3.2) over the pool, aborted after `timeoutMs`. Never
   * rejects. `budgetBound`: the time limit is what is left of the request's budget, so an
   * abort is reported as `budget`, not as the mirror's timeout.
   */
  private async head(url: string, timeoutMs: number, budgetBound: boolean): Promise<Verdict> {
    this.checks++
    const signal = AbortSignal.timeout(Math.max(1, Math.floor(timeoutMs)))
    try {
      const {origin} = new URL(url)
      const response = await this.agent.request({origin, path: url.slice(origin.length) || '/', method: 'HEAD', signal, headers: {'user-agent': 'mb-verify'}})
      await response.body.dump()
      const status = response.statusCode
      return {ok: !this.options.failStatus(status), reason: String(status), cached: false}
    } catch (error) {
      if (signal.aborted) return {ok: false, reason: budgetBound ? 'budget' : 'timeout', cached: false}
      const code = (error as NodeJS.ErrnoException).code
      return {ok: false, reason: `error: ${code ?? (error as Error).message}`, cached: false}
    }
  }

  /** Closes the pool (at shutdown, or when a reload replaces the settings). */
  async close(): Promise<void> {
    await this.agent.close().catch(() => {})
  }
}

/** The `X-MB-Escalated` value: each failed candidate and why, in order (`a.example 404, b.example timeout`). */
export function escalationHeader(failed: VerifiedChoice['failed']): string {
  return failed.map((f) => `${f.candidate.mirror.identifier} ${f.verdict.reason}${f.verdict.cached ? ' (cached)' : ''}`).join(', ')
}
