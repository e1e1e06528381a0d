/**
 * Retries reach another mirror: `mb serve` remembers, for a short window, which attempt it
 * last answered for a client address and a path, so that the same client asking again for
 * the same file (a retry after a failed download: dnf's librepo, curl --retry, a browser's
 * second click) goes to the next mirror in rank order instead of the sticky one, and after
 * the last ranked mirror to the origin. The rule, in docs/selection.md ("Retries"):
 *
 * - attempt 1 is the sticky choice (rank 1); attempt N goes to rank N; the attempt after the
 *   last ranked mirror is delivered by the origin (which always delivers), and the next one
 *   starts over at rank 1 (many users behind one NAT address fetching the same file are so
 *   spread over the mirrors, the origin taking one share);
 * - a GET without `Range`, or with a Range from byte 0, is a new attempt when the same client
 *   address asked for the same path within `select.retry_window_seconds`;
 * - a continuation (a Range not from byte 0) and a HEAD stay on the attempt last answered:
 *   the pieces of one download come from one mirror;
 * - the key is the client's own address, not its network: other clients of the same network
 *   keep the sticky choice.
 *
 * Memory: one fixed table of `retry_memory_entries` slots (rounded up to a power of two) in
 * two `Float64Array`s, keyed by a 53-bit hash of (address, path) and probed linearly over a
 * few slots: an answer takes its own slot, an empty or expired one, else the oldest answer
 * among those it may take. So memory is fixed from the start (16 bytes a slot, no garbage),
 * the oldest answers are forgotten first, expiry needs no timer (an answer older than the
 * window reads as absent), and remembering allocates nothing. Two (address, path) pairs with
 * the same 53-bit hash would share an answer: with 10^5 answers held, about one chance in a
 * million per window.
 */

/** The default `select.retry_window_seconds`: 10 minutes, longer than dnf's and apt's retries take. */
export const DEFAULT_RETRY_WINDOW_SECONDS = 600

/**
 * The default `select.retry_memory_entries`: 131,072 answers (2 MB). A server answering more
 * distinct (client, path) pairs than that per window forgets the oldest, whose retries then
 * start again at rank 1.
 */
export const DEFAULT_RETRY_MEMORY_ENTRIES = 131_072

/** Attempts are counted up to this (a client that retries more starts over at rank 1). */
export const MAX_ATTEMPT = 255
/** Value layout: seconds since the memory started × 2^24 + attempt × 2^16 + mirror id. */
const TIME_UNIT = 2 ** 24
const ATTEMPT_UNIT = 2 ** 16
/** The low part of a key (2^21): the high 32 bits pick the slot. */
const LOW = 2 ** 21
/** Slots an answer may take, from its own on. */
const PROBES = 8

/**
 * The 0-based rank attempt `attempt` goes to among `count` ranked mirrors, or -1 for the
 * origin: attempts walk the ranking, then reach the origin, then start over (so that many
 * clients behind one address, fetching the same file, spread over the mirrors and the
 * origin takes one share). `count` must hold every eligible mirror when `attempt` exceeds it
 * (`mb serve` ranks `attempt` + alternatives candidates, so a shorter ranking is complete).
 */
export function rankOfAttempt(attempt: number, count: number): number {
  if (attempt <= count) return attempt - 1
  const position = (attempt - 1) % (count + 1)
  return position === count ? -1 : position
}

/**
 * The retry rule in words, for `mb file lookup`: what a repeated request of one client
 * address does within `windowSeconds`.
 */
export function retryRule(windowSeconds: number): string {
  if (windowSeconds <= 0) return 'retries off (select.retry_window_seconds is 0): every request gets rank 1'
  return `the same client address asking again for this file within ${windowSeconds} s (no Range, or a Range from byte 0) goes to the next mirror in rank order, after the last to the origin, then from rank 1 again; a continuation (Range not from byte 0) stays where it was sent (X-MB-Attempt)`
}

/**
 * The memory key of a client address and an origin-relative path: a 53-bit hash (never 0)
 * of their UTF-16 code units with a space between, from two 32-bit FNV-1a-style mixes with
 * different multipliers (the second finished with MurmurHash3's mixing), computed without
 * building the joined string. The same on every process, so `--workers` siblings share keys.
 */
export function retryKey(address: string, path: string): number {
  let a = 0x811c9dc5
  let b = 0x9747b28c
  for (let i = 0; i < address.length; i++) {
    const c = address.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
  }
  a = Math.imul(a ^ 0x20, 0x01000193)
  b = Math.imul(b ^ 0x20, 0x5bd1e995)
  for (let i = 0; i < path.length; i++) {
    const c = path.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x5bd1e995)
  }
  b ^= b >>> 15
  b = Math.imul(b, 0x2c1b3c6d)
  b ^= b >>> 12
  const key = (a >>> 0) * LOW + (b >>> 11)
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

/** The mirror id (0: the origin) of an answer {@link RetryMemory.recall} returned. */
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
    this.mask = slots - 1
  }

  /** Applies reloaded settings; remembered answers stay unless the table's size changes. */
  configure(windowSeconds: number, maxEntries: number): void {
    this.windowSeconds = windowSeconds
    const slots = slotsFor(maxEntries)
    if (slots === this.keys.length) return
    this.keys = new Float64Array(slots)
    this.values = new Float64Array(slots)
    this.mask = slots - 1
  }

  /** Answers held within the window now (a walk of the whole table: for tests and reports). */
  get size(): number {
    const t = this.seconds()
    let n = 0
    for (let i = 0; i < this.keys.length; i++) if (this.keys[i] !== 0 && t - Math.floor(this.values[i] / TIME_UNIT) < this.windowSeconds) n++
    return n
  }

  private seconds(nowMs: number = this.now()): number {
    return Math.floor((nowMs - this.origin) / 1000)
  }

  /**
   * The answer remembered for `key` ({@link retryKey}) within the window, packed (read it
   * with {@link answerAttempt} and {@link answerMirror}), or -1.
   */
  recall(key: number, nowMs?: number): number {
    const keys = this.keys
    const mask = this.mask
    let i = (key / LOW) & mask
    for (let p = 0; p < PROBES; p++, i = (i + 1) & mask) {
      if (keys[i] !== key) continue
      const value = this.values[i]
      return this.seconds(nowMs) - Math.floor(value / TIME_UNIT) < this.windowSeconds ? value : -1
    }
    return -1
  }

  /**
   * Records that `key` was answered with `attempt`, sent to `mirrorId` (0: the origin): in
   * its own slot, else the first empty or expired one, else the oldest of the slots it may
   * take.
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
    keys[slot] = key
    values[slot] = t * TIME_UNIT + Math.min(attempt, MAX_ATTEMPT) * ATTEMPT_UNIT + mirrorId
  }

  /**
   * Records an answer another process gave (a `--workers` sibling; ../redirector/retry-share.ts):
   * the same as {@link remember}, unless this memory already holds a later attempt for `key`.
   */
  merge(key: number, attempt: number, mirrorId: number): void {
    const known = this.recall(key)
    if (known >= 0 && answerAttempt(known) > attempt) return
    this.remember(key, attempt, mirrorId)
  }
}
