/**
 * Plugs download statistics, the access log and Prometheus metrics into a running
 * `mb serve` in a few lines:
 *
 * ```ts
 * const obs = await attachObservability(running.server, {database, config, keeper: running.keeper, logger, accessLog: '-', metricsListen: '127.0.0.1:9100'})
 * ```
 *
 * Registers the observers, starts the stats flusher (counts written within `stats.flush_interval_seconds`),
 * the daily retention job, the metrics listener, and a shutdown hook on the server that
 * flushes the counts and the log and closes the listener. Without `metricsListen` no metric
 * is created at all: no per-request observer, no default process metrics (GC and event-loop
 * observers), since nothing would ever read them.
 */
import type {Config} from '../config/index.js'
import type {Database} from '../db/index.js'
import {type AccessLog, openAccessLog} from '../serve/access-log.js'
import {createServeMetrics, exposeToClusterPrimary, type MetricsServer, type ServeMetrics, startMetricsServer} from '../serve/metrics.js'
import type {RequestObserver} from '../serve/types.js'
import {StatsCollector, type StatsFlusher, type StatsLogger, startStatsFlusher} from './collector.js'
import {retentionPolicy} from './config.js'
import {startDailyPrune} from './prune.js'

/** The parts of the serve server this needs (MirrorServer fits). */
export interface ObservableServer {
  addObserver(observer: RequestObserver): void
  addShutdownHook(hook: () => void | Promise<void>): void
}

/** The parts of the snapshot keeper this reads for the metrics (SnapshotKeeper fits). */
export interface ObservableKeeper {
  current: {mirrors: Map<number, {enabled: boolean; up: boolean}>}
  down: boolean
  onChange(fn: (snapshot: any) => void): void
}

export interface ObservabilityOptions {
  database: Pick<Database, 'db'>
  config: Pick<Config, 'stats'>
  keeper?: ObservableKeeper
  logger?: StatsLogger
  /** Access log target: a file path or '-' for stdout; absent = no access log. */
  accessLog?: string
  /** HOST:PORT for `GET /metrics`; absent = no metrics listener. */
  metricsListen?: string
  /**
   * This process is a `--workers` worker: with `metricsListen` its metrics are collected by
   * the cluster primary (which owns the listener, src/lib/serve/cluster.ts) instead of being
   * served here.
   */
  clusterWorker?: boolean
  /** Overrides `stats.flush_interval_seconds`. */
  flushIntervalSeconds?: number
  /** Apply the retention policy once a day (default true). */
  prune?: boolean
}

export interface Observability {
  collector?: StatsCollector
  flusher?: StatsFlusher
  accessLog?: AccessLog
  /** Present with `metricsListen` only. */
  metrics?: ServeMetrics
  metricsServer?: MetricsServer
  /** Flushes stats and the log, stops timers and the metrics listener (also run as a shutdown hook). */
  close(): Promise<void>
}

/**
 * Wires statistics, access log and metrics into `server` (see the module doc).
 * @throws UsageError/MbError when the metrics address is bad or taken (nothing is left running then)
 */
export async function attachObservability(server: ObservableServer, options: ObservabilityOptions): Promise<Observability> {
  const stats = options.config.stats
  const keeper = options.keeper
  let refreshedAt = Date.now()
  keeper?.onChange(() => {
    refreshedAt = Date.now()
  })
  let collector: StatsCollector | undefined
  let metrics: ServeMetrics | undefined
  let metricsServer: MetricsServer | undefined
  if (options.metricsListen) {
    metrics = createServeMetrics({
      snapshotAgeSeconds: keeper ? () => (Date.now() - refreshedAt) / 1000 : undefined,
      databaseUp: keeper ? () => !keeper.down : undefined,
      mirrors: keeper
        ? () => {
            let up = 0
            let down = 0
            for (const m of keeper.current.mirrors.values()) {
              if (!m.enabled) continue
              if (m.up) up += 1
              else down += 1
            }
            return {up, down}
          }
        : undefined,
      statsPendingKeys: () => collector?.pendingKeys ?? 0,
    })
    if (options.clusterWorker) {
      exposeToClusterPrimary(metrics.registry)
    } else {
      metricsServer = await startMetricsServer({listen: options.metricsListen, metrics})
      options.logger?.info?.({metrics: metricsServer.url}, 'metrics listening')
    }
    server.addObserver(metrics.observer)
  }

  let flusher: StatsFlusher | undefined
  let stopPrune: (() => void) | undefined
  if (stats.enabled) {
    collector = new StatsCollector({
      maxPendingKeys: stats.max_pending_keys,
      logger: options.logger,
      onFlushFailure: () => metrics?.statsFlushFailed(),
      onLoss: (lost) => metrics?.statsLost(lost.downloads),
    })
    server.addObserver(collector.observer)
    flusher = startStatsFlusher(collector, options.database, options.flushIntervalSeconds ?? stats.flush_interval_seconds)
    if (options.prune !== false) stopPrune = startDailyPrune(options.database, retentionPolicy(stats), {logger: options.logger})
  }

  let accessLog: AccessLog | undefined
  if (options.accessLog) {
    accessLog = openAccessLog(options.accessLog, {onError: (error) => options.logger?.error({err: error.message}, 'access log write failed')})
    server.addObserver(accessLog.observer)
  }

  let closing: Promise<void> | undefined
  const close = () =>
    (closing ??= (async () => {
      stopPrune?.()
      const last = await flusher?.stop()
      if (last && !last.ok) options.logger?.error({retained: last.retained, err: last.error}, 'stats: the last flush at shutdown failed; these counts are lost')
      await accessLog?.close()
      await metricsServer?.close()
    })())
  server.addShutdownHook(close)
  return {collector, flusher, accessLog, metrics, metricsServer, close}
}
