/**
 * Starts the work `mb serve` does on demand: the scans on demand (src/lib/scan/demand.ts) from
 * the `scan:` settings (the queue, its database side, and the folder scanner: `mb scan --dir
 * DIR --no-recursive` with the `scan:` time budgets and credentials; `scan.demand: false` turns
 * them off), and the content checks a client's retry asks for (src/lib/probe/content-demand.ts,
 * `probe.content_demand_mirror_budget: 0` turns them off).
 */
import type {Logger} from 'pino'
import type {Config} from '../../config/index.js'
import type {Database} from '../../db/index.js'
import {checkCopy} from '../../probe/content-check.js'
import {ContentDemandQueue} from '../../probe/content-demand.js'
import {sqlContentDemandStore} from '../../probe/content-demand-store.js'
import {DemandScanQueue} from '../../scan/demand.js'
import type {ServerOptions} from '../delivery/settings.js'
import {sqlDemandStore} from '../../scan/demand-store.js'
import {scanMirror, scanSettings} from '../../scan/scan.js'

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

/** What {@link startOnDemand} starts, and the server hooks that feed it. */
export interface OnDemand {
  demand?: DemandScanQueue
  contentDemand?: ContentDemandQueue
  hooks: Pick<ServerOptions, 'onNoMirror' | 'onRetryAway'>
}

/** Starts both queues; `hooks.onNoMirror` feeds the scans on demand, `hooks.onRetryAway` the content checks on demand. */
export function startOnDemand(database: Database, config: Pick<Config, 'scan' | 'sync' | 'probe'>, logger: Logger): OnDemand {
  const demand = startDemandScans(database, config, logger)
  const contentDemand = startContentDemand(database, config, logger)
  return {
    demand,
    contentDemand,
    hooks: {onNoMirror: demand && ((path, mirrors) => demand.request(path, mirrors)), onRetryAway: contentDemand && ((path, mirrorId) => contentDemand.request(path, mirrorId))},
  }
}

/** The queue of content checks on demand, or undefined when `probe.content_demand_mirror_budget` is 0. Settings apply at start. */
function startContentDemand(database: Database, config: Pick<Config, 'probe'>, logger: Logger): ContentDemandQueue | undefined {
  const probe = config.probe
  if (probe.content_demand_mirror_budget === 0) return undefined
  return new ContentDemandQueue(sqlContentDemandStore(database.db), (mirrorId, path) => checkCopy(database, probe, mirrorId, path), {mirrorBudget: probe.content_demand_mirror_budget}, {logger})
}
