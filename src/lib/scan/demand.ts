/**
 * Scans on demand (MirrorCache's answer to new files): a request for an indexed file that no
 * eligible mirror holds queues a scan of that file's folder, ONE directory and not its
 * subfolders, on the enabled mirrors that could hold it. The scans are the same as
 * `mb scan NAME --dir DIR --no-recursive` ({@link scanMirror} with `recursive: false`): the
 * same listers and reconcile, restricted to the folder. The request that triggered it is
 * answered at once; the copies found reach the snapshot at its next refresh.
 *
 * The queue is bounded three ways (the `scan.demand_*` settings):
 * - a per-folder cooldown: a folder is scanned at most once in `demand_cooldown_seconds`, in
 *   this process (a Map, so that a stream of misses costs a lookup each) and across the
 *   replicas sharing the database (the claim on `demand_scan`, {@link DemandStore.claim}, which
 *   also deduplicates the replicas' scans of one folder);
 * - a cap on the folder scans running at a time (`demand_jobs`), each scanning at most
 *   {@link MIRRORS_AT_ONCE} mirrors at once, and on the folders waiting ({@link MAX_PENDING});
 * - a per-mirror budget of scans per hour (`demand_mirror_budget`, counted in the database).
 *
 * A folder for which no mirror qualifies (none has synced since the file appeared, by its
 * trace) is tried again after {@link NO_CANDIDATE_RETRY_SECONDS} rather than the whole
 * cooldown, so that the first mirror to sync is scanned soon.
 *
 * The budget cannot be drained by one client asking for old files no mirror holds:
 * - a folder counts as wanted when a file asked for in it was indexed within
 *   {@link RECENT_SECONDS} (a release), or when {@link MANY_NETWORKS} client networks asked
 *   for it; any other folder may spend only the first half of a mirror's hourly budget
 *   ({@link junkBudget}), so the other half is always there for a release;
 * - a mirror scan refused because another scan of that mirror holds its lock waits behind it
 *   (polled every {@link BUSY_WAIT_MS}, at most {@link BUSY_TRIES} times) instead of failing;
 *   the slot it took from the budget is given back while it waits;
 * - a scan that fails, or still finds the mirror busy, gives its slot back, and its folder may
 *   be asked for again after {@link NO_CANDIDATE_RETRY_SECONDS} instead of the cooldown.
 */
import {setTimeout as sleep} from 'node:timers/promises'
import pLimit from 'p-limit'
import type {MirrorRow} from '../db/schema.js'
import {errorMessage} from '../errors.js'
import {pathFilter} from '../glob.js'
import {folderOf} from '../text.js'
import {planScope} from './reconcile.js'
import type {ScanMirrorResult} from './scan.js'

/** Folders waiting at most; further misses are dropped (and counted) until the queue drains. */
const MAX_PENDING = 1000
/** Mirrors one folder scan lists at once. */
const MIRRORS_AT_ONCE = 4
/** Seconds before a folder whose run found no mirror to scan may be tried again (or the cooldown, when shorter). */
export const NO_CANDIDATE_RETRY_SECONDS = 60
/** Folders remembered in the in-process cooldown before expired ones are swept. */
const SWEEP_AT = 10_000
/** A file indexed this recently (seconds) makes its folder wanted: a release, not an old file no mirror carries. */
const RECENT_SECONDS = 86_400
/** Client networks asking for one folder that make it wanted, however old its files. */
const MANY_NETWORKS = 3
/** Milliseconds between tries of a mirror whose scan lock another scan holds. */
const BUSY_WAIT_MS = 5_000
/** Tries of a busy mirror before its folder scan gives up (about ten minutes at {@link BUSY_WAIT_MS}). */
const BUSY_TRIES = 120

/**
 * The share of `budget` (scans per mirror and hour) that folders no one especially wants may
 * spend: half, rounded down, at least one scan when the budget allows two.
 */
function junkBudget(budget: number): number {
  return budget >= 2 ? Math.floor(budget / 2) : budget
}

/** One mirror scan taken from a mirror's hourly budget ({@link DemandStore.spend}). */
export interface DemandTicket {
  /** The run's row (`demand_scan_run.id`). */
  id: number
  mirrorId: number
}

/** The database side of the queue (./demand-store.ts); an interface so that the unit tests can count. */
export interface DemandStore {
  /** Takes `folder` for a run unless a claim younger than `cooldownSeconds` exists; true when taken. */
  claim(folder: string, cooldownSeconds: number): Promise<boolean>
  /** Lets the folder be claimed again `retrySeconds` from now instead of after the cooldown. */
  release(folder: string, cooldownSeconds: number, retrySeconds: number): Promise<void>
  /**
   * The enabled mirrors with a URL to scan that lack one of `paths` (origin paths in `folder`)
   * and, with `useTraces`, whose trace, where they have one, is newer than that file's indexing.
   */
  candidates(folder: string, paths: readonly string[], useTraces: boolean): Promise<MirrorRow[]>
  /** Takes one scan of the mirror from its budget of `budget` per hour; undefined when spent. */
  spend(mirrorId: number, folder: string, budget: number): Promise<DemandTicket | undefined>
  /** Gives a slot {@link spend} took back to the mirror's budget (a scan that failed or found the mirror busy). */
  refund(ticket: DemandTicket): Promise<void>
  /** Whether one of `paths` (origin paths) was indexed within the last `seconds`. */
  changedSince(paths: readonly string[], seconds: number): Promise<boolean>
  /** Records a mirror scan's outcome: `found` copies added to mirror sets. */
  finishRun(ticket: DemandTicket, ok: boolean, found: number): Promise<void>
  /** Records a folder run: mirrors scanned, of them failed, copies found. */
  finishFolder(folder: string, run: {mirrors: number; failed: number; found: number}): Promise<void>
}

/** The `scan.demand_*` settings and what the queue reads besides. */
export interface DemandSettings {
  /** `scan.demand_cooldown_seconds` */
  cooldownSeconds: number
  /** `scan.demand_jobs`: folder scans at a time. */
  jobs: number
  /** `scan.demand_mirror_budget`: scans per mirror and hour. */
  mirrorBudget: number
  /** Sync traces are read (`sync.trace_path` set): a mirror with a trace older than the file is not scanned. */
  useTraces: boolean
  /** `scan.include` / `scan.exclude`: a mirror is scanned only for paths they let through. */
  include: string[]
  exclude: string[]
}

/** Counts since the queue started, for the metrics (`mb_demand_*`). */
export interface DemandCounters {
  /** Misses that reached the queue. */
  requests: number
  /** Misses left out: the folder was scanned (or queued) within the cooldown here, or the queue was full. */
  cooledDown: number
  dropped: number
  /** Folder runs another replica had claimed within the cooldown. */
  deduplicated: number
  /** Folder scans run, and of them those with no mirror to scan. */
  folderScans: number
  noCandidates: number
  /** Mirror scans run, failed, and left out by the hourly budget. */
  mirrorScans: number
  mirrorScansFailed: number
  overBudget: number
  /** Tries that found the mirror's scan lock held by another scan (each waited {@link BUSY_WAIT_MS}). */
  busyWaits: number
  /** Copies added to mirror sets by the scans. */
  filesFound: number
}

/** The logging calls used (pino-compatible). */
export interface DemandLogger {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
}

/** Scans one folder of one mirror (one directory, not recursive); never throws for a failed scan. */
export type FolderScanner = (mirror: MirrorRow, folder: string, signal: AbortSignal) => Promise<ScanMirrorResult>

/** A folder waiting for its run: the paths asked for, and the mirrors a `mirrors` rule allowed (undefined = any). */
interface PendingFolder {
  paths: Set<string>
  mirrors: Set<string> | undefined
}

/** One folder run's outcome so far. */
interface FolderRun {
  mirrors: number
  failed: number
  found: number
  /** A mirror scan failed or stayed busy: the folder may be asked for again soon. */
  retry: boolean
}

/** The queue of folder scans on demand of one `mb serve` process (see the module doc). */
export class DemandScanQueue {
  readonly counters: DemandCounters = {
    requests: 0,
    cooledDown: 0,
    dropped: 0,
    deduplicated: 0,
    folderScans: 0,
    noCandidates: 0,
    mirrorScans: 0,
    mirrorScansFailed: 0,
    overBudget: 0,
    busyWaits: 0,
    filesFound: 0,
  }
  /** Folder → Unix ms before which a miss in it is not queued again. */
  private readonly notBefore = new Map<string, number>()
  /** Folder → the client networks that asked for it while it was waiting, running or cooling down (up to {@link MANY_NETWORKS}). */
  private readonly askedBy = new Map<string, Set<string>>()
  private readonly pending = new Map<string, PendingFolder>()
  private readonly runs = new Set<Promise<void>>()
  private readonly controller = new AbortController()
  private readonly now: () => number

  /**
   * @param options.now        clock, Unix ms (tests)
   * @param options.logger     one line per folder run
   * @param options.busyWaitMs ms between tries of a busy mirror (default {@link BUSY_WAIT_MS}; tests)
   */
  constructor(
    private readonly store: DemandStore,
    private readonly scan: FolderScanner,
    private readonly settings: DemandSettings,
    private readonly options: {now?: () => number; logger?: DemandLogger; busyWaitMs?: number} = {},
  ) {
    this.now = options.now ?? Date.now
  }

  /**
   * Hears of a request for the indexed file `path` that no eligible mirror holds. Cheap and
   * synchronous: the scan runs later, and the request is answered as it would be without.
   * @param mirrors the identifiers a matching `mirrors` rule sends the request to (undefined: any mirror)
   * @param network the client's network (its sticky key: a /24 or /48), counted towards {@link MANY_NETWORKS}
   */
  request(path: string, mirrors?: readonly string[], network?: string): void {
    this.counters.requests++
    const folder = folderOf(path)
    if (network !== undefined) this.askedFrom(folder, network)
    const waiting = this.pending.get(folder)
    if (waiting !== undefined) {
      waiting.paths.add(path)
      waiting.mirrors = mirrors === undefined || waiting.mirrors === undefined ? undefined : new Set([...waiting.mirrors, ...mirrors])
      return
    }
    const now = this.now()
    const until = this.notBefore.get(folder)
    if (until !== undefined && now < until) {
      this.counters.cooledDown++
      return
    }
    if (this.pending.size >= MAX_PENDING || this.controller.signal.aborted) {
      this.counters.dropped++
      return
    }
    if (this.notBefore.size >= SWEEP_AT) this.sweep(now)
    this.notBefore.set(folder, now + this.settings.cooldownSeconds * 1000)
    this.pending.set(folder, {paths: new Set([path]), mirrors: mirrors === undefined ? undefined : new Set(mirrors)})
    this.pump()
  }

  /**
   * Whether a request for `path` now would be left out: its folder waits, or was scanned (or
   * queued) within the cooldown here. One map lookup: callers on the redirect path ask this
   * before they work out which mirrors to name.
   */
  cooling(path: string): boolean {
    const folder = folderOf(path)
    if (this.pending.has(folder)) return true
    const until = this.notBefore.get(folder)
    return until !== undefined && this.now() < until
  }

  /** Folders waiting plus folder scans running. */
  get size(): number {
    return this.pending.size + this.runs.size
  }

  /** Resolves when no folder waits and no scan runs. */
  async idle(): Promise<void> {
    while (this.runs.size > 0) await Promise.allSettled([...this.runs])
  }

  /** Drops the waiting folders, aborts the scans under way and waits for them. */
  async stop(): Promise<void> {
    this.pending.clear()
    this.controller.abort(new Error('mb serve is stopping'))
    await this.idle()
  }

  /** Starts waiting folders while fewer than `jobs` run. */
  private pump(): void {
    while (this.runs.size < this.settings.jobs && this.pending.size > 0) {
      const [folder, job] = this.pending.entries().next().value as [string, PendingFolder]
      this.pending.delete(folder)
      const run: Promise<void> = this.runFolder(folder, job)
        .catch((error) => this.options.logger?.warn({folder, err: errorMessage(error)}, `scan on demand of ${folder || '/'} failed: ${errorMessage(error)}`))
        .finally(() => {
          this.runs.delete(run)
          this.pump()
        })
      this.runs.add(run)
    }
  }

  /** Claims the folder, picks its mirrors, and scans each within its budget. */
  private async runFolder(folder: string, job: PendingFolder): Promise<void> {
    const {store, settings} = this
    if (!(await store.claim(folder, settings.cooldownSeconds))) {
      this.counters.deduplicated++
      return
    }
    const paths = [...job.paths]
    const mirrors = (await store.candidates(folder, paths, settings.useTraces)).filter((m) => (job.mirrors === undefined || job.mirrors.has(m.identifier)) && this.carries(m, folder, paths))
    this.counters.folderScans++
    if (mirrors.length === 0) {
      this.counters.noCandidates++
      await this.retrySoon(folder)
      return
    }
    const wanted = (this.askedBy.get(folder)?.size ?? 0) >= MANY_NETWORKS || (await store.changedSince(paths, RECENT_SECONDS))
    const budget = wanted ? settings.mirrorBudget : junkBudget(settings.mirrorBudget)
    const run: FolderRun = {mirrors: 0, failed: 0, found: 0, retry: false}
    const limit = pLimit(MIRRORS_AT_ONCE)
    await Promise.all(mirrors.map((mirror) => limit(() => this.scanMirror(mirror, folder, budget, run))))
    const counts = {mirrors: run.mirrors, failed: run.failed, found: run.found}
    await store.finishFolder(folder, counts)
    // A folder left unscanned (a failure, a busy mirror, or the junk share spent) may be asked for
    // again soon: by then more networks may want it, or the hour have room.
    if (run.retry || (run.mirrors === 0 && !wanted)) await this.retrySoon(folder)
    this.options.logger?.info({folder, ...counts}, `scan on demand of ${folder || '/'}: ${run.mirrors} mirror(s), ${run.found} copies found`)
  }

  /** Lets `folder` be asked for again after {@link NO_CANDIDATE_RETRY_SECONDS} (or the cooldown, when shorter), here and across replicas. */
  private async retrySoon(folder: string): Promise<void> {
    const retry = Math.min(NO_CANDIDATE_RETRY_SECONDS, this.settings.cooldownSeconds)
    await this.store.release(folder, this.settings.cooldownSeconds, retry)
    this.notBefore.set(folder, this.now() + retry * 1000)
  }

  /**
   * Scans one mirror's folder when `budget` (scans of the mirror per hour) allows, adding to
   * `run`; waits behind another scan of the mirror, with its slot given back meanwhile.
   */
  private async scanMirror(mirror: MirrorRow, folder: string, budget: number, run: FolderRun): Promise<void> {
    const signal = this.controller.signal
    for (let tries = 0; tries < BUSY_TRIES && !signal.aborted; tries++) {
      const ticket = await this.store.spend(mirror.id, folder, budget)
      if (ticket === undefined) {
        this.counters.overBudget++
        return
      }
      const result = await this.scan(mirror, folder, signal).catch((error): Pick<ScanMirrorResult, 'ok' | 'added' | 'error' | 'busy'> => ({ok: false, added: 0, error: errorMessage(error)}))
      if (result.busy) {
        this.counters.busyWaits++
        await this.store.refund(ticket)
        await sleep(this.options.busyWaitMs ?? BUSY_WAIT_MS, undefined, {signal}).catch(() => undefined)
        continue
      }
      run.mirrors++
      this.counters.mirrorScans++
      run.found += result.added
      this.counters.filesFound += result.added
      if (result.ok) {
        await this.store.finishRun(ticket, true, result.added)
        return
      }
      run.failed++
      run.retry = true
      this.counters.mirrorScansFailed++
      await this.store.refund(ticket)
      return
    }
    run.retry = true
  }

  /** Whether the mirror carries the folder's files directly (its base path) and one of `paths` (the include and exclude globs). */
  private carries(mirror: MirrorRow, folder: string, paths: readonly string[]): boolean {
    try {
      planScope(mirror.base_path, folder, false)
    } catch {
      return false
    }
    const filter = pathFilter([this.settings.include, mirror.include_patterns ?? []], [...this.settings.exclude, ...(mirror.exclude_patterns ?? [])])
    return paths.some(filter)
  }

  /** Notes that a client of `network` asked for a file in `folder` (up to {@link MANY_NETWORKS} networks a folder). */
  private askedFrom(folder: string, network: string): void {
    let networks = this.askedBy.get(folder)
    if (networks === undefined) {
      if (this.askedBy.size >= SWEEP_AT) this.sweep(this.now())
      networks = new Set()
      this.askedBy.set(folder, networks)
    }
    if (networks.size < MANY_NETWORKS) networks.add(network)
  }

  /** Forgets the folders whose cooldown ended, and the networks that asked for them. */
  private sweep(now: number): void {
    for (const [folder, until] of this.notBefore) {
      if (until > now) continue
      this.notBefore.delete(folder)
      this.askedBy.delete(folder)
    }
    for (const folder of this.askedBy.keys()) if (!this.notBefore.has(folder) && !this.pending.has(folder)) this.askedBy.delete(folder)
  }
}
