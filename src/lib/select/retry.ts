/**
 * Retries and repeats keep their locality: `mb serve` remembers, for a short window, which
 * attempt it last answered for a client address and a path. The same address asking again
 * for the same file within the window (a retry after a failed download, dnf's `baseurl=`
 * retry, curl rerun, or just a repeat: a NAT, a proxy, a CI runner fetching it again) goes to
 * the next mirror of the client's TIER, cycling; never to the origin. The rule, in
 * docs/selection.md ("Retries keep their locality"):
 *
 * - the tier is the leading candidates of the ranking that share the pool (realm) of the
 *   sticky choice, among the candidates a redirect names (`select.max_alternatives`, at least
 *   {@link TIER_CANDIDATES}); a tier of one mirror widens to the next pool's candidates among
 *   them ({@link tierSize});
 * - attempt 1 is the sticky choice; attempt N goes to tier member (N - 1) mod size: the origin
 *   is not one more mirror, it delivers only when no mirror is eligible (a copy found bad by a
 *   probe, a scan or a content check is not eligible, so a tier whose copies are all bad falls
 *   out of the selection by itself);
 * - a GET without `Range`, or with a Range from byte 0, and without `If-Modified-Since` or
 *   `If-None-Match`, is a new attempt when the same address asked for the same path within
 *   `select.retry_window_seconds`; a continuation (a Range not from byte 0), a HEAD and a
 *   conditional request stay on the attempt last answered: they are answered for what they ask;
 * - a repeat cannot be told from a retry by anything the request carries, and need not be
 *   (both stay in the tier); the retry SIGNAL (`mb_mirror_retries_total`, the content check a
 *   retry asks for) is the first new attempt within a window after an answer that sent the
 *   address to a mirror, counted at most once per (address, path, window): a NAT of a
 *   thousand users counts as one retry per path and window, so no client makes a healthy
 *   mirror look bad by asking often.
 *
 * Keys are a keyed hash (HalfSipHash-1-3, Aumasson and Bernstein's SipHash for 32-bit words,
 * as Linux's `hsiphash`) of the address and path under a secret chosen at start
 * ({@link newRetrySecret}; the `--workers` primary hands its own to its workers), so that
 * nobody can compute offline which addresses collide with a victim's.
 *
 * Memory: one fixed table of `retry_memory_entries` slots (rounded up to a power of two) in
 * three `Float64Array`s, keyed by a 53-bit hash of (address, path) and probed linearly over a
 * few slots: an answer takes its own slot, an empty or expired one, else the oldest answer
 * among those it may take. So memory is fixed from the start (24 bytes a slot, no garbage),
 * the oldest answers are forgotten first, expiry needs no timer (an answer older than the
 * window reads as absent), and remembering allocates nothing.
 */
import {randomBytes} from 'node:crypto'

/**
 * A new attempt that comes at most this many whole seconds after the answer that sent the
 * address to a mirror is a bounce: the mirror redirected the client straight back to mb (a
 * redirect loop), since a download that started, and even a connection refused that a client
 * retries through mb, takes longer than the same or the next second to come back. A client
 * that repeats a download within a second (a busy NAT, wrk) looks the same and is counted too:
 * the bounce is a hint for operators (`mb_redirect_loops_total`), never a verdict on a mirror;
 * the answer is the next mirror of the tier either way.
 */
export const BOUNCE_SECONDS = 1

/** The default `select.retry_window_seconds`: 10 minutes, longer than dnf's and apt's retries take. */
export const DEFAULT_RETRY_WINDOW_SECONDS = 600

/** The largest `select.retry_window_seconds`: one day (longer would keep a NAT's rotation for days). */
export const MAX_RETRY_WINDOW_SECONDS = 86_400

/**
 * The default `select.retry_memory_entries`: 131,072 answers (3 MB). A server answering more
 * distinct (client, path) pairs than that per window forgets the oldest, whose retries then
 * start again at the sticky choice.
 */
export const DEFAULT_RETRY_MEMORY_ENTRIES = 131_072

/** The largest `select.retry_memory_entries`: 2^24 answers (384 MB allocated at start). */
export const MAX_RETRY_MEMORY_ENTRIES = 2 ** 24

/**
 * The least number of ranked candidates the tier is taken from: the candidates a redirect
 * names (`select.max_alternatives`), but at least these, so that a server sending few or no
 * `Link` alternatives still moves a retry on.
 */
export const TIER_CANDIDATES = 5

/** Attempts are counted up to this (a client that retries more starts over at attempt 1). */
export const MAX_ATTEMPT = 255
/** Value layout: seconds since the memory started × 2^24 + attempt × 2^16 + mirror id. */
const TIME_UNIT = 2 ** 24
const ATTEMPT_UNIT = 2 ** 16
/** The low part of a key (2^21): the high 32 bits pick the slot. */
const LOW = 2 ** 21
/** Slots an answer may take, from its own on. */
const PROBES = 8

/** The secret of the memory's keyed hash: two 32-bit words (HalfSipHash's 64-bit key). */
export type RetrySecret = readonly [number, number]

/** A fresh secret from the system's CSPRNG. */
export function newRetrySecret(): RetrySecret {
  const b = randomBytes(8)
  return [b.readUInt32LE(0), b.readUInt32LE(4)]
}

/** A secret as 16 hex digits (to hand to `--workers` workers). */
export function retrySecretText(secret: RetrySecret): string {
  return secret.map((w) => (w >>> 0).toString(16).padStart(8, '0')).join('')
}

/** The secret written by {@link retrySecretText}, or undefined when `text` is not 16 hex digits. */
export function parseRetrySecret(text: string | undefined): RetrySecret | undefined {
  if (text === undefined || !/^[0-9a-f]{16}$/i.test(text)) return undefined
  return [Number.parseInt(text.slice(0, 8), 16) >>> 0, Number.parseInt(text.slice(8), 16) >>> 0]
}

/**
 * The size of the client's tier among `ranked` (the candidates a redirect names, best
 * first): the leading candidates sharing the first one's realm; when that is a single mirror,
 * it and the candidates of the next realm. 0 when `ranked` is empty.
 */
export function tierSize(ranked: ReadonlyArray<{realm: string}>): number {
  const n = ranked.length
  if (n === 0) return 0
  const first = ranked[0].realm
  let size = 1
  while (size < n && ranked[size].realm === first) size++
  if (size > 1 || size === n) return size
  const next = ranked[1].realm
  while (size < n && ranked[size].realm === next) size++
  return size
}

/** The 0-based index in the tier of attempt `attempt` (1-based) in a tier of `size` (> 0) mirrors: cycling. */
export function tierIndex(attempt: number, size: number): number {
  return (attempt - 1) % size
}

/**
 * The retry rule in words, for `mb file lookup`: what a repeated request of one client
 * address does within `windowSeconds`.
 */
export function retryRule(windowSeconds: number): string {
  if (windowSeconds <= 0) return 'retries off (select.retry_window_seconds is 0): every request gets the sticky choice'
  return `the same client address asking again for this file within ${windowSeconds} s (no Range, or a Range from byte 0; not conditional) goes to the next mirror of its tier (the sticky choice's pool, widened to the next pool when it has one mirror), cycling, never to the origin; a continuation, a HEAD or a conditional request stays where it was sent (X-MB-Attempt)`
}

/* HalfSipHash state, module-level so that the rounds allocate nothing. */
let v0 = 0
let v1 = 0
let v2 = 0
let v3 = 0

function sipRound(): void {
  v0 = (v0 + v1) | 0
  v1 = (v1 << 5) | (v1 >>> 27)
  v1 ^= v0
  v0 = (v0 << 16) | (v0 >>> 16)
  v2 = (v2 + v3) | 0
  v3 = (v3 << 8) | (v3 >>> 24)
  v3 ^= v2
  v0 = (v0 + v3) | 0
  v3 = (v3 << 7) | (v3 >>> 25)
  v3 ^= v0
  v2 = (v2 + v1) | 0
  v1 = (v1 << 13) | (v1 >>> 19)
  v1 ^= v2
  v2 = (v2 << 16) | (v2 >>> 16)
}

/** One message word (32 bits): HalfSipHash's compression with one round (the "1" of 1-3). */
function compress(m: number): void {
  v3 ^= m
  sipRound()
  v0 ^= m
}

/**
 * The memory key of a client address and an origin-relative path under `secret`: a 53-bit
 * keyed hash (never 0) by HalfSipHash-1-3 with a 64-bit output (Aumasson and Bernstein,
 * "SipHash: a fast short-input PRF", 2012; the half variant as Linux's `hsiphash`), over the
 * address's length and the UTF-16 code units of both, two to a word, then their count. The
 * same on every process with the same secret, so `--workers` siblings share keys; nobody
 * without the secret can predict which pairs collide.
 */
export function retryKey(address: string, path: string, secret: RetrySecret): number {
  v0 = secret[0] | 0
  v1 = (secret[1] ^ 0xee) | 0
  v2 = (secret[0] ^ 0x6c796765) | 0
  v3 = (secret[1] ^ 0x74656462) | 0
  compress(address.length)
  let word = 0
  let half = false
  for (let i = 0; i < address.length; i++) {
    if (half) compress(word | (address.charCodeAt(i) << 16))
    else word = address.charCodeAt(i)
    half = !half
  }
  for (let i = 0; i < path.length; i++) {
    if (half) compress(word | (path.charCodeAt(i) << 16))
    else word = path.charCodeAt(i)
    half = !half
  }
  if (half) compress(word)
  compress(address.length + path.length)
  v2 ^= 0xee
  sipRound()
  sipRound()
  sipRound()
  const high = (v1 ^ v3) >>> 0
  v1 ^= 0xdd
  sipRound()
  sipRound()
  sipRound()
  const key = high * LOW + (((v1 ^ v3) >>> 0) >>> 11)
  return key === 0 ? 1 : key
}

/**
 * True when a request's `Range` header (RFC 9110 §14.2) starts a download rather than
 * continuing one: no header, or a first range from byte 0 (`bytes=0-`, `bytes=0-1023`).
 */
export function startsDownload(range: string | undefined): boolean {
  return range === undefined || range.startsWith('bytes=0-') || range.startsWith('bytes=0,') || range === 'bytes=0'
}

/** The attempt of an answer {@link RetryMemory.recall} returned (its packed value). */
export function answerAttempt(value: number): number {
  return Math.floor((value % TIME_UNIT) / ATTEMPT_UNIT)
}

/** The mirror id (0: none) of an answer {@link RetryMemory.recall} returned. */
export function answerMirror(value: number): number {
  return value % ATTEMPT_UNIT
}

/** Slots of a table for `maxEntries` answers: a power of two, at least 16. */
function slotsFor(maxEntries: number): number {
  let slots = 16
  while (slots < maxEntries) slots *= 2
  return slots
}

/**
 * The recent answers of one server: see the module doc. Each call takes the time it happens
 * at (`nowMs`, milliseconds since the epoch; the redirect path passes the request's start,
 * so it reads no clock), else reads `now`.
 */
export class RetryMemory {
  private keys: Float64Array
  private values: Float64Array
  /** Per slot: 1 + the second (since the memory started) of the key's last retry signal; 0: none. */
  private signals: Float64Array
  private mask: number
  private readonly origin: number
  private windowSeconds: number

  /**
   * @param windowSeconds how long an answer is remembered (> 0)
   * @param maxEntries    answers held at most (rounded up to a power of two, at least 16)
   * @param now           the clock, ms since the epoch (default: `Date.now`)
   */
  constructor(
    windowSeconds: number,
    maxEntries = DEFAULT_RETRY_MEMORY_ENTRIES,
    private readonly now: () => number = Date.now,
  ) {
    this.windowSeconds = windowSeconds
    this.origin = now()
    const slots = slotsFor(maxEntries)
    this.keys = new Float64Array(slots)
    this.values = new Float64Array(slots)
    this.signals = new Float64Array(slots)
    this.mask = slots - 1
  }

  /** Applies reloaded settings; remembered answers stay unless the table's size changes. */
  configure(windowSeconds: number, maxEntries: number): void {
    this.windowSeconds = windowSeconds
    const slots = slotsFor(maxEntries)
    if (slots === this.keys.length) return
    this.keys = new Float64Array(slots)
    this.values = new Float64Array(slots)
    this.signals = new Float64Array(slots)
    this.mask = slots - 1
  }

  /** Answers held within the window now (a walk of the whole table: for tests and reports). */
  get size(): number {
    const t = this.seconds()
    let n = 0
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== 0 && t - Math.floor(this.values[i] / TIME_UNIT) < this.windowSeconds) n++
    return n
  }

  /** Whole seconds since answer `value` ({@link recall}) was given, at `nowMs` (ms since the epoch; default the clock). */
  age(value: number, nowMs?: number): number {
    return this.seconds(nowMs) - Math.floor(value / TIME_UNIT)
  }

  private seconds(nowMs: number = this.now()): number {
    return Math.floor((nowMs - this.origin) / 1000)
  }

  /** The slot holding `key`, or -1. */
  private slotOf(key: number): number {
    const keys = this.keys
    const mask = this.mask
    let i = (key / LOW) & mask
    for (let p = 0; p < PROBES; p++, i = (i + 1) & mask) if (keys[i] === key) return i
    return -1
  }

  /**
   * The answer remembered for `key` ({@link retryKey}) within the window, packed (read it
   * with {@link answerAttempt} and {@link answerMirror}), or -1.
   */
  recall(key: number, nowMs?: number): number {
    const i = this.slotOf(key)
    if (i < 0) return -1
    const value = this.values[i]
    return this.seconds(nowMs) - Math.floor(value / TIME_UNIT) < this.windowSeconds ? value : -1
  }

  /**
   * Takes the retry signal of `key` (held within the window): true, and noted, when the key
   * has given none within the window; false otherwise. So a signal counts at most once per
   * key and window, however often the address asks.
   */
  signal(key: number, nowMs?: number): boolean {
    const i = this.slotOf(key)
    if (i < 0) return false
    const t = this.seconds(nowMs)
    const last = this.signals[i]
    if (last !== 0 && t - (last - 1) < this.windowSeconds) return false
    this.signals[i] = t + 1
    return true
  }

  /**
   * Records that `key` was answered with `attempt`, sent to `mirrorId`: in its own slot
   * (keeping its retry signal), else the first empty or expired one, else the oldest of the
   * slots it may take.
   */
  remember(key: number, attempt: number, mirrorId: number, nowMs?: number): void {
    const keys = this.keys
    const values = this.values
    const mask = this.mask
    const t = this.seconds(nowMs)
    let i = (key / LOW) & mask
    let slot = -1
    let oldest = Infinity
    for (let p = 0; p < PROBES; p++, i = (i + 1) & mask) {
      if (keys[i] === key) {
        slot = i
        break
      }
      if (oldest === -Infinity) continue // a free slot is taken; only the key's own slot can still win
      const at = keys[i] === 0 ? -Infinity : Math.floor(values[i] / TIME_UNIT)
      if (at === -Infinity || t - at >= this.windowSeconds) {
        slot = i
        oldest = -Infinity
      } else if (at < oldest) {
        slot = i
        oldest = at
      }
    }
    if (keys[slot] !== key) this.signals[slot] = 0
    keys[slot] = key
    values[slot] = t * TIME_UNIT + Math.min(attempt, MAX_ATTEMPT) * ATTEMPT_UNIT + mirrorId
  }

  /**
   * Records an answer another process gave (a `--workers` sibling; ../redirector/retry-share.ts):
   * the same as {@link remember}, unless this memory already holds a later attempt for `key`;
   * `signalled` notes the retry signal the sibling took, so that it counts once across them.
   */
  merge(key: number, attempt: number, mirrorId: number, signalled = false): void {
    const known = this.recall(key)
    if (known < 0 || answerAttempt(known) <= attempt) this.remember(key, attempt, mirrorId)
    if (signalled) this.signal(key)
  }
}
