/**
 * Settings of the `scan:` section of the config file. Keys are snake_case.
 *
 * ```yaml
 * scan:
 *   include: ['**']            # picomatch globs on origin paths; empty = everything
 *   exclude: ['**\/.~tmp~/**']  # origin paths never counted as held by any mirror
 *   min_ratio: 0.5             # refuse a scan that matches fewer than this share of before
 *   timeout: 3600              # per-mirror budget, seconds
 *   connect_timeout: 20        # seconds
 *   io_timeout: 120            # seconds without data before a listing is abandoned
 *   jobs: 2                    # mirrors scanned in parallel
 *   max_index_bytes: 67108864  # largest HTTP index page read (64 MiB)
 *   rsync_password_file: /etc/mb/rsync.secret
 *   demand: true                  # mb serve scans a folder when a file in it has no mirror
 *   demand_cooldown_seconds: 300  # a folder is scanned on demand at most this often
 *   demand_jobs: 2                # folder scans on demand at a time (per mb serve process)
 *   demand_mirror_budget: 60      # scans on demand per mirror and hour
 * ```
 */
import {z} from 'zod'
import {globList} from '../config-fields.js'

export const ScanConfigSchema = z
  .object({
    include: globList.default([]).describe('Globs (picomatch) on origin paths: when non-empty, only matching files count.'),
    exclude: globList.default([]).describe('Globs (picomatch) on origin paths that never count as held by a mirror.'),
    min_ratio: z.number().min(0).max(1).default(0.5).describe('A scan matching fewer than this share of the files it matched before is refused.'),
    timeout: z.number().positive().max(604_800).default(3600).describe('Per-mirror time budget in seconds (all protocols together).'),
    connect_timeout: z.number().positive().max(300).default(20).describe('Connect timeout in seconds.'),
    io_timeout: z.number().positive().max(86_400).default(120).describe('I/O timeout in seconds (no data for this long aborts a listing).'),
    jobs: z.number().int().min(1).max(64).default(2).describe('Mirrors scanned in parallel by `mb scan --all`.'),
    max_index_bytes: z
      .number()
      .int()
      .min(1024)
      .max(2 ** 32)
      .default(64 * 1024 * 1024)
      .describe('Largest HTTP directory index page read, bytes; a larger page fails the scan.'),
    rsync_password_file: z.string().optional().describe('File holding the rsync daemon password (else RSYNC_PASSWORD from the environment).'),
    demand: z
      .boolean()
      .default(true)
      .describe('`mb serve`: a request for an indexed file that no eligible mirror holds queues a scan of its folder (one directory) on the mirrors that could hold it.'),
    demand_cooldown_seconds: z.number().int().min(1).max(604_800).default(300).describe('A folder is scanned on demand at most once in this many seconds (across the replicas sharing the database).'),
    demand_jobs: z.number().int().min(1).max(64).default(2).describe('Folder scans on demand running at a time in one `mb serve` process.'),
    demand_mirror_budget: z.number().int().min(1).max(86_400).default(60).describe('Scans on demand of one mirror per hour; beyond it the mirror is left out until the hour has room.'),
  })
  .strict()

/** The `scan:` section, as validated. */
export type ScanConfig = z.infer<typeof ScanConfigSchema>
