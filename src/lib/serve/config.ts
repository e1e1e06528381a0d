/**
 * Settings of the `serve:` section of the config file. Keys are snake_case.
 */
import {z} from 'zod'
import {cidrString, listOf} from '../config-fields.js'
import {originGlobProblem} from '../glob.js'
import {isBroadPrefix, isLocalPrefix, SHORTEST_NARROW_PREFIX} from '../net.js'

/** A setting of the whole configuration that {@link broadTrustedNetworks} found too broad, and why. */
export interface BroadNetwork {
  path: Array<string | number>
  message: string
}

/**
 * The entries of `trusted_proxies` and `serve.country_query_clients` (canonical CIDRs) that
 * are broader than a network of clients ({@link isBroadPrefix}: shorter than /16 or /32),
 * unless `serve.allow_broad_trusted_proxies`. A trusted proxy network that lies wholly in a
 * range the Internet does not route (`10.0.0.0/8`, `fc00::/7`; {@link isLocalPrefix}) is
 * accepted: no outside client sends from it. A peer in `trusted_proxies` may name any
 * client address in `X-Forwarded-For` (and so its country, AS and connection limit); a client
 * in `country_query_clients` may pick its pool with `?country=`. `0.0.0.0/0` there hands that
 * to the whole Internet, and is refused as a broad mirror `--prefix` is (src/lib/mirrors/validate.ts).
 */
export function broadTrustedNetworks(config: {trusted_proxies: string[]; serve: {country_query_clients: string[]; allow_broad_trusted_proxies: boolean}}): BroadNetwork[] {
  if (config.serve.allow_broad_trusted_proxies) return []
  const limit = `/${SHORTEST_NARROW_PREFIX.ipv4} (IPv4) or /${SHORTEST_NARROW_PREFIX.ipv6} (IPv6)`
  const found: BroadNetwork[] = []
  config.trusted_proxies.forEach((cidr, i) => {
    if (isBroadPrefix(cidr) && !isLocalPrefix(cidr))
      found.push({
        path: ['trusted_proxies', i],
        message: `${cidr} is shorter than ${limit} and public: every client in it could set X-Forwarded-For and choose its own address, country and connection limit. List your proxies' own addresses, or set serve.allow_broad_trusted_proxies: true to accept it`,
      })
  })
  config.serve.country_query_clients.forEach((cidr, i) => {
    if (isBroadPrefix(cidr))
      found.push({
        path: ['serve', 'country_query_clients', i],
        message: `${cidr} is shorter than ${limit}: every client in it could choose its mirror pool with ?country=. List the testers' networks, or set serve.allow_broad_trusted_proxies: true to accept it`,
      })
  })
  return found
}

/**
 * Who may steer selection with `?country=XX`: nobody (`off`), or only clients whose
 * resolved address is a trusted proxy or lies in `country_query_clients` (`trusted`).
 * `false` reads as `off`; `true` (any client) is refused, because it lets every client
 * choose its pool.
 */
const countryQuery = z.preprocess(
  (value) => (value === false ? 'off' : value),
  z.enum(['off', 'trusted'], {
    errorMap: (issue, ctx) =>
      issue.code === 'invalid_enum_value' || issue.code === 'invalid_type'
        ? {message: `expected off or trusted (true would let any client steer selection: use trusted and list the testers' networks in serve.country_query_clients), got ${JSON.stringify(ctx.data)}`}
        : {message: ctx.defaultError},
  }),
)

/** The largest `serve.origin_budget` rate: 1 TB/s. */
const MAX_BUDGET = 10 ** 12

/** The default `serve.origin_budget.bytes_per_second`: 100 MiB/s. */
export const DEFAULT_ORIGIN_BUDGET_TOTAL = 100 * 2 ** 20

/** The default `serve.origin_budget.network_bytes_per_second`: 10 MiB/s. */
export const DEFAULT_ORIGIN_BUDGET_NETWORK = 10 * 2 ** 20

/** The default `serve.origin_fallback_mirrors`: a list of two mirrors or more names no origin. */
export const DEFAULT_ORIGIN_FALLBACK_MIRRORS = 2

/** An absolute http(s) URL without query or fragment, kept with a trailing slash. */
const publicUrl = z
  .string()
  .url()
  .refine((value) => /^https?:\/\/[^/?#]+(\/[^?#]*)?$/i.test(value), {message: 'expected an http:// or https:// URL without query or fragment, e.g. https://download.example.org/'})
  .transform((value) => (value.endsWith('/') ? value : `${value}/`))

export const ServeConfigSchema = z
  .object({
    listen: z.string().default('127.0.0.1:8080').describe('HOST:PORT to listen on; IPv6 hosts in brackets, e.g. `[::]:8080`. A listening socket systemd passes (`mb-serve.socket`) takes its place.'),
    watch: z.boolean().default(false).describe('Watch the origin tree: a changed file is served from the origin until rescanned.'),
    push_after: z.coerce
      .number()
      .min(0)
      .max(86_400)
      .default(0)
      .describe('With `watch`, push the origin to every push mirror once it has been quiet this many seconds after a change (src/lib/push/after.ts); 0 = off.'),
    workers: z.coerce.number().int().min(1).max(64).default(1).describe('Worker processes (node:cluster); 1 = a single process.'),
    poll_seconds: z.coerce
      .number()
      .min(0.2)
      .max(300)
      .default(2)
      .describe('Snapshot poll interval in seconds while no LISTEN connection delivers changes (a `database_read_url` standby, a dropped connection).'),
    listen_poll_seconds: z.coerce
      .number()
      .min(0.2)
      .max(3600)
      .default(30)
      .describe('Snapshot poll interval in seconds while LISTEN delivers changes (they arrive within about 20 ms): the safety net, for a notification lost on a connection that died silently.'),
    country_query: countryQuery.default('off').describe('Who may use `?country=XX` to test selection for another country (src/lib/serve/delivery/client-address.ts, `CountryQueryTrust`).'),
    country_query_clients: listOf(cidrString).default([]).describe('With `country_query: trusted`, client networks (besides `trusted_proxies`) whose `?country=` is honoured.'),
    allow_broad_trusted_proxies: z
      .boolean()
      .default(false)
      .describe(
        'Accept `trusted_proxies` and `serve.country_query_clients` networks shorter than /16 (IPv4) or /32 (IPv6), such as 0.0.0.0/0: every client in them could choose its own address or country.',
      ),
    access_log: z.string().min(1).optional().describe("Access log (Apache combined format + mirror and realm): a file path, or '-' for stdout (src/lib/operator/access-log.ts)."),
    pid_file: z
      .string()
      .min(1)
      .optional()
      .describe('File `mb serve` writes its process id to once it listens (removed on exit), for `mb serve reload|stop|upgrade` without systemd (src/lib/redirector/pid-file.ts).'),
    metrics_listen: z.string().min(1).optional().describe('HOST:PORT of the separate Prometheus listener (`GET /metrics`, src/lib/operator/metrics.ts).'),
    probe_interval: z.coerce.number().min(0).max(86_400).default(0).describe('Seconds between background probe rounds inside `mb serve` (src/lib/probe/background.ts); 0 = off.'),
    max_connections: z.coerce
      .number()
      .int()
      .min(1)
      .max(1_000_000)
      .optional()
      .describe('Open client connections at most, per process (src/lib/serve/delivery/connections.ts); unset = half the open-file limit.'),
    max_connections_per_client: z.coerce.number().int().min(1).max(1_000_000).default(64).describe('Open connections per client address (TCP peer; IPv6 by /64) at most; trusted proxies are exempt.'),
    header_timeout: z.coerce.number().min(1).max(300).default(10).describe('Seconds a client has to send a complete request header.'),
    keep_alive_timeout: z.coerce.number().min(0.1).max(300).default(5).describe('Seconds an idle keep-alive connection stays open.'),
    public_url: publicUrl
      .optional()
      .describe("Base URL clients reach this server at (e.g. `https://download.example.org/`), for absolute URLs in metalinks, `Link` headers and mirror lists; unset = from the request's Host."),
    origin_url: publicUrl
      .optional()
      .describe(
        "Base URL of a plain HTTP server of the origin tree (never redirecting), e.g. `https://origin.example.org/pub/`: the last entry of the fallback lists (apt and dnf lists; metalinks and web seeds below `origin_fallback_mirrors`). Unset = this server's origin form, PUBLIC_URL/_origin/PATH (src/lib/serve/delivery/origin-form.ts), delivered within `origin_budget`.",
      ),
    origin_budget: z
      .object({
        bytes_per_second: z.coerce
          .number()
          .int()
          .min(0)
          .max(MAX_BUDGET)
          .default(DEFAULT_ORIGIN_BUDGET_TOTAL)
          .describe(
            'Bytes per second, in all, the origin may deliver of files a mirror could carry (the origin form `/_origin/PATH`, files under `select.min_size`); over it such a request gets a 302 to the best mirror. 0 = no limit.',
          ),
        network_bytes_per_second: z.coerce
          .number()
          .int()
          .min(0)
          .max(MAX_BUDGET)
          .default(DEFAULT_ORIGIN_BUDGET_NETWORK)
          .describe('The same budget per client network (`select.client_prefix_v4`/`_v6`), bytes per second. 0 = no limit.'),
      })
      .strict()
      .default({})
      .describe("The origin's budget for what a mirror could carry (src/lib/serve/delivery/origin-budget.ts); files no eligible mirror holds are always delivered."),
    origin_fallback_mirrors: z.coerce
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(DEFAULT_ORIGIN_FALLBACK_MIRRORS)
      .describe(
        "Metalinks (4 and 3), a torrent's web seeds and a magnet's `ws=` end with the origin's direct URL only when they list fewer than this many mirrors: no client prefers the origin while mirrors are healthy. 0 or 1: only when no mirror is listed.",
      ),
    mirror_only: listOf(
      z.string().superRefine((value, ctx) => {
        const problem = originGlobProblem(value)
        if (problem) ctx.addIssue({code: z.ZodIssueCode.custom, message: `not a glob that can match an origin path: ${problem}`})
      }),
    )
      .default([])
      .describe(
        'Globs (picomatch) on origin paths whose files stay indexed as mirror-only when the origin prunes them, while a mirror holds their last indexed version: they are redirected (hashes and metalinks kept) instead of 404 (read by `mb index`; `mb file forget PATH` ends one).',
      ),
    disk_check_seconds: z.coerce
      .number()
      .min(0)
      .max(1)
      .default(1)
      .describe(
        'How long one stat of an indexed file vouches that the disk still holds the indexed version (at most 1 s); a changed file is served by the origin and re-indexed. 0 turns the check off (for benchmarks).',
      ),
    disk_check_watch: z
      .boolean()
      .default(true)
      .describe(
        "Watch the origin's directories (one inotify watch each, src/lib/origin/watch.ts) so that the disk check stats a file once and then believes it until an event names it; directories over half of `fs.inotify.max_user_watches`, and roots on network file systems, keep the stat per `disk_check_seconds`.",
      ),
  })
  .strict()

/** The `serve:` section, as validated. */
export type ServeConfig = z.infer<typeof ServeConfigSchema>
