/**
 * Rounds on a timer inside `mb serve`, under a named lock: background probing and background
 * content checks. With several replicas on one PostgreSQL database only one runs a round at
 * a time: a replica that finds the lock held skips its round. Rounds never overlap, the timer
 * does not keep the process alive, and a failed round is logged, never thrown.
 */
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
  /** Stops the timer and waits for a round under way. */
  stop(): Promise<void>
}

/**
 * Starts running `round` every `intervalSeconds` (seconds between the end of one round and the
 * start of the next) under `lock`.
 *
 * @param options.what      the round's name in log lines (`probe`, `content check`)
 * @param options.firstNow  run the first round at once (else one interval after the start)
 */
export function startLockedRounds<T>(
  database: Pick<Database, 'withLock'>,
  lock: Lock,
  round: () => Promise<T>,
  options: {intervalSeconds: number; what: string; firstNow: boolean; logger?: ProbeLogger},
): LockedRounds<T> {
  const {logger, what} = options
  let timer: NodeJS.Timeout | undefined
  let running: Promise<T | null> | undefined
  let stopped = false

  function runOnce(): Promise<T | null> {
    if (running) return running
    running = database
      .withLock(lock, round, () => {
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

  function schedule(): void {
    if (stopped) return
    timer = setTimeout(() => {
      void runOnce().finally(schedule)
    }, options.intervalSeconds * 1000)
    timer.unref?.()
  }

  if (options.firstNow) void runOnce().finally(schedule)
  else schedule()
  return {
    runOnce,
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      await running
    },
  }
}
