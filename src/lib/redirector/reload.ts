/**
 * SIGHUP for `mb serve`: reload without a restart and without dropping a request.
 *
 * What a reload does, in this order (each step on its own: one that fails is logged and the
 * others still run):
 * 1. reads the configuration again (the same file, environment and flags as at start);
 *    a file that no longer parses or validates keeps the running settings;
 * 2. opens the GeoIP and ASN databases again from disk (the configured paths, or the
 *    bundled ones), so files replaced by geoipupdate take effect; when one is missing or
 *    corrupt, the databases in use are kept;
 * 3. applies the reloadable settings to the server ({@link RELOADABLE}: the selection, the
 *    trusted proxies, `?country=`, the connection limits, the log level): requests in flight
 *    finish with the settings they started with;
 * 4. reopens the access log (logrotate's `postrotate`);
 * 5. logs the settings that only a restart applies ({@link needsRestart}) whose value in the
 *    file now differs from the one the process runs with.
 *
 * Besides SIGHUP, the GeoIP and ASN files in use are watched ({@link watchGeo}): when
 * geoipupdate replaces one, step 2 runs on its own. Reloads of one server never overlap.
 */
import type {Logger} from 'pino'
import type {Config} from '../config/index.js'
import {errorMessage} from '../errors.js'
import {type GeoResolver, openGeo} from '../geo/geoip.js'
import {watchFiles} from '../geo/watch.js'
import {compileSelectOptions} from '../select/options.js'
import {syncSelectOptions} from '../sync/trace.js'
import {compileVerifyOptions} from '../verify/verifier.js'
import type {AccessLog} from '../operator/access-log.js'
import {CountryQueryTrust, TrustedProxies} from '../serve/delivery/client-address.js'
import {defaultMaxConnections, openFileLimit} from '../serve/delivery/connections.js'
import type {MirrorServer} from '../serve/delivery/server.js'
import type {ConnectionSettings, ServerSettings} from '../serve/delivery/settings.js'

/** Settings (dotted config keys, or a section) that a reload applies to a running server. */
export const RELOADABLE = [
  'select',
  'sync.max_lag_seconds',
  'trusted_proxies',
  'geoip',
  'asn_db',
  'log_level',
  'serve.country_query',
  'serve.country_query_clients',
  'serve.allow_broad_trusted_proxies',
  'serve.max_connections',
  'serve.max_connections_per_client',
  'serve.header_timeout',
  'serve.keep_alive_timeout',
  'serve.origin_budget',
] as const

/**
 * Settings that `mb serve` reads only at start; a reload that finds one changed logs it.
 * Of the `scan:` section, `mb serve` reads the scans on demand (`scan.demand*`, with the time
 * budgets and globs their scans use) and `--push-after` its include/exclude, all at start.
 */
export const RESTART_ONLY = [
  'database_url',
  'database_read_url',
  'data_dir',
  'root',
  'serve.listen',
  'serve.workers',
  'serve.watch',
  'serve.poll_seconds',
  'serve.listen_poll_seconds',
  'serve.access_log',
  'serve.pid_file',
  'serve.metrics_listen',
  'serve.probe_interval',
  'serve.public_url',
  'serve.origin_url',
  'serve.origin_fallback_mirrors',
  'serve.disk_check_seconds',
  'serve.disk_check_watch',
  'serve.push_after',
  'serve.mirror_only',
  'sync.trace_path',
  'sync.margin_seconds',
  'sync.lag_warning_seconds',
  'sync.lag_critical_seconds',
  'scan.demand',
  'scan.demand_cooldown_seconds',
  'scan.demand_jobs',
  'scan.demand_mirror_budget',
  'stats',
  'probe',
  'push',
  'index',
  'torrent',
  'zsync',
  'yum',
] as const

/** The value at a dotted key of the configuration. */
function valueAt(config: Config, key: string): unknown {
  let node: unknown = config
  for (const part of key.split('.')) node = node === null || typeof node !== 'object' ? undefined : (node as Record<string, unknown>)[part]
  return node
}

/** The restart-only settings (dotted keys) whose value differs between `running` and `next`. */
export function needsRestart(running: Config, next: Config, keys: readonly string[] = RESTART_ONLY): string[] {
  return keys.filter((key) => JSON.stringify(valueAt(running, key)) !== JSON.stringify(valueAt(next, key)))
}

/** The connection settings of a configuration (`serve.max_connections` unset: half the open-file limit). */
function connectionSettings(config: Config): ConnectionSettings {
  const s = config.serve
  return {
    maxConnections: s.max_connections ?? defaultMaxConnections(openFileLimit()),
    maxConnectionsPerClient: s.max_connections_per_client,
    headerTimeoutSeconds: s.header_timeout,
    keepAliveTimeoutSeconds: s.keep_alive_timeout,
  }
}

/** What a reload works on: the parts of a running `mb serve` it may change. */
export interface Reloadable {
  server: MirrorServer
  logger: Logger
  accessLog?: AccessLog
  /** The configuration in effect (replaced by a successful reload). */
  config: Config
  /**
   * The configuration the process started with: the restart-only settings it runs with (the
   * address it listens on, its database), never replaced by a reload. A reload compares the
   * file with these, so that a change reverted before a restart is no longer reported.
   */
  readonly started: Config
  /** The GeoIP databases in use (replaced by a successful reload). */
  geo: GeoResolver
  /** Reads the configuration again; absent: the running one is kept. @throws UsageError on a bad file */
  readConfig?: () => Config
}

/** What a reload did, for the log line and for tests. */
export interface ReloadResult {
  /** The configuration was read again and applied. */
  config: boolean
  /** The GeoIP/ASN databases were opened again and are in use. */
  geo: boolean
  /** Changed settings that need a restart (dotted keys). */
  restart: string[]
}

/** Reads the configuration again, or keeps the running one (logged) when it is bad. */
function readNext(target: Reloadable): Config | undefined {
  if (!target.readConfig) return undefined
  try {
    return target.readConfig()
  } catch (error) {
    target.logger.error({err: errorMessage(error)}, 'reload: the configuration cannot be read; the running settings stay in effect')
    return undefined
  }
}

/** Opens the location and ASN databases of `config` again, or keeps those in use (logged). */
async function reopenGeo(target: Reloadable, config: Config): Promise<GeoResolver | undefined> {
  try {
    return await openGeo({geoip: config.geoip, asnDb: config.asn_db})
  } catch (error) {
    target.logger.error({err: errorMessage(error), kept: target.geo.sources}, 'reload: a GeoIP/ASN database cannot be opened; the databases in use are kept')
    return undefined
  }
}

/** The last reload of each server, so that the next one waits for it. */
const reloads = new WeakMap<Reloadable, Promise<unknown>>()
/** Per server watching its GeoIP files ({@link watchGeo}): follows the files a reload put in use. */
const geoFollowers = new WeakMap<Reloadable, () => void>()

/** Runs `work` after every reload of `target` begun before it. */
function serially<T>(target: Reloadable, work: () => Promise<T>): Promise<T> {
  const next = (reloads.get(target) ?? Promise.resolve()).then(work)
  reloads.set(
    target,
    next.catch(() => {}),
  )
  return next
}

/**
 * Reloads a running server (see the module doc). Never throws: what cannot be reloaded is
 * logged and the running state kept. Updates `target.config` and `target.geo`.
 */
export function reloadServer(target: Reloadable): Promise<ReloadResult> {
  return serially(target, () => reloadNow(target))
}

async function reloadNow(target: Reloadable): Promise<ReloadResult> {
  const next = readNext(target)
  // The databases of the new file, or of the running configuration when it cannot be read.
  const geo = await reopenGeo(target, next ?? target.config)
  if (geo) target.geo = geo
  const restart = next ? needsRestart(target.started, next) : []
  let applied = false
  try {
    target.server.reconfigure(serverSettings(next ?? target.config, target.geo))
    if (next) {
      target.logger.level = next.log_level
      target.config = next
      applied = true
    }
  } catch (error) {
    // reconfigure() may have applied part of the new settings before it threw: put the running ones back, so the log line is true.
    const kept = restoreSettings(target)
    target.logger.error(
      {err: errorMessage(error)},
      kept
        ? 'reload: the new settings cannot be applied; the running settings stay in effect'
        : 'reload: the new settings cannot be applied, and the running ones could not be restored: restart mb serve',
    )
  }
  if (geo) geoFollowers.get(target)?.()
  return finishReload(target, {config: applied, geo: geo !== undefined, restart})
}

/** Applies the running configuration again (after a reconfigure that failed half-way). @returns false when that fails too */
function restoreSettings(target: Reloadable): boolean {
  try {
    target.server.reconfigure(serverSettings(target.config, target.geo))
    return true
  } catch {
    return false
  }
}

/**
 * Opens the GeoIP and ASN databases of the running configuration again and puts them in use:
 * each lookup sees the old databases or the new ones, never a mix (the server's settings
 * are replaced in one step). A missing or broken file keeps the databases in use (logged).
 * Never throws.
 * @returns whether the new databases are in use
 */
function reloadGeo(target: Reloadable): Promise<boolean> {
  return serially(target, async () => {
    const geo = await reopenGeo(target, target.config)
    if (!geo) return false
    target.geo = geo
    try {
      target.server.reconfigure(serverSettings(target.config, geo))
    } catch (error) {
      target.logger.error({err: errorMessage(error)}, 'GeoIP reload: the settings cannot be applied; the databases in use are kept')
      return false
    }
    target.logger.info({geoip: geo.sources, databases: geo.databases.map((d) => ({type: d.type, built: d.buildDate.toISOString()}))}, 'GeoIP databases reloaded: a file changed on disk')
    return true
  })
}

/**
 * Watches the GeoIP and ASN files that `target` uses (./geo/watch.ts: their directories, for
 * geoipupdate's rename) and reloads them ({@link reloadGeo}) once changes settle. After a
 * reload that put other files in use (a SIGHUP with new `geoip:` paths), those are watched.
 * @returns a function that stops watching
 */
export function watchGeo(target: Reloadable): () => void {
  let watched = ''
  let stop: (() => void) | undefined
  const follow = () => {
    const key = target.geo.sources.join('\0')
    if (key === watched) return
    stop?.()
    watched = key
    stop = watchFiles(
      target.geo.sources,
      () => void reloadGeo(target).then(follow),
      (error, directory) => target.logger.warn({err: error.message, directory}, 'watching the GeoIP files failed; SIGHUP still reloads them'),
    )
  }
  follow()
  geoFollowers.set(target, follow)
  return () => {
    geoFollowers.delete(target)
    stop?.()
  }
}

/** The reloadable settings of `config` with the databases `geo`, for {@link MirrorServer.reconfigure}. */
export function serverSettings(config: Config, geo: GeoResolver): ServerSettings {
  // A new options object on every call: the snapshot's MirrorTable caches the compiled
  // request rules per options object, so the new settings take effect on the next request.
  const selectOptions = compileSelectOptions(config.select, syncSelectOptions(config.root, config.sync))
  const trustedProxies = new TrustedProxies(config.trusted_proxies)
  return {
    selectOptions,
    trustedProxies,
    geo,
    linkCount: selectOptions.maxAlternatives,
    countryQuery: config.serve.country_query === 'trusted' ? new CountryQueryTrust(trustedProxies, config.serve.country_query_clients) : undefined,
    connections: connectionSettings(config),
    verify: compileVerifyOptions(config.select),
    originBudget: {totalBytesPerSecond: config.serve.origin_budget.bytes_per_second, networkBytesPerSecond: config.serve.origin_budget.network_bytes_per_second},
  }
}

/** Reopens the access log and logs what the reload did. */
function finishReload(target: Reloadable, result: ReloadResult): ReloadResult {
  try {
    target.accessLog?.reopen()
  } catch (error) {
    target.logger.error({err: errorMessage(error)}, 'reload: the access log cannot be reopened')
  }
  if (result.restart.length > 0) target.logger.warn({settings: result.restart}, 'reload: these changed settings take effect only after a restart')
  target.logger.info({config: result.config, geoip: target.geo.sources, geoReloaded: result.geo}, 'reloaded')
  return result
}

/**
 * Handles SIGHUP for as long as the process serves: from the call on (before the server is
 * up, a SIGHUP is remembered and the reload runs once `attach` is called), so that a SIGHUP
 * never ends `mb serve`. Reloads never overlap: one that arrives during a reload runs after
 * it. After `detach` (shutdown), a SIGHUP is logged and ignored.
 * @returns `attach(reload)` to start reloading, `detach()` to stop reloading
 */
export function onReloadSignal(logger: Logger): {attach(reload: () => Promise<unknown>): void; detach(): void} {
  let reload: (() => Promise<unknown>) | undefined
  let stopped = false
  let pending = false
  let running = false
  const run = async () => {
    if (!reload) return
    running = true
    try {
      while (pending) {
        pending = false
        await reload().catch((error) => logger.error({err: errorMessage(error)}, 'reload failed'))
      }
    } finally {
      running = false
    }
  }
  const onHup = () => {
    if (stopped) return logger.info('SIGHUP during shutdown: ignored')
    logger.info('SIGHUP: reloading')
    pending = true
    if (!running) void run()
  }
  process.on('SIGHUP', onHup)
  return {
    attach(fn) {
      reload = fn
      if (pending && !running) void run()
    },
    detach() {
      stopped = true
      reload = undefined
    },
  }
}
