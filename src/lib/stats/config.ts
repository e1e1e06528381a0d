/**
 * Settings of the `stats:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const StatsConfigSchema = z
  .object({})
  .strict()

export type StatsConfig = z.infer<typeof StatsConfigSchema>
