/**
 * Settings of the `serve:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'

export const ServeConfigSchema = z
  .object({
    listen: z.string().default('127.0.0.1:8080').describe('HOST:PORT to listen on; IPv6 hosts in brackets, e.g. `[::]:8080`.'),
    watch: z.boolean().default(false).describe('Watch the origin tree: a changed file is served from the origin until rescanned.'),
    workers: z.coerce.number().int().min(1).max(64).default(1).describe('Worker processes (node:cluster); 1 = a single process.'),
    poll_seconds: z.coerce.number().min(0.2).max(300).default(2).describe('Snapshot poll interval in seconds (LISTEN/NOTIFY makes most changes faster).'),
    country_query: z.boolean().default(true).describe('Honour `?country=XX` to test selection for another country.'),
    access_log: z.string().min(1).optional().describe("Access log (Apache combined format + mirror and realm): a file path, or '-' for stdout (src/lib/serve/access-log.ts)."),
    metrics_listen: z.string().min(1).optional().describe('HOST:PORT of the separate Prometheus listener (`GET /metrics`, src/lib/serve/metrics.ts).'),
    probe_interval: z.coerce.number().min(0).default(0).describe('Seconds between background probe rounds inside `mb serve` (src/lib/probe/background.ts); 0 = off.'),
  })
  .strict()
