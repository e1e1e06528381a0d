/**
 * Assembles `mb serve`: logger, database snapshot, GeoIP, selection options and the HTTP
 * server, with graceful shutdown. The command (src/commands/serve.ts) only maps flags.
 */
import {existsSync, statSync} from 'node:fs'
import {pino, type Logger} from 'pino'
import type {Config} from '../config/index.js'
import type {Database} from '../db/index.js'
import {MbError, UsageError} from '../errors.js'
import {openGeo} from '../geo/geoip.js'
import {compileSelectOptions} from '../select/options.js'
import {select} from '../select/index.js'
import {SnapshotKeeper} from './keeper.js'
import {MirrorServer} from './server.js'
import {TrustedProxies} from './client-address.js'
import {watchOrigin} from './watch.js'
import {MetalinkRoutes} from '../metalink/routes.js'

/** Splits `HOST:PORT` / `[V6]:PORT` / `:PORT`. @throws UsageError */
export function parseListen(text: string): {host: string; port: number} {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text.trim())
  const port = m ? Number(m[3]) : Number.NaN
  if (!m || port > 65_535) throw new UsageError(`Invalid listen address "${text}": expected HOST:PORT such as 127.0.0.1:8080 or [::1]:8080.`, 'INVALID_LISTEN')
  return {host: m[1] ?? (m[2] || '0.0.0.0'), port}
}

/** Creates the JSON request/event logger (pino) writing asynchronously to stdout. */
export function createLogger(level: string): Logger {
  return pino({level, base: {pid: process.pid}, timestamp: isoTimeCached, formatters: {level: (label) => ({level: label})}}, pino.destination({dest: 1, sync: false}))
}

let lastTimeMs = -1
let lastTimeText = ''

/** pino's `isoTime` (`,"time":"2026-01-02T03:04:05.678Z"`, UTC), formatted once per millisecond. */
function isoTimeCached(): string {
  const now = Date.now()
  if (now !== lastTimeMs) {
    lastTimeMs = now
    lastTimeText = `,"time":"${new Date(now).toISOString()}"`
  }
  return lastTimeText
}

export interface RunningServer {
  server: MirrorServer
  keeper: SnapshotKeeper
  url: string
  logger: Logger
  /** Stops listening, lets observers flush, stops the snapshot keeper, flushes the log. */
  close(): Promise<void>
}

/**
 * Starts `mb serve` in this process.
 * @throws UsageError for a missing/invalid root, listen address or GeoIP file;
 *         MbError when the first snapshot cannot be read or the port is taken
 */
export async function startServe(config: Config, database: Database, options: {logger?: Logger} = {}): Promise<RunningServer> {
  if (!config.root) throw new UsageError('No origin root given: pass --root DIR (or set MB_ROOT / `root:` in the config file).', 'ROOT_INVALID')
  if (!existsSync(config.root) || !statSync(config.root).isDirectory()) throw new UsageError(`The origin root ${config.root} is not a directory. Pass the tree that \`mb index\` walks with --root.`, 'ROOT_INVALID')
  const {host, port} = parseListen(config.serve.listen)
  const logger = options.logger ?? createLogger(config.log_level)
  const t0 = performance.now()
  let keeper: SnapshotKeeper
  try {
    keeper = await SnapshotKeeper.start(database, {url: config.database_url, logger, pollSeconds: config.serve.poll_seconds})
  } catch (error) {
    throw new MbError(`Cannot load the snapshot from ${database.location}: ${(error as Error).message}`, {code: 'SNAPSHOT_FAILED', cause: error})
  }
  const loadSeconds = (performance.now() - t0) / 1000
  const geo = await openGeo({geoip: config.geoip, asnDb: config.asn_db})
  const selectOptions = compileSelectOptions(config.select)
  // Metalinks, hash files and mirror lists (src/lib/metalink/routes.ts), and Link/Digest on redirects.
  const metalink = new MetalinkRoutes({database})
  const server: MirrorServer = new MirrorServer({root: config.root, keeper, geo, select, selectOptions, trustedProxies: new TrustedProxies(config.trusted_proxies), logger, countryQuery: config.serve.country_query, redirectHeaders: (ctx, file, client) => metalink.redirectHeaders(ctx, file, server.root, client.https)})
  metalink.install(server)
  let address
  try {
    address = await server.listen(host, port)
  } catch (error) {
    await keeper.close()
    throw new MbError(`Cannot listen on ${config.serve.listen}: ${(error as Error).message}`, {code: 'LISTEN_FAILED', cause: error})
  }
  const unwatch = config.serve.watch ? watchOrigin(server.root, keeper, logger) : undefined
  if (unwatch) server.addShutdownHook(unwatch)
  const url = `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
  const snapshot = keeper.current
  logger.info(
    {
      url,
      root: server.root,
      database: database.location,
      files: snapshot.files.size,
      mirrors: snapshot.mirrors.size,
      snapshotSeconds: Math.round(loadSeconds * 1000) / 1000,
      rssMB: Math.round(process.memoryUsage().rss / 1048576),
      geoip: geo.sources,
      trustedProxies: config.trusted_proxies,
      watch: config.serve.watch,
    },
    'listening',
  )
  logger.flush()
  let closing: Promise<void> | undefined
  return {
    server,
    keeper,
    url,
    logger,
    close() {
      closing ??= (async () => {
        await server.close()
        await keeper.close()
        logger.info('stopped')
        await new Promise<void>((resolve) => logger.flush(() => resolve()))
      })()
      return closing
    },
  }
}
