/**
 * Settings of the `scan:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const ScanConfigSchema = z
  .object({})
  .strict()

export type ScanConfig = z.infer<typeof ScanConfigSchema>
