/**
 * The one zod schema for every setting, whatever layer (file, env, flag) it comes from.
 * Each area owns its section schema in its own module; this file only assembles them.
 */
import {z} from 'zod'
import {SelectConfigSchema, unprobedPolicy} from '../select/config.js'
import {ScanConfigSchema} from '../scan/config.js'
import {ProbeConfigSchema} from '../probe/config.js'
import {ServeConfigSchema} from '../serve/config.js'
import {StatsConfigSchema} from '../stats/config.js'
import {cidrString, listOf} from './zod.js'

export const ConfigSchema = z
  .object({
    /** PostgreSQL URL; when absent, the embedded PGlite store in `data_dir` is used. */
    database_url: z.string().url().optional(),
    /** Embedded PGlite store directory (default `$XDG_DATA_HOME/mb`). */
    data_dir: z.string().optional(),
    /** Group whose members may reach the embedded store's shared socket (default: the owner only). */
    socket_group: z.string().min(1).optional(),
    /** The origin tree (master copy). */
    root: z.string().optional(),
    /** GeoIP City/Country mmdb files (MaxMind layout or @ip-location-db layout). */
    geoip: listOf(z.string()).default([]),
    /** A MaxMind GeoLite2-ASN mmdb file. */
    asn_db: z.string().optional(),
    /** Proxies whose X-Forwarded-For / X-Forwarded-Proto are believed. */
    trusted_proxies: listOf(cidrString).default([]),
    log_level: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    select: SelectConfigSchema.default({}),
    scan: ScanConfigSchema.default({}),
    probe: ProbeConfigSchema.default({}),
    serve: ServeConfigSchema.default({}),
    stats: StatsConfigSchema.default({}),
  })
  .strict()
  // A default that depends on another section: select.unprobed follows serve.probe_interval.
  .transform((c) => ({...c, select: {...c.select, unprobed: unprobedPolicy(c.select.unprobed, c.serve.probe_interval)}}))

export type Config = z.infer<typeof ConfigSchema>
