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
 * Memory: two generations of a `Map` keyed by `address + ' ' + path`, swapped when the older
 * one can only hold expired answers (every window) or when the newer one is full (half of
 * `retry_memory_entries`), so at most `retry_memory_entries` answers are held, the oldest
 * are forgotten first, and nothing runs per entry (no timers). A value is one number: the
 * answer's time, attempt and mirror packed together, so remembering allocates only the key.
 */

/** What {@link RetryMemory} remembers about one (client address, path). */
export interface RetryAnswer {
  /** The attempt answered, 1-based (1 = the sticky choice). */
  attempt: number
  /** The mirror it went to, or 0 when the origin delivered. */
  mirrorId: number
}

/** The default `select.retry_window_seconds`: 10 minutes, longer than dnf's and apt's retries take. */
export const DEFAULT_RETRY_WINDOW_SECONDS = 600

/**
 * The default `select.retry_memory_entries`: 100,000 answers, about 15 MB of keys at an
 * address and an 80-byte path each. A server answering more distinct (client, path) pairs
 * than that per window forgets the oldest, whose retries then start again at rank 1.
 */
export const DEFAULT_RETRY_MEMORY_ENTRIES = 100_000

/** Attempts are counted up to this (a client that retries more stays at the origin). */
export const MAX_ATTEMPT = 255
/** Value layout: seconds since the memory started × 2^24 + attempt × 2^16 + mirror id. */
const TIME_UNIT = 2 ** 24
const ATTEMPT_UNIT = 2 ** 16

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
 * The retry rule in words, for `mb file lookup` and the docs' wording: what a repeated
 * request of one client address does within `windowSeconds`.
 */
export function retryRule(windowSeconds: number): string {
  if (windowSeconds <= 0) return 'retries off (select.retry_window_seconds is 0): every request gets rank 1'
  return `the same client address asking again for this file within ${windowSeconds} s (no Range, or a Range from byte 0) goes to the next mirror in rank order, after the last to the origin, then from rank 1 again; a continuation (Range not from byte 0) stays where it was sent (X-MB-Attempt)`
}

/** The memory key of a client address and an origin-relative path. */
export function retryKey(address: string, path: string): string {
  return `${address} ${path}`
}

/**
 * True when a request's `Range` header (RFC 9110 §14.2) starts a download rather than
 * continuing one: no header, or a first range from byte 0 (`bytes=0-`, `bytes=0-1023`).
 */
export function startsDownload(range: string | undefined): boolean {
  return range === undefined || range.startsWith('bytes=0-') || range.startsWith('bytes=0,') || range === 'bytes=0'
}

/**
 * The recent answers of one server: see the module doc. Times are read from `now`
 * (milliseconds since the epoch) on every call, so tests drive the clock.
 */
export class RetryMemory {
  private current = new Map<string, number>()
  private previous = new Map<string, number>()
  /** Start of `current`'s generation, in seconds since {@link origin}. */
  private generationStart = 0
  private readonly origin: number
  private windowSeconds: number
  private maxEntries: number

  /**
   * @param windowSeconds how long an answer is remembered (> 0)
   * @param maxEntries    answers held at most (>= 2), oldest forgotten first
   * @param now           the clock, ms since the epoch (default: `Date.now`)
   */
  constructor(
    windowSeconds: number,
    maxEntries = DEFAULT_RETRY_MEMORY_ENTRIES,
    private readonly now: () => number = Date.now,
  ) {
    this.windowSeconds = windowSeconds
    this.maxEntries = Math.max(2, maxEntries)
    this.origin = now()
  }

  /** Applies reloaded settings; remembered answers stay (and now expire by the new window). */
  configure(windowSeconds: number, maxEntries: number): void {
    this.windowSeconds = windowSeconds
    this.maxEntries = Math.max(2, maxEntries)
  }

  /** Answers held now (both generations; some may have expired). */
  get size(): number {
    return this.current.size + this.previous.size
  }

  private seconds(): number {
    return Math.floor((this.now() - this.origin) / 1000)
  }

  /** The answer remembered for `key` within the window, or undefined. */
  recall(key: string): RetryAnswer | undefined {
    const value = this.current.get(key) ?? this.previous.get(key)
    if (value === undefined) return undefined
    const at = Math.floor(value / TIME_UNIT)
    if (this.seconds() - at >= this.windowSeconds) return undefined
    const rest = value - at * TIME_UNIT
    return {attempt: Math.floor(rest / ATTEMPT_UNIT), mirrorId: rest % ATTEMPT_UNIT}
  }

  /**
   * Records that `key` was answered with `attempt`, sent to `mirrorId` (0: the origin).
   * Swaps generations first when the older one has only expired answers left or the newer
   * one is full.
   */
  remember(key: string, attempt: number, mirrorId: number): void {
    const t = this.seconds()
    this.rotate(t)
    this.current.set(key, t * TIME_UNIT + Math.min(attempt, MAX_ATTEMPT) * ATTEMPT_UNIT + mirrorId)
  }

  /**
   * Records an answer another process gave (a `--workers` sibling; ./serve/retry-share.ts):
   * the same as {@link remember}, unless this memory already holds a later attempt for `key`.
   */
  merge(key: string, attempt: number, mirrorId: number): void {
    const known = this.recall(key)
    if (known !== undefined && known.attempt > attempt) return
    this.remember(key, attempt, mirrorId)
  }

  private rotate(t: number): void {
    if (t - this.generationStart >= this.windowSeconds || this.current.size >= this.maxEntries / 2) {
      // `previous` only held answers older than one window, or `current` is full: forget
      // the oldest generation at once.
      this.previous = this.current
      this.current = new Map()
      this.generationStart = t
    }
  }
}
