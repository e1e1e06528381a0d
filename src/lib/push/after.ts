/**
 * `mb serve --watch --push-after SECONDS`: once the origin tree has been quiet for that long
 * after a change (OpenTTD's balancer waits two minutes), index the origin and push it to every
 * enabled mirror with a push URL, `push.jobs` at a time (`./push.ts`).
 *
 * - Every change seen by the origin watch restarts the quiet timer, so a burst of uploads
 *   starts one push, after its last file.
 * - One round at a time in this process: changes during a round start the next round after
 *   it, once quiet again. Across processes (`--workers`, replicas on one database) the named
 *   lock PUSH_ROUND_LOCK lets one of them run the round and the others skip it, and the push
 *   lock of each mirror refuses a second push to it (`mb push` run by hand meanwhile).
 * - Indexing first makes the new files known (and drops the mirrors of changed ones), so the
 *   push sends them and the reconcile after each pass confirms them.
 */
import pLimit from 'p-limit'
import type {Logger} from 'pino'
import type {Database} from '../db/index.js'
import {PUSH_ROUND_LOCK} from '../db/named-locks.js'
import {errorMessage} from '../errors.js'
import {indexOrigin} from '../origin/index.js'
import {pushMirror} from './push.js'
import {type PushSettings, pushMirrorRows, pushOptions} from './settings.js'

/** The running scheduler. */
export interface PushAfter {
  /** Tells the scheduler the origin changed (restarts the quiet timer). */
  changed(): void
  /** Stops the timer and aborts a round under way; resolves when it has ended. */
  stop(): Promise<void>
}

/**
 * Starts the scheduler. Nothing happens until {@link PushAfter.changed} is called.
 * @param quietSeconds seconds without a change before a round starts (> 0)
 * @throws UsageError when `config.root` is not set or the push settings are inconsistent
 */
export function startPushAfter(database: Database, config: PushSettings, quietSeconds: number, logger: Logger): PushAfter {
  const options = pushOptions(config)
  const controller = new AbortController()
  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let pending = false
  const arm = () => {
    clearTimeout(timer)
    timer = setTimeout(fire, quietSeconds * 1000)
  }
  const fire = () => {
    timer = undefined
    if (running) {
      pending = true
      return
    }
    const once = () => round(database, config, options, controller.signal, logger)
    const skipped = () => logger.info('push-after: another process runs this round; skipped')
    running = database
      .withLock(PUSH_ROUND_LOCK, once, skipped)
      .catch((error) => logger.error({err: errorMessage(error)}, 'push-after: round failed'))
      .finally(() => {
        running = undefined
        if (pending && !controller.signal.aborted) {
          pending = false
          arm()
        }
      })
  }
  return {
    changed() {
      if (controller.signal.aborted) return
      if (running) pending = true
      else arm()
    },
    async stop() {
      clearTimeout(timer)
      controller.abort(new Error('mb serve is stopping'))
      await running
    },
  }
}

/** One round: index the origin, then push to every push mirror. Logs, never throws. */
async function round(database: Database, config: PushSettings, options: ReturnType<typeof pushOptions>, signal: AbortSignal, logger: Logger): Promise<void> {
  try {
    const indexed = await indexOrigin(database.db, options.root, {
      tracePath: config.sync.trace_path,
      minRatio: config.index.min_ratio,
      exclude: config.index.exclude,
      mirrorOnly: config.serve?.mirror_only,
    })
    logger.info({added: indexed.added, changed: indexed.changed, removed: indexed.removed}, 'push-after: origin quiet; indexed it')
    const mirrors = await pushMirrorRows(database)
    logger.info({mirrors: mirrors.map((m) => m.identifier)}, 'push-after: push started')
    const limit = pLimit(config.push.jobs)
    await Promise.all(
      mirrors.map((mirror) =>
        limit(async () => {
          if (signal.aborted) return
          const result = await pushMirror(database, mirror, {
            ...options,
            signal,
            onPass: (name, pass) => logger.info({mirror: name, pass: pass.pass, ok: pass.ok, files: pass.files, matched: pass.matched, error: pass.error}, 'push pass done'),
          })
          if (result.ok) logger.info({mirror: result.mirror, files: result.files, matched: result.matched, seconds: result.seconds}, 'push done')
          else logger.warn({mirror: result.mirror, err: result.error, seconds: result.seconds}, 'push failed')
        }),
      ),
    )
  } catch (error) {
    logger.error({err: errorMessage(error)}, 'push-after: round failed')
  }
}
