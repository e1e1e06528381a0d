/**
 * Settings of the `serve:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const ServeConfigSchema = z
  .object({
    /** HOST:PORT to listen on; IPv6 hosts in brackets, e.g. `[::]:8080`. */
    listen: z.string().default('127.0.0.1:8080'),
  })
  .strict()

export type ServeConfig = z.infer<typeof ServeConfigSchema>
