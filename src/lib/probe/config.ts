/**
 * Settings of the `probe:` section of the config file. Keys are snake_case.
 *
 * ```yaml
 * probe:
 *   sentinel: TIME               # path below each mirror's base URL to request; default: the
 *                                # smallest file the last scan found on that mirror
 *   connect_timeout: 5           # seconds to establish TCP (and TLS)
 *   timeout: 15                  # seconds for the whole check, redirects included
 *   fail_threshold: 2            # consecutive failures before a protocol/family goes down
 *   ok_threshold: 2              # consecutive successes before it comes back up
 *   rescan_after_seconds: 86400  # down longer than this: needs a fresh scan once back
 *   insecure_tls: false          # accept self-signed/invalid HTTPS certificates
 *   redirects: same_origin       # same_origin | public | any (see below)
 *   max_redirects: 5
 *   history: 100                 # probe results kept per mirror
 *   jobs: 8                      # mirrors probed in parallel
 *   user_agent: mb-probe/0.1
 *   user_agents: [Wget/1.21.4, curl/8.5.0]   # also checked: a mirror must answer every one
 *   warning: 10                  # Nagios WARNING at this share (%) of mirrors down
 *   critical: 30                 # Nagios CRITICAL at this share (%) of mirrors down
 *   on_change: /usr/local/bin/mirror-changed   # run on each state transition (./notify.ts)
 *   on_change_timeout: 10        # seconds one run of it may take
 *   content_budget_bytes: 1073741824  # content checks: bytes fetched per mirror and hour (and per `mb probe --content` round)
 *   content_interval_seconds: 900     # `mb serve`'s background content checks: one round every this many seconds
 *   content_demand_mirror_budget: 20  # checks a client's retry asks for, per mirror and hour
 * ```
 *
 * Redirect policy (`redirects`): a redirect within the mirror's own scheme, host and port is
 * always followed (up to `max_redirects`; a repeated URL is `redirect_loop`).
 * - `same_origin` (default): a redirect to another host or port ends the check as
 *   `redirect_offsite`, a state of its own (`mb mirror list` shows `no (redirects off-host)`):
 *   the mirror is taken out of selection, since each client would take an extra hop to a
 *   host nobody registered;
 * - `public`: other hosts are followed unless they are, or resolve to, a private,
 *   loopback, link-local or otherwise non-global address (`redirect_private`); a mirror
 *   that answers there is up, and the check's detail names the other host;
 * - `any`: follow anywhere (labs and tests on loopback).
 */
import {z} from 'zod'

/** The smallest `content_budget_bytes`: one piece of the smallest size `mb index --hashes` writes (256 KiB). */
const MIN_CONTENT_BUDGET = 256 * 1024
/** The largest `content_budget_bytes` (1 TiB). */
const MAX_CONTENT_BUDGET = 1024 ** 4
const BUDGET_RANGE = `expected a whole number of bytes from ${MIN_CONTENT_BUDGET} (256 KiB) to ${MAX_CONTENT_BUDGET} (1 TiB)`
/** The longest `content_interval_seconds`: a day, so that a day's new copies are checked within a day. */
const MAX_CONTENT_INTERVAL = 86400
const INTERVAL_RANGE = `expected 0 (off) or seconds from 1 to ${MAX_CONTENT_INTERVAL} (a day)`

export const REDIRECT_POLICIES = ['same_origin', 'public', 'any'] as const
export type RedirectPolicy = (typeof REDIRECT_POLICIES)[number]

export const ProbeConfigSchema = z
  .object({
    sentinel: z.string().min(1).optional().describe("Path below every mirror's base URL to request instead of the smallest scanned file."),
    connect_timeout: z.number().positive().max(300).default(5).describe('Seconds to establish the TCP connection and TLS handshake.'),
    timeout: z.number().positive().max(3600).default(15).describe('Seconds for a whole check (all redirect hops) before it counts as `timeout`.'),
    fail_threshold: z.number().int().min(1).max(100).default(2).describe('Consecutive failures before a protocol/family (and the mirror) is marked down.'),
    ok_threshold: z.number().int().min(1).max(100).default(2).describe('Consecutive successes before a down protocol/family is marked up again.'),
    rescan_after_seconds: z.number().int().min(0).max(31_536_000).default(86400).describe('A mirror down for longer than this (seconds) needs a fresh scan when it comes back.'),
    insecure_tls: z.boolean().default(false).describe('Accept self-signed or otherwise invalid HTTPS certificates (`--insecure`).'),
    redirects: z
      .enum(REDIRECT_POLICIES)
      .default('same_origin')
      .describe('Redirects to other hosts: same_origin (the mirror is out of selection as `redirect_offsite`), public (followed, not to private addresses) or any (followed anywhere).'),
    max_redirects: z.number().int().min(0).max(20).default(5).describe('Redirect hops followed before giving up with `redirect_loop`.'),
    history: z.number().int().min(1).max(10000).default(100).describe('Probe results kept per mirror in `mirror_probe` (older ones are deleted).'),
    transitions: z.number().int().min(1).max(10000).default(50).describe('State transitions kept per mirror in `mirror_transition`.'),
    jobs: z.number().int().min(1).max(256).default(8).describe('Mirrors probed in parallel (`--jobs`).'),
    user_agent: z.string().min(1).default('mb-probe/0.1 (mirror health check)').describe('User-Agent header of probe requests.'),
    user_agents: z
      .array(z.string().min(1))
      .max(10)
      .default([])
      .describe('More User-Agent headers each check is made with (e.g. `Wget/1.21.4`, `curl/8.5.0`): a mirror must answer every one, so one that refuses download tools fails.'),
    warning: z.number().min(0).max(100).default(10).describe('Nagios WARNING when at least this share (percent) of probed mirrors is down.'),
    critical: z.number().min(0).max(100).default(30).describe('Nagios CRITICAL when at least this share (percent) of probed mirrors is down.'),
    on_change: z
      .string()
      .refine((path) => path.startsWith('/'), {message: 'expected the absolute path of an executable, e.g. /usr/local/bin/mirror-changed'})
      .optional()
      .describe(
        'Program run on each state transition a probe round records (MB_MIRROR, MB_SCOPE, MB_PROTOCOL, MB_FAMILY, MB_OLD_STATE, MB_NEW_STATE, MB_REASON, MB_AT in its environment); its failure is reported, not fatal.',
      ),
    on_change_timeout: z.number().positive().max(3600).default(10).describe('Seconds one run of `on_change` may take before it is killed.'),
    content_budget_bytes: z
      .number()
      .int({message: BUDGET_RANGE})
      .min(MIN_CONTENT_BUDGET, {message: BUDGET_RANGE})
      .max(MAX_CONTENT_BUDGET, {message: BUDGET_RANGE})
      .default(1024 * 1024 * 1024)
      .describe(
        'Bytes content checks fetch from each mirror per hour at most (`mb serve`, each round its share), and per `mb probe --content` round (`--budget`): whole copies, every piece (docs/operations.md, "Content checks").',
      ),
    suspect_bad_copies: z
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .default(10)
      .describe(
        'Corrupt copies (found by content checks) that make a mirror suspect, out of selection as after a refused scan, until a content round finds fewer or `mb mirror edit NAME --trust-scan`; 0 = never.',
      ),
    content_interval_seconds: z
      .number()
      .min(0, {message: INTERVAL_RANGE})
      .max(MAX_CONTENT_INTERVAL, {message: INTERVAL_RANGE})
      .refine((v) => v === 0 || v >= 1, {message: INTERVAL_RANGE})
      .default(900)
      .describe(
        'Seconds between the background content checks of `mb serve` (src/lib/probe/background-content.ts), each within its share of `content_budget_bytes` per mirror and hour; the first runs at start when the last round (of any replica) is that old; 0 = off (run `mb probe --content` from cron instead).',
      ),
    content_demand_mirror_budget: z
      .number()
      .int()
      .min(0)
      .max(1000)
      .default(20)
      .describe(
        "Checks of one copy that clients' retries away from a mirror may ask for, per mirror and hour (each reads the copy whole, at most `content_budget_bytes`; src/lib/probe/content-demand.ts); 0 = retries ask for none.",
      ),
  })
  .strict()

export type ProbeConfig = z.infer<typeof ProbeConfigSchema>
