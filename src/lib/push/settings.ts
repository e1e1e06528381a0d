/**
 * The push settings of a configuration as {@link PushOptions}, and the mirrors a push to
 * "every push mirror" means; shared by `mb push` and `mb serve --push-after`.
 */
import type {SyncConfig} from '../sync/config.js'
import type {ScanConfig} from '../scan/config.js'
import type {PushConfig} from './config.js'
import type {Database} from '../db/index.js'
import type {MirrorRow} from '../db/schema.js'
import {UsageError} from '../errors.js'
import {requireRoot} from '../origin/root.js'
import type {PushOptions} from './push.js'
import type {IndexConfig} from '../origin/config.js'

/** The settings a push reads: the origin `root`, the `push:` section, the scan's include and exclude patterns, and the `index:` section for `--push-after`'s index. */
export interface PushSettings {
  root?: string
  push: PushConfig
  /** `sync.trace_path`: the round's index writes the origin's sync trace. */
  sync: Pick<SyncConfig, 'trace_path'>
  scan: Pick<ScanConfig, 'include' | 'exclude'>
  /** `index.min_ratio` and `index.exclude`: the round's index refuses a walk that would drop most of the tree, and leaves out what the index does. */
  index: IndexConfig
  /** `serve.mirror_only`: the round's index keeps pruned files that mirrors hold (src/lib/origin/mirror-only.ts). */
  serve?: {mirror_only?: readonly string[]}
}

/**
 * The options of a push under `config` (sections `push:` and `scan:`, and `root`).
 * @throws UsageError when `root` is not set, or push.large_max is below push.small_max
 */
export function pushOptions(config: PushSettings): PushOptions {
  const root = requireRoot(config.root, '`mb push` sends that tree')
  const p = config.push
  if (p.large_max < p.small_max) throw new UsageError(`push.large_max (${p.large_max}) must be at least push.small_max (${p.small_max}).`)
  return {
    root,
    smallMax: p.small_max,
    largeMax: p.large_max,
    timeoutSeconds: p.timeout,
    connectTimeoutSeconds: p.connect_timeout,
    ioTimeoutSeconds: p.io_timeout,
    passwordFile: p.rsync_password_file,
    include: config.scan.include,
    exclude: config.scan.exclude,
  }
}

/** The enabled mirrors that have a push_url, by identifier. */
export async function pushMirrorRows(database: Database): Promise<MirrorRow[]> {
  return database.db.selectFrom('mirror').selectAll().where('push_url', 'is not', null).where('enabled', '=', true).orderBy('identifier').execute()
}
