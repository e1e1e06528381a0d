/**
 * Content checks on demand: a client that retried away from a mirror for a path (the retry
 * memory of `mb serve`, src/lib/serve/delivery/server.ts, `onRetryAway`) is evidence about
 * that mirror's copy, so the copy is checked at once ({@link checkCopy}: the piece found
 * corrupt before when there is one, else the whole copy). A corrupt copy leaves the file's
 * mirror set in the check's transaction, and every list (redirects, metalinks, torrents,
 * `mirrors.txt`, repo metalinks) leaves it out at the snapshot's next refresh.
 *
 * The queue is bounded as scans on demand are (src/lib/scan/demand.ts):
 * - a per-copy cooldown ({@link COOLDOWN_SECONDS}): a copy is checked on demand at most once
 *   in it, in this process (a Map, so that a stream of retries costs a lookup each) and across
 *   the replicas sharing the database (the claim on `content_check_demand`, which also
 *   deduplicates the replicas' checks of one copy);
 * - one check running at a time per process ({@link JOBS}), and at most {@link MAX_PENDING}
 *   waiting;
 * - a per-mirror budget of checks per hour (`probe.content_demand_mirror_budget`, counted in
 *   `content_check_demand_run`).
 */
import {errorMessage} from '../errors.js'

/** Seconds before the same copy may be checked on demand again. */
const COOLDOWN_SECONDS = 600
/** Copies waiting at most; further retries are dropped (and counted) until the queue drains. */
const MAX_PENDING = 1000
/** Checks running at a time in one process. */
const JOBS = 2
/** Copies remembered in the in-process cooldown before expired ones are swept. */
const SWEEP_AT = 10_000

/** The database side of the queue (./content-demand-store.ts); an interface so that tests can count. */
export interface ContentDemandStore {
  /** Takes the copy of `path` on mirror `mirrorId` for a check unless a claim younger than `cooldownSeconds` exists; false when not taken (or `path` is not indexed). */
  claim(mirrorId: number, path: string, cooldownSeconds: number): Promise<boolean>
  /** Takes one check from the mirror's budget of `budget` per hour; false when spent. */
  spend(mirrorId: number, path: string, budget: number): Promise<boolean>
}

/** What a check found, as much as the queue logs and counts. */
export interface DemandCheckResult {
  marked_bad: number
  cleared: number
  checks: Array<{verdict: string}>
}

/**
 * Checks the copy of `path` on mirror `mirrorId` and records the verdict; undefined when there
 * was nothing to check. `signal` aborts at stop: a check it cuts short records nothing.
 */
export type CopyChecker = (mirrorId: number, path: string, signal: AbortSignal) => Promise<DemandCheckResult | undefined>

/** Logs one line per check (pino-like). */
export interface ContentDemandLogger {
  info(fields: object, message: string): void
  warn(fields: object, message: string): void
}

/** What the queue did since it started (`/metrics` may show them). */
export interface ContentDemandCounters {
  requests: number
  cooledDown: number
  dropped: number
  deduplicated: number
  overBudget: number
  checks: number
  corrupt: number
}

/** The queue of one `mb serve` process. */
export class ContentDemandQueue {
  readonly counters: ContentDemandCounters = {requests: 0, cooledDown: 0, dropped: 0, deduplicated: 0, overBudget: 0, checks: 0, corrupt: 0}
  private readonly pending = new Map<string, {mirrorId: number; path: string}>()
  private readonly notBefore = new Map<string, number>()
  private readonly runs = new Set<Promise<void>>()
  private stopped = false
  // Aborted at stop: a check under way (a whole copy, minutes of reading) ends at once.
  private readonly stopping = new AbortController()
  private readonly now: () => number

  /**
   * @param settings.mirrorBudget  checks per mirror and hour (`probe.content_demand_mirror_budget`)
   * @param options.now     clock, Unix ms (tests)
   */
  constructor(
    private readonly store: ContentDemandStore,
    private readonly check: CopyChecker,
    private readonly settings: {mirrorBudget: number},
    private readonly options: {now?: () => number; logger?: ContentDemandLogger} = {},
  ) {
    this.now = options.now ?? Date.now
  }

  /**
   * Hears of a client's retry away from mirror `mirrorId` for the indexed file `path`. Cheap
   * and synchronous: the check runs later, and the request is answered as it would be without.
   */
  request(path: string, mirrorId: number): void {
    this.counters.requests++
    const key = `${mirrorId}:${path}`
    if (this.pending.has(key)) return
    const now = this.now()
    const until = this.notBefore.get(key)
    if (until !== undefined && now < until) {
      this.counters.cooledDown++
      return
    }
    if (this.pending.size >= MAX_PENDING || this.stopped) {
      this.counters.dropped++
      return
    }
    if (this.notBefore.size >= SWEEP_AT) for (const [k, t] of this.notBefore) if (t <= now) this.notBefore.delete(k)
    this.notBefore.set(key, now + COOLDOWN_SECONDS * 1000)
    this.pending.set(key, {mirrorId, path})
    this.pump()
  }

  /** Copies waiting plus checks running. */
  get size(): number {
    return this.pending.size + this.runs.size
  }

  /** Resolves when no copy waits and no check runs. */
  async idle(): Promise<void> {
    while (this.runs.size > 0) await Promise.allSettled([...this.runs])
  }

  /** Drops the waiting copies, ends the checks under way (recording nothing of them) and waits for them. */
  async stop(): Promise<void> {
    this.stopped = true
    this.pending.clear()
    this.stopping.abort()
    await this.idle()
  }

  private pump(): void {
    while (this.runs.size < JOBS && this.pending.size > 0) {
      const [key, job] = this.pending.entries().next().value as [string, {mirrorId: number; path: string}]
      this.pending.delete(key)
      const run: Promise<void> = this.run(job.mirrorId, job.path)
        .catch((error) => this.options.logger?.warn({mirror_id: job.mirrorId, path: job.path, err: errorMessage(error)}, `content check on demand of ${job.path} failed: ${errorMessage(error)}`))
        .finally(() => {
          this.runs.delete(run)
          this.pump()
        })
      this.runs.add(run)
    }
  }

  /** Claims the copy, spends one check of the mirror's budget, and checks it. */
  private async run(mirrorId: number, path: string): Promise<void> {
    if (this.stopped) return
    if (!(await this.store.claim(mirrorId, path, COOLDOWN_SECONDS))) {
      this.counters.deduplicated++
      return
    }
    if (!(await this.store.spend(mirrorId, path, this.settings.mirrorBudget))) {
      this.counters.overBudget++
      return
    }
    const result = await this.check(mirrorId, path, this.stopping.signal)
    if (result === undefined || this.stopping.signal.aborted) return
    this.counters.checks++
    this.counters.corrupt += result.marked_bad
    const verdicts = result.checks.map((c) => c.verdict).join(', ') || 'nothing read'
    const log = result.marked_bad > 0 ? this.options.logger?.warn : this.options.logger?.info
    log?.call(
      this.options.logger,
      {mirror_id: mirrorId, path, verdicts, marked_bad: result.marked_bad, cleared: result.cleared},
      `content check on demand (a client retried away) of ${path}: ${verdicts}`,
    )
  }
}
