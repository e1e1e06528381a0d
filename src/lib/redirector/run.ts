/**
 * The composition root of `mb serve`: the one place that creates its parts and owns the
 * order in which they start and stop. The command (src/commands/serve.ts) only maps flags
 * to the configuration and calls {@link runServe}.
 *
 * Start: the database (opened and shared here unless one is given), with `database_read_url`
 * the standby the snapshot is read from (everything else, counts included, goes to the
 * primary), the snapshot keeper, GeoIP, the metrics, the download statistics (collector,
 * flusher, retention job) and the access log, the HTTP server with its routes, redirect-header
 * providers and observers, its listener, the origin watch, the background probes. Every
 * observer is registered before the listener opens, so that no request goes uncounted.
 *
 * Stop (SIGINT/SIGTERM, or a failed start, for whatever was started): the probes and content checks (a round under way ends at once), the
 * listener (draining connections), the watch, the re-indexing of changed files (src/lib/origin/reindex.ts), the retention job, the last statistics flush,
 * the access log, the metrics listener, the snapshot keeper, the log, the standby, the database.
 *
 * SIGHUP reloads (./reload.ts), and GeoIP files replaced on disk are reloaded on their own;
 * with `--workers`, SIGUSR2 replaces the workers (./cluster.ts).
 */
import type {AddressInfo} from 'node:net'
import type {Logger} from 'pino'
import {createLogger} from './logger.js'
import type {Config} from '../config/index.js'
import {type Database, openDatabase} from '../db/index.js'
import {openReadReplica, replicaLag} from '../db/replica.js'
import {MbError, UsageError, errorMessage} from '../errors.js'
import {type GeoResolver, openGeo} from '../geo/geoip.js'
import {MetalinkRoutes} from '../metalink/routes.js'
import {MetalinkRedirectHeaders} from '../metalink/redirect-headers.js'
import {repoTable} from '../yum/config.js'
import {type RepomdChange, recordRepomdChanges} from '../origin/repomd.js'
import {YumRoutes} from '../yum/routes.js'
import {AptRoutes} from '../apt/routes.js'
import {StaleReindexer} from '../origin/reindex.js'
import {FormatStore} from '../metalink/formats.js'
import {zsyncMinSize} from '../metalink/formats-config.js'
import {type BackgroundProbes, startBackgroundProbes} from '../probe/background.js'
import {type BackgroundContentChecks, startBackgroundContentChecks} from '../probe/background-content.js'
import {RuleHitCounter} from '../rules/hits.js'
import {StatsCollector} from '../stats/collector.js'
import {retentionPolicy} from '../stats/config.js'
import {startClusterCounting, startStatsForwarder} from '../stats/cluster.js'
import {startDailyPrune} from '../stats/prune.js'
import {reportLastFlush, type StatsFlusher, startStatsFlusher} from '../stats/flusher.js'
import {type AccessLog, openAccessLog} from '../operator/access-log.js'
import {isWorker, releaseWorker, runPrimary, untilStopSignal, workerId} from './cluster.js'
import {checkPidFile, removePidFile, SERVE_TITLE, writePidFile, writePidFileLogged} from './pid-file.js'
import {relayRetries, retrySecretEnv, shareRetries} from './retry-share.js'
import {SnapshotKeeper} from '../serve/snapshot/keeper.js'
import {httpUrl, inheritedSocket, type ListenTarget, parseListen, primarySocket, primarySocketEnv} from '../serve/delivery/listen.js'
import {createServeMetrics, exposeToClusterPrimary, type MetricsServer, type ServeMetrics, startMetricsServer} from '../operator/metrics.js'
import {type ReloadResult, needsRestart, onReloadSignal, reloadServer, serverSettings, watchGeo} from './reload.js'
import {NetworkView, mirrorSamples} from '../operator/network.js'
import {networkRoute} from '../operator/network-page.js'
import {mirrorPageRoute} from '../operator/mirror-page.js'
import {MirrorFilesView} from '../operator/mirror-view.js'
import {duplicateLinks} from '../serve/delivery/duplicate-links.js'
import {MirrorServer} from '../serve/delivery/server.js'
import type {ServerOptions} from '../serve/delivery/settings.js'
import {type OnDemand, startOnDemand} from './demand.js'
import {CACHE_BUDGETS} from './cache-budgets.js'
import {checkRoot} from './preflight.js'
import {originRoute} from '../serve/delivery/origin-form.js'
import {BaseUrls} from '../serve/delivery/public-url.js'
import {watchOrigin} from '../serve/snapshot/watch.js'
import {syncViewOptions} from '../sync/trace.js'
import {type PushAfter, startPushAfter} from '../push/after.js'

/** What `mb serve` knows of itself besides its configuration. */
export interface ServeRuntime {
  /** mb's version: sent as `Server: mb/VERSION` and logged at start. */
  version?: string
  /** Reads the configuration again (the same file, environment and flags), for SIGHUP. @throws UsageError */
  readConfig?: () => Config
  /** The config file read (its path, or `none`), named in the `listening` line. */
  configFile?: string
}

/**
 * Runs `mb serve` until SIGINT/SIGTERM, reloading on SIGHUP. With `serve.workers` > 1 this
 * process is the node:cluster primary (src/lib/redirector/cluster.ts) and each worker runs this
 * again; otherwise it serves itself.
 * @throws UsageError/MbError as {@link startServe}, and `WORKERS_NEED_POSTGRES`
 */
export async function runServe(config: Config, runtime: ServeRuntime = {}): Promise<{url: string; stopped: boolean}> {
  if (config.serve.workers > 1 && !isWorker()) {
    if (!config.database_url)
      throw new UsageError('--workers needs PostgreSQL (MB_DATABASE_URL or --database-url): the embedded store allows one process. Drop --workers or use PostgreSQL.', 'WORKERS_NEED_POSTGRES')
    parseListen(config.serve.listen)
    // A socket from systemd (mb-serve.socket) is held here and shared with the workers: restarts keep it open.
    const socket = inheritedSocket()
    const pidFile = config.serve.pid_file
    if (pidFile) checkPidFile(pidFile)
    process.title = `${SERVE_TITLE}: primary`
    const logger = createLogger(config.log_level)
    // The workers hand their counts to the primary, which sums and writes them (src/lib/stats/cluster.ts).
    const counting = config.stats.enabled ? await startClusterCounting(config.database_url, config.stats, logger) : undefined
    // The workers' retry memories hear of each other's answers through the primary (./retry-share.ts).
    const stopRelay = relayRetries()
    await runPrimary(config.serve.workers, logger, {
      metricsListen: config.serve.metrics_listen,
      onReload: () => primaryReload(config, runtime, logger),
      // The primary's address wins over a config file changed since (flags are the same).
      workerEnv: {MB_LISTEN: config.serve.listen, ...retrySecretEnv(), ...(socket && primarySocketEnv(socket))},
      onListening: pidFile ? () => writePidFileLogged(pidFile, logger) : undefined,
    })
    if (pidFile) removePidFile(pidFile)
    stopRelay()
    await counting?.stop()
    await new Promise<void>((resolve) => logger.flush(() => resolve()))
    return {url: config.serve.listen, stopped: true}
  }
  // A worker's pid file is its primary's.
  const pidFile = isWorker() ? undefined : config.serve.pid_file
  if (pidFile) checkPidFile(pidFile)
  process.title = isWorker() ? `${SERVE_TITLE}: worker ${workerId()}` : SERVE_TITLE
  const logger = createLogger(config.log_level)
  const hup = onReloadSignal(logger)
  ignoreUpgradeSignal(logger)
  const running = await startServe(config, {logger, version: runtime.version, readConfig: runtime.readConfig, configFile: runtime.configFile})
  if (pidFile) {
    try {
      writePidFile(pidFile)
    } catch (error) {
      await running.close()
      throw error
    }
    logger.info({pidFile, pid: process.pid}, 'pid file written')
  }
  hup.attach(() => running.reload())
  await untilStopSignal()
  hup.detach()
  await running.close()
  if (pidFile) removePidFile(pidFile)
  releaseWorker()
  return {url: running.url, stopped: true}
}

/** The primary's part of a SIGHUP: it serves nothing itself, so it only says which of its own settings changed. */
function primaryReload(config: Config, runtime: ServeRuntime, logger: Logger): void {
  if (!runtime.readConfig) return
  try {
    const restart = needsRestart(config, runtime.readConfig(), ['serve.workers', 'serve.metrics_listen', 'serve.listen'])
    if (restart.length > 0) logger.warn({settings: restart}, 'reload: these changed settings take effect only after a restart of the primary')
  } catch {
    // Each worker reads the file too and logs why it cannot.
  }
}

/**
 * SIGUSR2 replaces workers (`--workers N`); a single process or a worker has none to
 * replace, and logs that instead of ending (the signal's default action).
 */
function ignoreUpgradeSignal(logger: Logger): void {
  process.on('SIGUSR2', () => {
    if (!isWorker()) logger.warn('SIGUSR2 replaces the workers of `mb serve --workers N`; this process has none. Ignored.')
  })
}

export interface RunningServer {
  server: MirrorServer
  url: string
  /** Reloads the configuration, GeoIP and the access log (what SIGHUP does, ./reload.ts). Never rejects. */
  reload(): Promise<ReloadResult>
  /** Stops every part in order (see the module doc); the same promise on every call. */
  close(): Promise<void>
}

/** What {@link startServe} has started so far: {@link stopParts} stops exactly these. */
interface Parts {
  logger: Logger
  database?: Database
  /** The database was opened here (and is closed here). */
  ownsDatabase: boolean
  /** The standby of `database_read_url`, which the snapshot is read from; opened and closed here. */
  readDatabase?: Database
  keeper?: SnapshotKeeper
  metricsServer?: MetricsServer
  stats?: Counting
  accessLog?: AccessLog
  server?: MirrorServer
  listening: boolean
  unwatch?: () => void
  unwatchGeo?: () => void
  pushAfter?: PushAfter
  probes?: BackgroundProbes
  contentChecks?: BackgroundContentChecks
  metrics?: ServeMetrics
  reindexer?: StaleReindexer
  demand?: OnDemand['demand']
  contentDemand?: OnDemand['contentDemand']
}

/**
 * Starts `mb serve` in this process (see the module doc for the order).
 * @param options.database an open database to serve from (the caller closes it); by default
 *        the configured one is opened, shared with other `mb` processes on the embedded
 *        store, and closed by `close()`
 * @param options.configFile the config file read (path or `none`), for the `listening` line
 * @throws UsageError for a missing/invalid root, listen address or GeoIP file;
 *         MbError when the database or the first snapshot cannot be read or a port is taken
 *         (nothing is left running then)
 */
export async function startServe(config: Config, options: {database?: Database; logger?: Logger; version?: string; readConfig?: () => Config; configFile?: string} = {}): Promise<RunningServer> {
  const root = checkRoot(config.root)
  if (config.serve.push_after > 0 && !config.serve.watch)
    throw new UsageError('--push-after (serve.push_after) needs --watch (serve.watch): the quiet time is measured from the changes the watch sees.', 'USAGE')
  // A socket systemd passed (mb-serve.socket) stays open while this process restarts.
  const target: ListenTarget = inheritedSocket() ?? primarySocket() ?? parseListen(config.serve.listen)
  const parts: Parts = {logger: options.logger ?? createLogger(config.log_level), ownsDatabase: options.database === undefined, listening: false}
  let closing: Promise<void> | undefined
  const close = () => (closing ??= stopParts(parts))
  try {
    const logger = parts.logger
    const database = options.database ?? (await openSharedDatabase(config))
    parts.database = database
    if (config.database_read_url) parts.readDatabase = await openReadReplica(config.database_read_url, {keepConnection: true})
    const t0 = performance.now()
    const keeper = await startKeeper(parts.readDatabase ?? database, config, logger)
    parts.keeper = keeper
    const loadSeconds = (performance.now() - t0) / 1000
    const geo = await openGeo({geoip: config.geoip, asnDb: config.asn_db})
    // What requests and scrapes read (piece hashes, repomd alternates, mirror records) comes from the standby too, when there is one.
    const reads = parts.readDatabase ?? database
    const network = new NetworkView(reads, () => keeper.current, syncViewOptions(root, config.sync))
    parts.reindexer = new StaleReindexer(database, root, logger)
    const onDemand = startOnDemand(database, config, logger)
    ;({demand: parts.demand, contentDemand: parts.contentDemand} = onDemand)
    const onIndexStale: ServerOptions['onIndexStale'] = (stale) => {
      parts.metrics?.originIndexStale()
      parts.reindexer?.request(stale.path)
    }
    const server = createServer(config, root, keeper, geo, reads, logger, options.version, {onIndexStale, ...onDemand.hooks})
    server.addRoute(networkRoute(server, network))
    const mirrorFiles = new MirrorFilesView(reads, {include: config.scan.include, exclude: config.scan.exclude})
    void mirrorFiles.warmAfterLoads(keeper)
    server.addRoute(mirrorPageRoute(server, network, mirrorFiles))
    parts.server = server
    await observe(parts, config, server, keeper, database, network)
    let address: AddressInfo
    try {
      address = await server.listen(target)
    } catch (error) {
      const where = 'fd' in target ? 'the socket systemd passed' : config.serve.listen
      throw new MbError(`Cannot listen on ${where}: ${(error as Error).message}`, {code: 'LISTEN_FAILED', cause: error})
    }
    parts.listening = true
    if (config.serve.push_after > 0) parts.pushAfter = startPushAfter(database, config, config.serve.push_after, logger)
    if (config.serve.watch)
      parts.unwatch = watchOrigin(server.indexCheck?.watch, server.root, keeper, logger, {
        onRepomdChange: (change) => recordRepomd(database, server.root, change, logger),
        onChange: parts.pushAfter?.changed,
        tracePath: config.sync.trace_path,
      })
    const url = httpUrl(address)
    logListening(logger, {url, server, database, keeper, loadSeconds, geo, config, version: options.version, configFile: options.configFile, inherited: 'fd' in target})
    if (config.serve.probe_interval > 0) parts.probes = startBackgroundProbes(database, config, {intervalSeconds: config.serve.probe_interval, logger})
    if (config.probe.content_interval_seconds > 0) parts.contentChecks = startBackgroundContentChecks(database, config, {logger})
    const reloadable = {server, logger, accessLog: parts.accessLog, config, started: config, geo, readConfig: options.readConfig}
    parts.unwatchGeo = watchGeo(reloadable) // geoipupdate's new files are used without a SIGHUP
    return {server, url, close, reload: () => reloadServer(reloadable)}
  } catch (error) {
    await close()
    throw error
  }
}

/** Records a repomd.xml version the watcher saw (src/lib/origin/repomd.ts); a failure is logged, `mb index` records it later. */
function recordRepomd(database: Database, root: string, change: RepomdChange, logger: Logger): void {
  recordRepomdChanges(database.db, root, [change]).catch((error) => logger.warn({path: change.path, err: errorMessage(error)}, 'could not record the new repomd.xml version; `mb index` will'))
}

/**
 * Opens the configured database. The embedded store is shared with other mb commands
 * (mirror disable, scan, stats) through a socket, and runs on a worker thread of this
 * process, so that its work never holds up the requests this thread answers.
 */
async function openSharedDatabase(config: Config): Promise<Database> {
  // --quiet (log level error or above): a new store is created without the line that says so.
  const quiet = ['error', 'fatal', 'silent'].includes(config.log_level)
  return openDatabase({url: config.database_url, dataDir: config.data_dir, socketGroup: config.socket_group, create: true, share: true, keepConnection: true, quiet})
}

/** Loads the first snapshot and keeps it fresh. @throws MbError `SNAPSHOT_FAILED` */
async function startKeeper(database: Database, config: Config, logger: Logger): Promise<SnapshotKeeper> {
  try {
    return await SnapshotKeeper.start(database, {logger, pollSeconds: config.serve.poll_seconds, listenPollSeconds: config.serve.listen_poll_seconds})
  } catch (error) {
    throw new MbError(`Cannot load the snapshot from ${database.location}: ${(error as Error).message}`, {code: 'SNAPSHOT_FAILED', cause: error})
  }
}

/**
 * The HTTP server with its routes (the origin form of ../serve/delivery/origin-form.ts first)
 * and redirect-header providers: `Link: rel=duplicate` alternatives (the mirrors', then the
 * origin's direct URL), then the Metalink/HTTP `Link: rel=describedby` (the meta4, then the
 * .torrent), `Digest` and the signature's `Link` (src/lib/metalink/redirect-headers.ts;
 * src/lib/metalink/routes.ts answers metalinks, hash files, mirror lists, the BitTorrent and
 * zsync files of src/lib/metalink/formats.ts, and by `Accept`: redirects say `Vary: Accept`);
 * they only read `database`. `hooks.onIndexStale` hears of indexed files found changed on disk
 * (`serve.disk_check_seconds`), `hooks.onNoMirror` of files no mirror holds and
 * `hooks.onOutsideTier` of redirects that leave the client's tier (the scans on demand), and
 * `hooks.onRetryAway` of clients' retries (the content checks on demand; ./demand.ts).
 */
function createServer(
  config: Config,
  root: string,
  keeper: SnapshotKeeper,
  geo: GeoResolver,
  database: Database,
  logger: Logger,
  version: string | undefined,
  hooks: Pick<ServerOptions, 'onIndexStale' | 'onNoMirror' | 'onOutsideTier' | 'onRetryAway'>,
): MirrorServer {
  const settings = serverSettings(config, geo)
  const disk = {indexExclude: config.index.exclude, diskCheckSeconds: config.serve.disk_check_seconds, diskCheckWatch: config.serve.disk_check_watch}
  const server = new MirrorServer({...settings, root, keeper, logger, version, ...disk, ...hooks})
  const baseUrls = new BaseUrls(config.serve.public_url, config.serve.origin_url, config.serve.origin_fallback_mirrors)
  // First: a path in the origin form is the origin's, whatever another route would make of it.
  server.addRoute(originRoute(server))
  const yum = new YumRoutes(server, {database, repos: repoTable(config.yum), alternatesDays: config.yum.alternates_days, minSize: config.select.min_size, baseUrls})
  server.addRoute(yum.route)
  server.addRoute(new AptRoutes(server, {minSize: config.select.min_size, baseUrls}).route)
  const formats = new FormatStore(database, {
    zsyncMinSize: zsyncMinSize(config.zsync),
    trackers: config.torrent.trackers,
    meta4Metaurl: config.torrent.meta4_metaurl,
    torrentCache: CACHE_BUDGETS.torrents,
    zsyncCache: CACHE_BUDGETS.zsync,
  })
  const metalink = new MetalinkRoutes(server, {database, formats, maxUrls: () => server.metalinkMaxMirrors, baseUrls, cache: CACHE_BUDGETS.documents})
  server.addRoute(metalink.route)
  server.varyOn('Accept')
  // The count is read per redirect: a reload may change `select.max_alternatives`.
  server.addRedirectHeaders(duplicateLinks(() => server.linkCount))
  server.addRedirectHeaders(new MetalinkRedirectHeaders({baseUrls: metalink.baseUrls, torrents: metalink.servesTorrents, cache: CACHE_BUDGETS.redirectHeaders}).provider)
  // A retry may reach any worker: each keys with the primary's secret and tells its siblings what it answered (./retry-share.ts).
  if (isWorker()) shareRetries(server.retries)
  return server
}

/**
 * Registers the observers of answered requests on `server`: the metrics (only with
 * `serve.metrics_listen`: without it no metric is created at all, no per-request observer
 * and no default process metrics, since nothing would read them), the download statistics
 * (`stats.enabled`) and the access log (`serve.access_log`). In a `--workers` worker the
 * metrics go to the cluster primary, which owns the listener.
 * @throws UsageError/MbError when the metrics address is bad or taken
 */
async function observe(parts: Parts, config: Config, server: MirrorServer, keeper: SnapshotKeeper, database: Database, network: NetworkView): Promise<void> {
  const logger = parts.logger
  const metricsListen = config.serve.metrics_listen
  const metrics = metricsListen
    ? createMetrics({keeper, network, statsPendingKeys: () => parts.stats?.collector.pendingKeys ?? 0, readDatabase: parts.readDatabase, demand: parts.demand, server})
    : undefined
  parts.metrics = metrics
  if (metrics && metricsListen) {
    if (isWorker()) {
      exposeToClusterPrimary(metrics.registry)
    } else {
      parts.metricsServer = await startMetricsServer({listen: metricsListen, metrics})
      logger.info({metrics: parts.metricsServer.url}, 'metrics listening')
    }
    server.addObserver(metrics.observer)
  }
  if (config.stats.enabled) {
    parts.stats = startCounting(config, database, logger, metrics)
    server.addObserver(parts.stats.collector.observer)
    server.addObserver(parts.stats.ruleHits.observer)
  }
  if (config.serve.access_log) {
    // Reopened by the reload (SIGHUP, ./reload.ts), not by a signal handler of its own.
    parts.accessLog = openAccessLog(config.serve.access_log, {reopenOnSighup: false, onError: (error) => logger.error({err: error.message}, 'access log write failed')})
    server.addObserver(parts.accessLog.observer)
  }
}

/** The metrics of this process, read from the keeper, the statistics, the standby (`readDatabase`, its lag), the scans on demand and the origin's directory watch at scrape time. */
function createMetrics(from: {keeper: SnapshotKeeper; network: NetworkView; statsPendingKeys: () => number; readDatabase?: Database; demand?: OnDemand['demand']; server: MirrorServer}): ServeMetrics {
  const {keeper, network, statsPendingKeys, readDatabase, demand, server} = from
  let refreshedAt = Date.now()
  keeper.onChange(() => {
    refreshedAt = Date.now()
  })
  return createServeMetrics({
    snapshotAgeSeconds: () => (Date.now() - refreshedAt) / 1000,
    databaseUp: () => !keeper.down,
    mirrors: () => {
      let up = 0
      let down = 0
      for (const m of keeper.current.mirrors.values()) {
        if (!m.enabled) continue
        if (m.up) up += 1
        else down += 1
      }
      return {up, down}
    },
    statsPendingKeys,
    originWatch: () => server.indexCheck?.watch?.report(),
    mirrorSamples: () => mirrorSamples(network),
    replicaLagSeconds: readDatabase && (() => replicaLag(readDatabase).then((lag) => lag.lagSeconds ?? undefined)),
    demand: demand && (() => ({...demand.counters, queued: demand.size})),
  })
}

/** Download counting (src/lib/stats): the collector, its interval flusher, the daily retention job; and the rule hits (src/lib/rules/hits.ts). */
interface Counting {
  collector: StatsCollector
  flusher: StatsFlusher
  stopPrune: () => void
  ruleHits: RuleHitCounter
  database: Database
}

/** Starts counting downloads into `database` (counts written within `stats.flush_interval_seconds`). */
function startCounting(config: Config, database: Database, logger: Logger, metrics: ServeMetrics | undefined): Counting {
  const stats = config.stats
  const collector = new StatsCollector({
    maxPendingKeys: stats.max_pending_keys,
    logger,
    onFlushFailure: () => metrics?.statsFlushFailed(),
    onLoss: (lost) => metrics?.statsLost(lost.downloads),
  })
  const flusher = isWorker() ? startStatsForwarder(collector, stats.flush_interval_seconds, {logger, database}) : startStatsFlusher(collector, database, stats.flush_interval_seconds)
  const stopPrune = startDailyPrune(database, retentionPolicy(stats), {logger})
  const ruleHits = new RuleHitCounter(logger)
  ruleHits.start(database.db, stats.flush_interval_seconds)
  return {collector, flusher, stopPrune, ruleHits, database}
}

/** The `listening` event: where (`socket: systemd` on a socket systemd passed), from which config file, what the snapshot holds, how long it took to load. */
function logListening(
  logger: Logger,
  s: {url: string; server: MirrorServer; database: Database; keeper: SnapshotKeeper; loadSeconds: number; geo: GeoResolver; config: Config; version?: string; configFile?: string; inherited: boolean},
): void {
  const snapshot = s.keeper.current
  logger.info(
    {
      url: s.url,
      socket: s.inherited ? 'systemd' : undefined,
      version: s.version,
      config: s.configFile,
      root: s.server.root,
      database: s.database.location,
      files: snapshot.files.size,
      mirrors: snapshot.mirrors.size,
      snapshotSeconds: Math.round(s.loadSeconds * 1000) / 1000,
      rssMB: Math.round(process.memoryUsage().rss / 1048576),
      geoip: s.geo.sources,
      trustedProxies: s.config.trusted_proxies,
      watch: s.config.serve.watch,
    },
    'listening',
  )
  logger.flush()
}

/**
 * Stops what `parts` holds, in the order of the module doc. A failing step is logged and
 * the rest still run.
 */
async function stopParts(parts: Parts): Promise<void> {
  const {logger, probes, contentChecks, contentDemand, server, unwatch, reindexer, demand, pushAfter, stats, accessLog, metricsServer, keeper, database} = parts
  const step = async (name: string, fn: (() => unknown) | undefined) => {
    try {
      await fn?.()
    } catch (error) {
      logger.error({err: (error as Error).message, step: name}, 'shutdown step failed')
    }
  }
  await step('probes', probes && (() => probes.stop()))
  await step('content checks', contentChecks && (() => contentChecks.stop()))
  await step('listener', server && parts.listening ? () => server.close() : undefined)
  await step('watch', unwatch)
  await step('GeoIP watch', parts.unwatchGeo)
  await step('re-index', reindexer && (() => reindexer.close()))
  await step('work on demand', () => Promise.all([demand?.stop(), contentDemand?.stop()]))
  await step('push-after', pushAfter && (() => pushAfter.stop()))
  await step('stats', stats && (() => stopCounting(stats, logger)))
  await step('access log', accessLog && (() => accessLog.close()))
  await step('metrics', metricsServer && (() => metricsServer.close()))
  await step('keeper', keeper && (() => keeper.close()))
  if (parts.listening) logger.info('stopped')
  await new Promise<void>((resolve) => logger.flush(() => resolve()))
  await step('standby', parts.readDatabase && (() => parts.readDatabase?.close()))
  if (parts.ownsDatabase) await step('database', database && (() => database.close()))
}

/** Stops the retention job and writes the last counts (reported when that fails: they are lost). */
async function stopCounting(stats: Counting, logger: Logger): Promise<void> {
  stats.stopPrune()
  const last = await stats.flusher.stop()
  if (!(await stats.ruleHits.stop(stats.database.db))) logger.error('rule hits: the last write at shutdown failed; these counts are lost')
  reportLastFlush(last, stats.collector, logger)
}
