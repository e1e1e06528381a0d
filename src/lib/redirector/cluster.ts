/**
 * `mb serve --workers N`: a node:cluster primary that forks N copies of the same command.
 * Each worker loads its own snapshot, keeps it fresh and listens on the shared port (the
 * kernel spreads connections: SCHED_NONE). The primary restarts a worker that dies, and on
 * SIGINT/SIGTERM stops them all (each drains and flushes like a single process would).
 * SIGHUP is passed on to the workers; SIGUSR2 replaces them one at a time.
 * With `--metrics-listen` the primary owns the metrics listener and answers each scrape with
 * the aggregate of every worker's metrics (src/lib/operator/metrics.ts). The workers hand their
 * download counts to the primary, which sums and writes them (src/lib/stats/cluster.ts).
 * PostgreSQL only: the embedded store allows one process.
 */
import cluster, {type Worker} from 'node:cluster'
import type {Logger} from 'pino'
import {startClusterMetricsServer} from '../operator/metrics.js'

/** Resolves at the first SIGINT or SIGTERM, then stops listening for them (graceful shutdown). */
export function untilStopSignal(): Promise<void> {
  return new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      resolve()
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
}

/** How long a new worker may take to load its snapshot and listen before a replacement gives up (ms). */
const WORKER_START_MS = 120_000

/** How long a stopping worker may take to drain and flush before it is killed (ms). */
const WORKER_STOP_MS = 15_000

/**
 * Runs the primary until SIGINT/SIGTERM; resolves when every worker has exited.
 * SIGHUP is passed on to every worker (each reloads itself, src/lib/redirector/reload.ts) after
 * `onReload` has run; SIGUSR2 replaces the workers one at a time ({@link replaceWorkers}).
 * @param count worker processes (>= 2)
 * @param options.metricsListen HOST:PORT of the aggregated metrics listener (none when absent)
 * @param options.onReload the primary's own part of a SIGHUP
 * @param options.workerEnv environment variables every worker gets on top of the primary's
 *        (run.ts pins the listen address: a worker started by a replacement must share the
 *        primary's socket even when the config file now names another)
 * @param options.onListening called once, when the first worker listens (the pid file is written then)
 * @throws UsageError/MbError when the metrics address is bad or taken (before any worker starts)
 */
export async function runPrimary(
  count: number,
  logger: Logger,
  options: {metricsListen?: string; onReload?: () => void; workerEnv?: Record<string, string>; onListening?: () => void} = {},
): Promise<void> {
  cluster.schedulingPolicy = cluster.SCHED_NONE
  const pool: WorkerPool = {stopping: false, retiring: new Set(), replacing: false, fork: () => cluster.fork(options.workerEnv)}
  // Handled from the start: the default action of both signals ends the process.
  const onHup = () => {
    options.onReload?.()
    const workers = liveWorkers()
    for (const w of workers) w.process.kill('SIGHUP')
    logger.info({workers: workers.length}, 'SIGHUP: passed to the workers')
  }
  const onUsr2 = () => void replaceWorkers(pool, logger)
  process.on('SIGHUP', onHup)
  process.on('SIGUSR2', onUsr2)
  const metrics = options.metricsListen ? await startClusterMetricsServer(options.metricsListen) : undefined
  if (metrics) logger.info({metrics: metrics.url}, 'metrics listening (aggregated over the workers)')
  if (options.onListening) cluster.once('listening', options.onListening)
  for (let i = 0; i < count; i++) pool.fork()
  logger.info({workers: count}, 'primary started workers')
  cluster.on('exit', (worker, code, signal) => {
    if (pool.stopping || pool.retiring.delete(worker)) return
    logger.warn({worker: worker.process.pid, code, signal}, 'worker died; starting another')
    setTimeout(() => {
      if (!pool.stopping) pool.fork()
    }, 1000).unref()
  })
  await untilStopSignal()
  pool.stopping = true
  await Promise.all(liveWorkers().map((w) => stopWorker(w)))
  await metrics?.close()
  logger.info('primary stopped')
  await new Promise<void>((resolve) => logger.flush(() => resolve()))
}

/** The primary's view of its workers: shutting down, being replaced, or retired on purpose. */
interface WorkerPool {
  stopping: boolean
  replacing: boolean
  /** Workers stopped by a replacement (their exit is not a death to repair). */
  retiring: Set<Worker>
  /** Starts one worker. */
  fork: () => Worker
}

/** The workers that are alive now. */
function liveWorkers(): Worker[] {
  return Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead())
}

/**
 * Sends SIGTERM (drain and flush) and resolves when the worker has exited and its IPC
 * channel has closed (so that its last messages, such as its download counts, have been
 * read); kills it after {@link WORKER_STOP_MS}.
 */
async function stopWorker(w: Worker): Promise<void> {
  const disconnected = w.isConnected() ? new Promise<void>((resolve) => w.once('disconnect', () => resolve())) : undefined
  await new Promise<void>((resolve) => {
    if (w.isDead()) return resolve()
    const force = setTimeout(() => w.process.kill('SIGKILL'), WORKER_STOP_MS)
    w.once('exit', () => {
      clearTimeout(force)
      resolve()
    })
    w.process.kill('SIGTERM')
  })
  await disconnected
}

/** Forks a worker and resolves once it listens; rejects when it exits first or takes longer than {@link WORKER_START_MS}. */
function forkListening(pool: WorkerPool): Promise<Worker> {
  const w = pool.fork()
  return new Promise<Worker>((resolve, reject) => {
    const timer = setTimeout(() => {
      w.off('exit', onExit)
      w.process.kill('SIGTERM')
      reject(new Error(`the new worker did not listen within ${WORKER_START_MS / 1000} s`))
    }, WORKER_START_MS)
    const onExit = (code: number | null, signal: string | null) => {
      clearTimeout(timer)
      // Not restarted: a worker that cannot start now would fail again every second.
      pool.retiring.add(w)
      reject(new Error(`the new worker exited (code ${code}, signal ${signal}) before it listened; see its log`))
    }
    w.once('exit', onExit)
    w.once('listening', () => {
      clearTimeout(timer)
      w.off('exit', onExit)
      resolve(w)
    })
  })
}

/**
 * SIGUSR2: replaces every worker, one at a time: fork a new one (it runs the code and reads
 * the settings now on disk), wait until it listens, then stop one old one gracefully (it
 * drains its connections and flushes its counts). The listening socket stays open
 * throughout, so no connection is refused. A new worker that fails to start ends the
 * replacement and the remaining old workers keep serving. A second SIGUSR2 during a
 * replacement is ignored.
 */
async function replaceWorkers(pool: WorkerPool, logger: Logger): Promise<void> {
  if (pool.stopping) return
  if (pool.replacing) return logger.warn('SIGUSR2: a replacement of the workers is already running; ignored')
  pool.replacing = true
  const old = liveWorkers()
  logger.info({workers: old.length}, 'SIGUSR2: replacing the workers one at a time')
  try {
    for (const w of old) {
      if (pool.stopping) return
      const fresh = await forkListening(pool)
      if (pool.stopping) return
      pool.retiring.add(w)
      await stopWorker(w)
      logger.info({old: w.process.pid, new: fresh.process.pid}, 'worker replaced')
    }
    logger.info({workers: old.length}, 'workers replaced')
  } catch (error) {
    logger.error({err: (error as Error).message}, 'worker replacement stopped; the remaining old workers keep serving')
  } finally {
    pool.replacing = false
  }
}

/** True in a process forked by {@link runPrimary}. */
export function isWorker(): boolean {
  return cluster.isWorker
}

/** This worker's number (1, 2, …; a replacement gets the next one), or 0 outside a worker. */
export function workerId(): number {
  return cluster.worker?.id ?? 0
}

/** In a worker, closes the IPC channel to the primary so the process can exit once drained. */
export function releaseWorker(): void {
  if (cluster.isWorker && process.connected) process.disconnect()
}
