/**
 * Settings of the `select:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const SelectConfigSchema = z
  .object({
    /** Files smaller than this many bytes are delivered from the origin. */
    min_size: z.number().int().min(0).default(4096),
  })
  .strict()

export type SelectConfig = z.infer<typeof SelectConfigSchema>
