/**
 * Rounds on a timer inside `mb serve`, under a named lock: background probing and background
 * content checks. With several replicas on one PostgreSQL database only one runs a round at
 * a time: a replica that finds the lock held skips its round. Rounds never overlap, the timer
 * does not keep the process alive, and a failed round is logged, never thrown.
 */
import {setMaxListeners} from 'node:events'
import type {Database} from '../db/index.js'
import type {Lock} from '../db/named-locks.js'

/** The logging calls used (pino-compatible). */
export interface ProbeLogger {
  info(obj: object, msg?: string): void
  warn(obj: object, msg?: string): void
  error(obj: object, msg?: string): void
}

/** A running series of rounds. */
export interface LockedRounds<T> {
  /** Runs one round now (or joins the one under way); resolves to its result, or null when skipped or failed. */
  runOnce(): Promise<T | null>
  /** Stops the timer, aborts the signal a round under way was given, and waits for that round to end. */
  stop(): Promise<void>
}

/** When the first round runs: `now`, one `interval` after the start, or when `due`. */
export type FirstRound = 'now' | 'interval' | 'due'

/**
 * Seconds until a round is due whose last one (any process's, `background_round` under
 * `name`) finished at `finishedAt`: 0 when it never ran or is an interval old or older.
 */
export function secondsUntilDue(finishedAt: Date | undefined, intervalSeconds: number, now = Date.now()): number {
  if (!finishedAt) return 0
  return Math.max(0, Math.min(intervalSeconds, intervalSeconds - (now - finishedAt.getTime()) / 1000))
}

/** When the last round under `name` finished, if one did. */
async function lastFinished(database: Pick<Database, 'db'>, name: string): Promise<Date | undefined> {
  const row = await database.db.selectFrom('background_round').select('finished_at').where('name', '=', name).executeTakeFirst()
  return row?.finished_at
}

/** Records that a round under `name` finished now. */
async function recordFinished(database: Pick<Database, 'db'>, name: string): Promise<void> {
  await database.db
    .insertInto('background_round')
    .values({name, finished_at: new Date()})
    .onConflict((oc) => oc.column('name').doUpdateSet({finished_at: new Date()}))
    .execute()
}

/**
 * Starts running `round` every `intervalSeconds` (seconds between the end of one round and the
 * start of the next) under `lock`.
 *
 * @param options.what   the round's name in log lines (`probe`, `content check`)
 * @param options.first  `now`: the first round at once; `interval`: one interval after the
 *                       start; `due`: when the last round under the lock's name, of any
 *                       process sharing the database, is an interval old (at once if none ran
 *                       or the time cannot be read), and every finished round is recorded
 *                       (`background_round`), so that restarts and replicas add no rounds
 * @param options.counts  with `due`: whether a finished round is recorded as the last one
 *                        (default: every round); one that did nothing (no mirror to check
 *                        yet) leaves the next start free to run one at once
 */
export function startLockedRounds<T>(
  database: Pick<Database, 'withLock' | 'db'>,
  lock: Lock,
  round: (signal: AbortSignal) => Promise<T>,
  options: {intervalSeconds: number; what: string; first: FirstRound; counts?: (result: T) => boolean; logger?: ProbeLogger},
): LockedRounds<T> {
  const {logger, what} = options
  let timer: NodeJS.Timeout | undefined
  let running: Promise<T | null> | undefined
  let stopped = false
  // Aborted at stop: a round's network work ends at once instead of after its timeouts, so
  // that `mb serve` stops (and lets its port go) in moments. Every client of a round listens.
  const stopping = new AbortController()
  setMaxListeners(0, stopping.signal)

  function runOnce(): Promise<T | null> {
    if (running) return running
    const {signal} = stopping
    const work =
      options.first === 'due'
        ? async () => {
            const result = await round(signal)
            // A round cut short by the stop is not the last one: the next start runs one.
            if (!signal.aborted && (options.counts?.(result) ?? true)) await recordFinished(database, lock.name)
            return result
          }
        : () => round(signal)
    running = database
      .withLock(lock, work, () => {
        logger?.info({lock: lock.name}, `${what} round skipped: another replica holds the lock`)
        return null
      })
      .catch((error) => {
        logger?.error({err: error}, `${what} round failed: ${(error as Error).message}`)
        return null
      })
      .finally(() => {
        running = undefined
      })
    return running
  }

  function schedule(seconds = options.intervalSeconds): void {
    if (stopped) return
    timer = setTimeout(() => {
      void runOnce().finally(() => schedule())
    }, seconds * 1000)
    timer.unref?.()
  }

  if (options.first === 'now') void runOnce().finally(() => schedule())
  else if (options.first === 'interval') schedule()
  else
    void lastFinished(database, lock.name).then(
      (finishedAt) => schedule(secondsUntilDue(finishedAt, options.intervalSeconds)),
      (error) => {
        logger?.warn({err: error}, `${what}: when the last round finished could not be read (${(error as Error).message}); running one now`)
        schedule(0)
      },
    )
  return {
    runOnce,
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      stopping.abort()
      await running
    },
  }
}
