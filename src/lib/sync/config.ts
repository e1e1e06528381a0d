/**
 * Settings of the `sync:` section of the config file: sync trace files (docs/operations.md,
 * "Release day"). Keys are snake_case.
 *
 * ```yaml
 * sync:
 *   trace_path: project/trace/origin.example.org   # or TIME, lastsync; off when unset
 *   margin_seconds: 60            # select.trust_trace: a trace this much newer than a file's indexing vouches for it
 *   max_lag_seconds: 86400        # a mirror whose trace is older leaves selection (sync_lag); off when unset
 *   lag_warning_seconds: 21600    # Nagios WARNING when a mirror's lag reaches this
 *   lag_critical_seconds: 86400   # Nagios CRITICAL when a mirror's lag reaches this
 * ```
 */
import {z} from 'zod'
import {trimLeadingSlashes} from '../text.js'

export const SyncConfigSchema = z
  .object({
    trace_path: z
      .string()
      .min(1)
      .refine((p) => !p.split('/').includes('..'), {message: 'expected a path inside the origin tree, without ".." (e.g. TIME or project/trace/origin.example.org)'})
      .transform((p) => trimLeadingSlashes(p))
      .optional()
      .describe(
        'Path (in the origin tree) of the sync trace file: `mb index` and `mb serve --watch` write the time (Unix seconds) there at most once a minute, the index leaves it out, and each probe round reads it from every mirror to learn when the mirror last completed a sync. Unset = no traces.',
      ),
    margin_seconds: z.number().int().min(0).max(86_400).default(60).describe("`select.trust_trace`: a mirror whose trace is at least this many seconds newer than a file's indexing holds the file."),
    max_lag_seconds: z
      .number()
      .int()
      .positive()
      .max(31_536_000)
      .optional()
      .describe("A mirror whose trace is this many seconds behind the origin's leaves selection with the reason `sync_lag`; unset = no limit."),
    lag_warning_seconds: z.number().int().positive().max(31_536_000).default(21_600).describe('`mb probe --nagios`: WARNING when some mirror is this many seconds behind the origin (by its trace).'),
    lag_critical_seconds: z.number().int().positive().max(31_536_000).default(86_400).describe('`mb probe --nagios`: CRITICAL when some mirror is this many seconds behind the origin (by its trace).'),
  })
  .strict()

export type SyncConfig = z.infer<typeof SyncConfigSchema>
