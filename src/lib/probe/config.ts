/**
 * Settings of the `probe:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const ProbeConfigSchema = z
  .object({})
  .strict()

export type ProbeConfig = z.infer<typeof ProbeConfigSchema>
