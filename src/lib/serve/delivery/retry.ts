/**
 * Retries and repeats on the redirect path of `mb serve` (the rule: src/lib/select/retry.ts
 * and docs/selection.md, "Retries keep their locality"): which attempt a request is, whether
 * it is the retry signal of its window, and the selection that attempt gets. A thin layer
 * over {@link RetryMemory} so that the server's hot path reads one call.
 *
 * With `--workers N` every worker's answers are shared with its siblings through the cluster
 * primary (../../redirector/retry-share.ts), and the primary hands every worker its secret, so a
 * retry moves on whichever worker takes it and signals once across them.
 */
import {answerAttempt, answerMirror, BOUNCE_SECONDS, MAX_ATTEMPT, newRetrySecret, RetryMemory, type RetrySecret, retryKey, startsDownload, tierIndex, tierSize} from '../../select/retry.js'
import type {SelectOptions} from '../../select/options.js'
import type {Selection} from '../../select/types.js'
import type {FileEntry} from '../snapshot/file-entry.js'
import type {ResolvedClient} from './client-address.js'
import {clientKey} from './connections.js'
import type {RequestContext} from './route.js'

/** One request's place in its client's retries. */
export interface RetryStep {
  /** The memory key of the client address and path ({@link retryKey}). */
  key: number
  /** 1-based: 1 is the sticky choice, N the N-th member of the client's tier, cycling. */
  attempt: number
  /** The request starts a download (GET without Range or with a Range from byte 0, not conditional): it is remembered. */
  advance: boolean
  /**
   * The mirror this request retries away from when it is the retry signal of its (address,
   * path, window): the first new attempt after an answer that went to a mirror; 0 otherwise.
   */
  retriedFrom: number
  /** The mirror that sent the client straight back (a new attempt within {@link BOUNCE_SECONDS} of the answer that went there: a redirect loop); 0 otherwise. */
  bouncedFrom: number
  /** When the request came, ms since the epoch (undefined: the memory reads its clock). */
  nowMs: number | undefined
}

/** Header values of `X-MB-Attempt` made once, not per request. */
const ATTEMPT_TEXT = Array.from({length: MAX_ATTEMPT + 1}, (_, i) => String(i))

/** The `X-MB-Attempt` value of an attempt. */
export function attemptText(attempt: number): string {
  return ATTEMPT_TEXT[attempt] ?? String(attempt)
}

/** A callback told of every answer remembered (the `--workers` sharing sends it on); `signalled`: the step took its window's retry signal. */
export type RetryListener = (key: number, attempt: number, mirrorId: number, signalled: boolean) => void

/**
 * The retry memory of one server, following reloads of `select.retry_window_seconds` (0
 * turns it off and forgets everything) and `select.retry_memory_entries`. Its keys are
 * hashed under `secret` (default: a fresh one; the `--workers` primary's for a worker).
 */
export class Retries {
  private memory: RetryMemory | undefined
  private listener: RetryListener | undefined
  private key: RetrySecret
  private options!: Pick<SelectOptions, 'retryWindowSeconds' | 'retryMemoryEntries'>

  constructor(
    options: Pick<SelectOptions, 'retryWindowSeconds' | 'retryMemoryEntries'>,
    private readonly now: () => number = Date.now,
    secret?: RetrySecret,
  ) {
    this.key = secret ?? newRetrySecret()
    this.configure(options)
  }

  /** The secret the keys are hashed under. */
  get secret(): RetrySecret {
    return this.key
  }

  /**
   * Hashes keys under `secret` from now on (a `--workers` worker takes its primary's, before
   * it answers: ../../redirector/retry-share.ts); what was remembered under the old one is forgotten.
   */
  adoptSecret(secret: RetrySecret): void {
    this.key = secret
    if (this.memory !== undefined) this.memory = new RetryMemory(this.options.retryWindowSeconds, this.options.retryMemoryEntries, this.now)
  }

  /** Applies (re)loaded settings. */
  configure(options: Pick<SelectOptions, 'retryWindowSeconds' | 'retryMemoryEntries'>): void {
    this.options = options
    if (options.retryWindowSeconds <= 0) this.memory = undefined
    else if (this.memory === undefined) this.memory = new RetryMemory(options.retryWindowSeconds, options.retryMemoryEntries, this.now)
    else this.memory.configure(options.retryWindowSeconds, options.retryMemoryEntries)
  }

  /** True when retries are on (`select.retry_window_seconds` > 0). */
  get enabled(): boolean {
    return this.memory !== undefined
  }

  /** Tells `listener` of every answer remembered from now on (one listener). */
  onRemember(listener: RetryListener): void {
    this.listener = listener
  }

  /**
   * The step of a request for `path` from client address `ip`, or undefined when retries
   * are off. `method` and `range` (the `Range` header) decide whether it advances, and a
   * `conditional` request (`If-Modified-Since` or `If-None-Match`: a cache revalidating its
   * copy, RFC 9110 §13.1) never does; `nowMs` is when the request came (ms since the epoch;
   * default: the clock).
   */
  step(ip: string, path: string, method: string | undefined, range: string | undefined, nowMs?: number, conditional = false): RetryStep | undefined {
    const memory = this.memory
    if (memory === undefined) return undefined
    const key = retryKey(ip, path, this.key)
    const advance = method === 'GET' && !conditional && startsDownload(range)
    const last = memory.recall(key, nowMs)
    if (last < 0) return {key, attempt: 1, advance, retriedFrom: 0, bouncedFrom: 0, nowMs}
    const previous = answerAttempt(last)
    if (!advance) return {key, attempt: previous, advance, retriedFrom: 0, bouncedFrom: 0, nowMs}
    const from = answerMirror(last)
    const retriedFrom = from !== 0 && memory.signal(key, nowMs) ? from : 0
    const bouncedFrom = from !== 0 && memory.age(last, nowMs) <= BOUNCE_SECONDS ? from : 0
    return {key, attempt: previous >= MAX_ATTEMPT ? 1 : previous + 1, advance, retriedFrom, bouncedFrom, nowMs}
  }

  /** Records the answer of a step that advances: the attempt and the mirror it went to. */
  answered(step: RetryStep, mirrorId: number): void {
    if (!step.advance || this.memory === undefined) return
    this.memory.remember(step.key, step.attempt, mirrorId, step.nowMs)
    this.listener?.(step.key, step.attempt, mirrorId, step.retriedFrom !== 0)
  }

  /** Records an answer a sibling worker gave (unless this memory knows a later attempt), with the retry signal it took. */
  merge(key: number, attempt: number, mirrorId: number, signalled = false): void {
    this.memory?.merge(key, attempt, mirrorId, signalled)
  }
}

/**
 * The selection attempt `attempt` gets from the ranked `selection` (at least one candidate;
 * see {@link tierSize} and {@link tierIndex}): itself for the tier's first member, else the
 * ranking rotated so that the attempt's member of the tier comes first, the tier's members
 * after it next, and those before it last (the mirrors just tried end the alternatives).
 */
export function selectionForAttempt(selection: Selection, attempt: number): Selection {
  const ranked = selection.ranked
  const size = tierSize(ranked)
  const index = size === 0 ? 0 : tierIndex(attempt, size)
  if (index === 0) return selection
  const rotated = ranked.slice(index, size).concat(ranked.slice(size), ranked.slice(0, index))
  return {...selection, ranked: rotated, realm: rotated[0].realm}
}

/**
 * The retry step of a download of `file` by `client`, noted on `ctx` for the request's
 * record: its attempt, the mirror it retries away from when it is its window's retry
 * signal, and the mirror that bounced it straight back (a redirect loop, answered like any
 * retry by the next mirror of the tier, and counted and logged by the server). The client is its IPv4 address, or its IPv6 /64 (./connections.ts, `clientKey`): the
 * temporary addresses of one IPv6 host are one client, for its retries and its retry signal.
 */
export function retryStep(retries: Retries, ctx: RequestContext, client: ResolvedClient, file: FileEntry): RetryStep | undefined {
  const req = ctx.req
  const headers = req.headers
  const conditional = headers['if-modified-since'] !== undefined || headers['if-none-match'] !== undefined
  const who = client.address !== undefined && client.address.kind() === 'ipv6' ? clientKey(client.address, client.ip) : client.ip
  const step = retries.step(who, file.path, req.method, headers.range, ctx.startedMs, conditional)
  if (step === undefined) return undefined
  ctx.attempt = step.attempt
  if (step.retriedFrom !== 0) ctx.retriedFrom = ctx.snapshot.mirrors.byId[step.retriedFrom]?.identifier
  if (step.bouncedFrom !== 0) ctx.bouncedFrom = ctx.snapshot.mirrors.byId[step.bouncedFrom]?.identifier
  return step
}
