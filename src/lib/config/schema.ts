/**
 * The one zod schema for every setting, whatever layer (file, env, flag) it comes from.
 * Each area owns its section schema in its own module; this file only assembles them.
 */
import {z} from 'zod'
import {SelectConfigSchema, unprobedPolicy} from '../select/config.js'
import {ScanConfigSchema} from '../scan/config.js'
import {IndexConfigSchema} from '../origin/config.js'
import {ProbeConfigSchema} from '../probe/config.js'
import {PushConfigSchema} from '../push/config.js'
import {broadTrustedNetworks, ServeConfigSchema} from '../serve/config.js'
import {StatsConfigSchema} from '../stats/config.js'
import {SyncConfigSchema} from '../sync/config.js'
import {YumConfigSchema} from '../yum/config.js'
import {TorrentConfigSchema, ZsyncConfigSchema} from '../metalink/formats-config.js'
import {cidrString, listOf} from '../config-fields.js'

export const ConfigSchema = z
  .object({
    database_url: z.string().url().optional().describe('PostgreSQL URL; when absent, the embedded PGlite store in `data_dir` is used.'),
    database_read_url: z
      .string()
      .url()
      .optional()
      .describe(
        'A read-only PostgreSQL standby of `database_url` (streaming replication): `mb serve` loads and refreshes its snapshot there, by polling (`serve.poll_seconds`), and writes to `database_url`. PostgreSQL only.',
      ),
    data_dir: z.string().optional().describe('Embedded PGlite store directory (default `$XDG_DATA_HOME/mb`, i.e. `~/.local/share/mb`).'),
    socket_group: z.string().min(1).optional().describe("Group whose members may reach the embedded store's shared socket (default: the owner only)."),
    root: z.string().optional().describe('The origin tree (master copy).'),
    geoip: listOf(z.string()).default([]).describe('GeoIP City/Country mmdb files (MaxMind layout or @ip-location-db layout); empty = the bundled GeoLite2 City data.'),
    asn_db: z.string().optional().describe('A MaxMind GeoLite2-ASN mmdb file.'),
    trusted_proxies: listOf(cidrString).default([]).describe('Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed.'),
    log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info').describe('Level of the JSON event log on stdout (debug adds a line per request in `mb serve`).'),
    select: SelectConfigSchema.default({}).describe('Choosing a mirror for a request (docs/selection.md).'),
    index: IndexConfigSchema.default({}).describe('Walking the origin tree (`mb index`, and each round of `mb serve --push-after`).'),
    scan: ScanConfigSchema.default({}).describe('Listing the mirrors (`mb scan`).'),
    probe: ProbeConfigSchema.default({}).describe('Mirror health checks (`mb probe`, `mb serve --probe-interval`).'),
    push: PushConfigSchema.default({}).describe('Pushing the origin tree to mirrors that do not pull (`mb push`, `mb serve --push-after`; docs/push.md).'),
    serve: ServeConfigSchema.default({}).describe('The redirector (`mb serve`).'),
    sync: SyncConfigSchema.default({}).describe('Sync trace files: when each mirror last completed a sync (docs/operations.md, "Release day").'),
    stats: StatsConfigSchema.default({}).describe('Download statistics (`mb serve`, `mb stats`).'),
    yum: YumConfigSchema.default({}).describe('dnf/yum repositories behind `/metalink` and `/mirrorlist` (docs/repositories.md).'),
    torrent: TorrentConfigSchema.default({}).describe('BitTorrent with web seeds: PATH.torrent, PATH.magnet, PATH.btih.'),
    zsync: ZsyncConfigSchema.default({}).describe('zsync 0.6 control files: PATH.zsync, sums computed by `mb index --hashes`.'),
  })
  .strict()
  // Checks across sections: a read URL needs a primary URL; trusted networks against serve.allow_broad_trusted_proxies; and a
  // default that depends on another section: select.unprobed follows serve.probe_interval.
  .transform((c, ctx) => {
    if (c.database_read_url && !c.database_url)
      ctx.addIssue({
        code: z.ZodIssueCode.custom,
        path: ['database_read_url'],
        message: 'a read URL names a PostgreSQL standby of the primary in database_url, and the embedded store has none: set database_url (MB_DATABASE_URL) to the primary, or drop database_read_url',
      })
    for (const {path, message} of broadTrustedNetworks(c)) ctx.addIssue({code: z.ZodIssueCode.custom, path, message})
    return {...c, select: {...c.select, unprobed: unprobedPolicy(c.select.unprobed, c.serve.probe_interval)}}
  })

export type Config = z.infer<typeof ConfigSchema>
