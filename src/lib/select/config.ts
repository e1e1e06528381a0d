/**
 * Settings of the `select:` section of the config file. Keys are snake_case.
 *
 * `compileSelectOptions()` in `./options.ts` turns the parsed section into the compiled
 * form `select()` takes (matchers built once, not per request).
 */
import {z} from 'zod'
import {isCountryCode} from '../geo/countries.js'
import {cidrString, listOf} from '../config-fields.js'
import {VERIFY_CONFIG} from './verify-config.js'
import {DEFAULT_RETRY_MEMORY_ENTRIES, DEFAULT_RETRY_WINDOW_SECONDS, MAX_RETRY_MEMORY_ENTRIES, MAX_RETRY_WINDOW_SECONDS} from './retry.js'

/** Default origin-only patterns: repository metadata and signatures (matched on basename and full path). */
export const DEFAULT_ORIGIN_ONLY = ['repomd.xml', 'Release', 'Release.gpg', 'InRelease', 'Packages*', 'Sources*', '*.asc', '*.sig', '*.sha256']

/** The values of `select.ipv6`: IPv6 clients `prefer` mirrors with IPv6, or `require` it. */
const IPV6_POLICIES = ['prefer', 'require'] as const

/** The values of `select.sticky_key`: what the rendezvous hash keys the client by. */
const STICKY_KEYS = ['network', 'network+path'] as const

/** The values of `select.unprobed`. */
export const UNPROBED_POLICIES = ['use', 'skip'] as const
export type UnprobedPolicy = (typeof UNPROBED_POLICIES)[number]

/**
 * The effective `select.unprobed`: as set, else `skip` when a probe loop is configured
 * (`serve.probe_interval` > 0 seconds), else `use`.
 */
export function unprobedPolicy(set: UnprobedPolicy | undefined, probeIntervalSeconds: number): UnprobedPolicy {
  return set ?? (probeIntervalSeconds > 0 ? 'skip' : 'use')
}

const countryCode = z
  .string()
  .transform((s) => s.trim().toUpperCase())
  .refine((s) => isCountryCode(s), {message: 'expected an ISO 3166-1 alpha-2 country code such as NZ'})

const regexString = z.string().superRefine((value, ctx) => {
  try {
    new RegExp(value, 'i')
  } catch (error) {
    ctx.addIssue({code: z.ZodIssueCode.custom, message: `not a valid regular expression: ${(error as Error).message}`})
  }
})

export const SelectConfigSchema = z
  .object({
    min_size: z
      .number()
      .int()
      .min(0)
      .max(2 ** 40)
      .default(4096)
      .describe('Files smaller than this many bytes are delivered from the origin.'),
    origin_only: listOf(z.string().min(1)).default(DEFAULT_ORIGIN_ONLY).describe('Glob patterns (picomatch) of files always delivered from the origin; matched on the basename and on the full path.'),
    exclude_user_agents: listOf(regexString).default([]).describe('Regular expressions (case-insensitive) of User-Agents that get the file from the origin.'),
    exclude_clients: listOf(cidrString).default([]).describe('Client CIDRs that get files from the origin.'),
    exclude_mime: listOf(z.string().min(1)).default([]).describe('MIME type globs (e.g. `text/*`), by file extension, delivered from the origin.'),
    country_substitutions: z
      .record(z.string(), countryCode)
      .default({NZ: 'AU'})
      .superRefine((map, ctx) => {
        for (const key of Object.keys(map)) {
          if (!isCountryCode(key)) ctx.addIssue({code: z.ZodIssueCode.custom, path: [key], message: `"${key}" is not an ISO 3166-1 alpha-2 country code`})
        }
      })
      .describe("Client country -> country whose mirrors also count as the client's own (NZ -> AU)."),
    client_prefix_v4: z.number().int().min(0).max(32).default(24).describe('Client network prefix length for sticky choice, IPv4 (bits).'),
    client_prefix_v6: z.number().int().min(0).max(128).default(48).describe('Client network prefix length for sticky choice, IPv6 (bits).'),
    sticky_key: z
      .enum(STICKY_KEYS)
      .default('network')
      .describe(
        "What keeps a client on its mirror: `network` (the client network, so one network gets one mirror per pool) or `network+path` (the network and the file path, so one network's downloads spread over the pool and each file stays on one mirror).",
      ),
    ranking: z
      .enum(['geo', 'score'])
      .default('geo')
      .describe(
        "How eligible mirrors are ranked: `geo` (the pool cascade prefix > AS > country > continent > world, nearest first) or `score` (every eligible mirror shares a client's requests by its score alone, whatever its distance; stickiness kept). `score` keeps one well-scored but isolated mirror from taking a whole region (Mirrorbits issue 222).",
      ),
    distance_factor: z
      .number()
      .min(1)
      .max(100)
      .default(1.5)
      .describe("Within a pool, mirrors farther than this factor x the nearest one's distance rank after the near ones (>= 1); they are not dropped."),
    distance_floor_km: z
      .number()
      .min(0)
      .max(20_040)
      .default(100)
      .describe('Mirrors within this many km of the client always count as near for the distance rule (guards against a nearest distance of ~0).'),
    ipv6: z
      .enum(IPV6_POLICIES)
      .default('prefer')
      .describe('IPv6 clients: `prefer` ranks mirrors that probing found without IPv6 after the others of their pool (still used); `require` passes them over (`no_ipv6`).'),
    max_scan_age_seconds: z
      .number()
      .int()
      .positive()
      .max(31_536_000)
      .nullable()
      .default(null)
      .describe('A mirror whose last successful scan is older than this many seconds is not used; null = no limit.'),
    unprobed: z
      .enum(UNPROBED_POLICIES)
      .optional()
      .describe(
        'A mirror never probed (or a scheme of it not probed yet): `use` counts it as up, `skip` passes it over with reason `unprobed`. Unset: `skip` when a probe loop is configured (`serve.probe_interval` > 0), else `use` (resolved in ../config/schema.ts).',
      ),
    max_alternatives: z.number().int().min(0).max(100).default(5).describe('How many alternative mirrors to list (Link: rel=duplicate headers, RFC 6249).'),
    metalink_max_mirrors: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(100)
      .describe('At most this many mirror URLs in a metalink (Metalink 4, Metalink 3), in selection order; the origin is listed after them.'),
    retry_window_seconds: z
      .number()
      .int()
      .min(0)
      .max(MAX_RETRY_WINDOW_SECONDS)
      .default(DEFAULT_RETRY_WINDOW_SECONDS)
      .describe(
        'A client address asking again for the same file within this many seconds (no Range, or a Range from byte 0, not conditional) is sent to the next mirror of its tier (the sticky choice\'s pool), cycling, never to the origin (docs/selection.md, "Retries keep their locality"); 0 turns retries off (every request gets the sticky choice).',
      ),
    retry_memory_entries: z
      .number()
      .int()
      .min(2)
      .max(MAX_RETRY_MEMORY_ENTRIES)
      .default(DEFAULT_RETRY_MEMORY_ENTRIES)
      .describe(
        'Recent answers (client address, path) each `mb serve` process remembers for retries at most, rounded up to a power of two; the oldest are forgotten first (24 bytes each, allocated at start).',
      ),
    trust_trace: z
      .boolean()
      .default(false)
      .describe(
        'Trust the mirrors\' sync traces for new files: a file indexed (or changed) at T counts as held by a mirror whose trace is at least T + `sync.margin_seconds`, when its last scan saw the file\'s folder with other files it holds; marked `by trace` until the next scan confirms or removes it (docs/operations.md, "Sync traces").',
      ),
    ...VERIFY_CONFIG,
  })
  .strict()

export type SelectConfig = z.infer<typeof SelectConfigSchema>
