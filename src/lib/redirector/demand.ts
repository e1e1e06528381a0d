/**
 * Starts the scans on demand of `mb serve` (src/lib/scan/demand.ts) from the `scan:` settings:
 * the queue, its database side, and the folder scanner (`mb scan --dir DIR --no-recursive`
 * with the `scan:` time budgets and credentials). `scan.demand: false` turns them off.
 */
import type {Logger} from 'pino'
import type {Config} from '../config/index.js'
import type {Database} from '../db/index.js'
import {DemandScanQueue} from '../scan/demand.js'
import {sqlDemandStore} from '../scan/demand-store.js'
import {scanMirror, scanSettings} from '../scan/scan.js'
import type {ServerOptions} from '../serve/delivery/settings.js'
import {tierScans} from './tier-scans.js'

/** The queue of scans on demand, or undefined when `scan.demand` is off. Settings apply at start (a reload does not change them). */
export function startDemandScans(database: Database, config: Pick<Config, 'scan' | 'sync'>, logger: Logger): DemandScanQueue | undefined {
  const scan = config.scan
  if (!scan.demand) return undefined
  const settings = scanSettings(scan)
  return new DemandScanQueue(
    sqlDemandStore(database.db),
    (mirror, folder, signal) => scanMirror(database, mirror, {...settings, subdir: folder, recursive: false, signal}),
    {
      cooldownSeconds: scan.demand_cooldown_seconds,
      jobs: scan.demand_jobs,
      mirrorBudget: scan.demand_mirror_budget,
      useTraces: Boolean(config.sync.trace_path),
      include: scan.include,
      exclude: scan.exclude,
    },
    {logger},
  )
}

/**
 * The server hooks that feed the scans on demand: a file no eligible mirror holds
 * (`onNoMirror`), and a redirect that leaves the client's own tier (`onOutsideTier`,
 * ./tier-scans.ts). None when the scans on demand are off.
 */
export function demandHooks(demand: DemandScanQueue | undefined): Pick<ServerOptions, 'onNoMirror' | 'onOutsideTier'> {
  if (demand === undefined) return {}
  return {onNoMirror: (path, mirrors, network) => demand.request(path, mirrors, network), onOutsideTier: tierScans(demand)}
}
