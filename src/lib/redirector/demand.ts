/**
 * Starts the work `mb serve` does on demand: the scans on demand (src/lib/scan/demand.ts) from
 * the `scan:` settings (the queue, its database side, and the folder scanner: `mb scan --dir
 * DIR --no-recursive` with the `scan:` time budgets and credentials; `scan.demand: false` turns
 * them off), and the content checks a client's retry asks for (src/lib/probe/content-demand.ts,
 * `probe.content_demand_mirror_budget: 0` turns them off).
 */
import type {Logger} from 'pino'
import type {Config} from '../config/index.js'
import type {Database} from '../db/index.js'
import {checkCopy} from '../probe/content-check.js'
import {ContentDemandQueue} from '../probe/content-demand.js'
import {sqlContentDemandStore} from '../probe/content-demand-store.js'
import {DemandScanQueue} from '../scan/demand.js'
import {sqlDemandStore} from '../scan/demand-store.js'
import {scanMirror, scanSettings} from '../scan/scan.js'
import type {ServerOptions} from '../serve/delivery/settings.js'
import {tierScans} from './tier-scans.js'

/** The queue of scans on demand, or undefined when `scan.demand` is off. Settings apply at start (a reload does not change them). */
function startDemandScans(database: Database, config: Pick<Config, 'scan' | 'sync'>, logger: Logger): DemandScanQueue | undefined {
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
function demandHooks(demand: DemandScanQueue | undefined): Pick<ServerOptions, 'onNoMirror' | 'onOutsideTier'> {
  if (demand === undefined) return {}
  return {onNoMirror: (path, mirrors, network) => demand.request(path, mirrors, network), onOutsideTier: tierScans(demand)}
}

/** What {@link startOnDemand} starts, and the server hooks that feed it. */
export interface OnDemand {
  demand?: DemandScanQueue
  contentDemand?: ContentDemandQueue
  hooks: Pick<ServerOptions, 'onNoMirror' | 'onOutsideTier' | 'onRetryAway'>
}

/** Starts both queues; `onNoMirror` and `onOutsideTier` feed the scans on demand, `onRetryAway` the content checks on demand. */
export function startOnDemand(database: Database, config: Pick<Config, 'scan' | 'sync' | 'probe'>, logger: Logger): OnDemand {
  const demand = startDemandScans(database, config, logger)
  const contentDemand = startContentDemand(database, config, logger)
  return {demand, contentDemand, hooks: {...demandHooks(demand), ...(contentDemand && {onRetryAway: (path, mirrorId) => contentDemand.request(path, mirrorId)})}}
}

/** The queue of content checks on demand, or undefined when `probe.content_demand_mirror_budget` is 0. Settings apply at start. */
function startContentDemand(database: Database, config: Pick<Config, 'probe'>, logger: Logger): ContentDemandQueue | undefined {
  const probe = config.probe
  if (probe.content_demand_mirror_budget === 0) return undefined
  return new ContentDemandQueue(
    sqlContentDemandStore(database.db),
    (mirrorId, path, signal) => checkCopy(database, probe, mirrorId, path, {signal}),
    {mirrorBudget: probe.content_demand_mirror_budget},
    {logger},
  )
}
