/**
 * Settings of the `push:` section of the config file (`mb push`, `mb serve --push-after`).
 * Keys are snake_case; sizes in bytes, times in seconds.
 *
 * ```yaml
 * push:
 *   small_max: 1048576      # pass 1 sends files up to 1 MiB
 *   large_max: 104857600    # pass 2 those up to 100 MiB; pass 3 the rest
 *   timeout: 21600          # per-mirror budget for the whole push
 *   connect_timeout: 20
 *   io_timeout: 300
 *   jobs: 2
 *   rsync_password_file: /etc/mb/push.secret
 * ```
 */
import {z} from 'zod'

export const PushConfigSchema = z
  .object({
    small_max: z
      .number()
      .int()
      .min(0)
      .max(2 ** 50)
      .default(1024 * 1024)
      .describe('Pass 1 sends the files of at most this many bytes (the small ones), so most files start redirecting first.'),
    large_max: z
      .number()
      .int()
      .min(0)
      .max(2 ** 50)
      .default(100 * 1024 * 1024)
      .describe('Pass 2 sends the files above push.small_max up to this many bytes; pass 3 sends the larger ones.'),
    timeout: z.number().positive().max(604_800).default(21600).describe('Per-mirror time budget of one push in seconds (all passes and listings together).'),
    connect_timeout: z.number().positive().max(300).default(20).describe('Connect timeout in seconds.'),
    io_timeout: z.number().positive().max(86_400).default(300).describe('Seconds without data before a transfer or listing is abandoned.'),
    jobs: z.number().int().min(1).max(64).default(2).describe('Mirrors pushed to in parallel by `mb push --all` and `mb serve --push-after`.'),
    rsync_password_file: z.string().optional().describe('File holding the rsync daemon password for pushes (else RSYNC_PASSWORD from the environment).'),
  })
  .strict()

/** The `push:` section, as validated. */
export type PushConfig = z.infer<typeof PushConfigSchema>
