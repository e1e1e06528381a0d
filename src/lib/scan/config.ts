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
 * ```
 */
import {z} from 'zod'
import {listOf} from '../config-fields.js'
import {globProblem} from '../glob.js'

const globList = listOf(
  z.string().superRefine((value, ctx) => {
    const problem = globProblem(value)
    if (problem) ctx.addIssue({code: z.ZodIssueCode.custom, message: `not a valid glob: ${problem}`})
  }),
)

export const ScanConfigSchema = z
  .object({
    include: globList.default([]).describe('Globs (picomatch) on origin paths: when non-empty, only matching files count.'),
    exclude: globList.default([]).describe('Globs (picomatch) on origin paths that never count as held by a mirror.'),
    min_ratio: z.number().min(0).max(1).default(0.5).describe('A scan matching fewer than this share of the files it matched before is refused.'),
    timeout: z.number().positive().default(3600).describe('Per-mirror time budget in seconds (all protocols together).'),
    connect_timeout: z.number().positive().default(20).describe('Connect timeout in seconds.'),
    io_timeout: z.number().positive().default(120).describe('I/O timeout in seconds (no data for this long aborts a listing).'),
    jobs: z.number().int().min(1).max(64).default(2).describe('Mirrors scanned in parallel by `mb scan --all`.'),
    max_index_bytes: z
      .number()
      .int()
      .min(1024)
      .default(64 * 1024 * 1024)
      .describe('Largest HTTP directory index page read, bytes; a larger page fails the scan.'),
    rsync_password_file: z.string().optional().describe('File holding the rsync daemon password (else RSYNC_PASSWORD from the environment).'),
  })
  .strict()

/** The `scan:` section, as validated. */
export type ScanConfig = z.infer<typeof ScanConfigSchema>
