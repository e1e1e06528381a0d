/**
 * `mb serve --workers N`: a node:cluster primary that forks N copies of the same command.
 * Each worker loads its own snapshot, keeps it fresh and listens on the shared port (the
 * kernel spreads connections: SCHED_NONE). The primary restarts a worker that dies, and on
 * SIGINT/SIGTERM stops them all (each drains and flushes like a single process would).
 * With `--metrics-listen` the primary owns the metrics listener and answers each scrape with
 * the aggregate of every worker's metrics (src/lib/serve/metrics.ts).
 * PostgreSQL only: the embedded store allows one process.
 */
import cluster, {type Worker} from 'node:cluster'
import type {Logger} from 'pino'
import {startClusterMetricsServer} from './metrics.js'

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

/**
 * Runs the primary until SIGINT/SIGTERM; resolves when every worker has exited.
 * @param count worker processes (>= 2)
 * @param options.metricsListen HOST:PORT of the aggregated metrics listener (none when absent)
 * @throws UsageError/MbError when the metrics address is bad or taken (before any worker starts)
 */
export async function runPrimary(count: number, logger: Logger, options: {metricsListen?: string} = {}): Promise<void> {
  cluster.schedulingPolicy = cluster.SCHED_NONE
  const metrics = options.metricsListen ? await startClusterMetricsServer(options.metricsListen) : undefined
  if (metrics) logger.info({metrics: metrics.url}, 'metrics listening (aggregated over the workers)')
  let stopping = false
  const spawnWorker = (): Worker => cluster.fork()
  for (let i = 0; i < count; i++) spawnWorker()
  logger.info({workers: count}, 'primary started workers')
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return
    logger.warn({worker: worker.process.pid, code, signal}, 'worker died; starting another')
    setTimeout(() => {
      if (!stopping) spawnWorker()
    }, 1000).unref()
  })
  await untilStopSignal()
  stopping = true
  const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined)
  await Promise.all(
    workers.map(
      (w) =>
        new Promise<void>((resolve) => {
          if (w.isDead()) return resolve()
          const force = setTimeout(() => w.process.kill('SIGKILL'), 15_000)
          w.once('exit', () => {
            clearTimeout(force)
            resolve()
          })
          w.process.kill('SIGTERM')
        }),
    ),
  )
  await metrics?.close()
  logger.info('primary stopped')
  await new Promise<void>((resolve) => logger.flush(() => resolve()))
}

/** True in a process forked by {@link runPrimary}. */
export function isWorker(): boolean {
  return cluster.isWorker
}

/** In a worker, closes the IPC channel to the primary so the process can exit once drained. */
export function releaseWorker(): void {
  if (cluster.isWorker && process.connected) process.disconnect()
}
