/**
 * Keeps a {@link Snapshot} fresh: `LISTEN mb_change` for prompt updates (the NOTIFY of
 * docs/change-tracking.md), plus polling as the safety net: every `listenPollSeconds` while
 * notifications are delivered, every `pollSeconds` while they are not. A read-only standby
 * (`database_read_url`) delivers no NOTIFY, and its `listen` registers nothing: there
 * polling alone keeps the snapshot fresh. A poll that finds nothing changed is one statement
 * (./marks.ts); a refresh a notification asked for goes without it. A dropped LISTEN
 * connection is met with a refresh at once, and one follows every (re)connection, for the
 * notifications that went nowhere meanwhile.
 * When the database goes away the last snapshot keeps serving; the outage is logged once,
 * refreshes retry with exponential backoff (1 s doubling up to 30 s), and recovery is logged.
 */
import type {Logger} from 'pino'
import type {Database, Subscription} from '../../db/index.js'
import {errorMessage} from '../../errors.js'
import {collectGarbage} from './heap.js'
import {type Snapshot, loadSnapshot, refreshSnapshot} from './snapshot.js'

export interface KeeperOptions {
  /** Poll interval in seconds while notifications are not delivered (default 2). */
  pollSeconds?: number
  /** Poll interval in seconds while they are (default 30). */
  listenPollSeconds?: number
  logger?: Logger
  /** Replaced-row count that triggers a full reload to reclaim mirror-set slots (default: max(100k, files/2)). */
  reloadAfterChurn?: number
}

/** Owns the live snapshot. `current` is always a complete snapshot. */
export class SnapshotKeeper {
  current: Snapshot
  /** True while the database is unreachable. */
  down = false
  private timer?: NodeJS.Timeout
  private running = false
  private again = false
  /** A notification arrived since the last refresh began: the next one skips its poll. */
  private notified = false
  private closed = false
  private backoffMs = 0
  private subscription?: Subscription
  private readonly pollMs: number
  private readonly listenPollMs: number
  private readonly listeners: Array<(snapshot: Snapshot) => void> = []

  private constructor(
    private readonly database: Database,
    initial: Snapshot,
    private readonly options: KeeperOptions,
  ) {
    this.current = initial
    this.pollMs = (options.pollSeconds ?? 2) * 1000
    this.listenPollMs = (options.listenPollSeconds ?? 30) * 1000
  }

  /** Milliseconds to the next poll: long while notifications arrive, short while they cannot. */
  private get nextPollMs(): number {
    return this.subscription?.listening ? this.listenPollMs : this.pollMs
  }

  /**
   * Loads the first snapshot (this one must succeed) and starts listening and polling.
   * @throws the driver's error when the first load fails
   */
  static async start(database: Database, options: KeeperOptions = {}): Promise<SnapshotKeeper> {
    const initial = await loadSnapshot(database)
    const keeper = new SnapshotKeeper(database, initial, options)
    keeper.compactHeap('snapshot loaded') // the rows parsed during the load (./heap.ts)
    keeper.subscription = await database.listen(
      'mb_change',
      () => {
        keeper.notified = true
        keeper.trigger()
      },
      () => keeper.trigger(),
    )
    // What was committed between the load and the LISTEN notified no one.
    keeper.schedule(20)
    return keeper
  }

  /** Compacts the heap after a full load and logs `message` with the files, the pause (s) and the heap before and after (MB). */
  private compactHeap(message: string): void {
    const collection = collectGarbage()
    const mb = (bytes: number) => Math.round(bytes / 2 ** 20)
    this.options.logger?.info(
      {files: this.current.files.size, gcPauseSeconds: Number(collection.pauseSeconds.toFixed(3)), heapMB: mb(collection.heapBytesBefore), heapAfterMB: mb(collection.heapBytesAfter)},
      message,
    )
  }

  /** Called after every successful refresh or reload. */
  onChange(fn: (snapshot: Snapshot) => void): void {
    this.listeners.push(fn)
  }

  /** Asks for a refresh as soon as possible (coalesced with a running one). */
  trigger(): void {
    if (this.closed) return
    if (this.running) {
      this.again = true
      return
    }
    if (this.down) return // the backoff timer decides
    this.schedule(20)
  }

  private schedule(ms: number): void {
    if (this.closed) return
    clearTimeout(this.timer)
    this.timer = setTimeout(() => void this.tick(), ms)
    this.timer.unref()
  }

  private async tick(): Promise<void> {
    if (this.closed || this.running) return
    this.running = true
    this.again = false
    const notified = this.notified
    this.notified = false
    const log = this.options.logger
    try {
      const snapshot = this.current
      const limit = this.options.reloadAfterChurn ?? Math.max(100_000, snapshot.files.size / 2)
      if (snapshot.churn > limit) {
        this.current = await loadSnapshot(this.database)
        this.compactHeap('snapshot reloaded') // the rows parsed and the snapshot replaced (./heap.ts)
      } else {
        const result = await refreshSnapshot(this.database, snapshot, {notified})
        if (result.reload) {
          this.current = await loadSnapshot(this.database)
          this.compactHeap('snapshot reloaded (large change set)')
        } else if (result.updated > 0 || result.deleted > 0) log?.debug(result, 'snapshot refreshed')
      }
      if (this.down) {
        this.down = false
        log?.info({files: this.current.files.size, mirrors: this.current.mirrors.size}, 'database reachable again; snapshot refreshed')
      }
      this.backoffMs = 0
      for (const fn of this.listeners) fn(this.current)
      const listened = this.subscription?.listening
      await this.subscription?.renew()
      if (!listened && this.subscription?.listening) this.again = true // changes while it was down notified no one
    } catch (error) {
      if (!this.down) {
        this.down = true
        log?.warn({err: errorMessage(error)}, 'database unavailable; serving from the last snapshot and retrying')
      }
      this.backoffMs = Math.min(this.backoffMs ? this.backoffMs * 2 : 1000, 30_000)
    } finally {
      this.running = false
    }
    if (this.closed) return
    if (this.down) this.schedule(this.backoffMs)
    else this.schedule(this.again ? 20 : this.nextPollMs)
  }

  /** Stops polling and listening. Does not close the database. */
  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await this.subscription?.close().catch(() => {})
    // Let a refresh in flight finish before the caller closes the database.
    for (let i = 0; i < 100 && this.running; i++) await new Promise((r) => setTimeout(r, 50))
  }
}
