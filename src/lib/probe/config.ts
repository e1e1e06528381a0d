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
 *   redirects: public            # same_origin | public | any (see below)
 *   max_redirects: 5
 *   history: 100                 # probe results kept per mirror
 *   jobs: 8                      # mirrors probed in parallel
 *   user_agent: mb-probe/0.1
 *   warning: 10                  # Nagios WARNING at this share (%) of mirrors down
 *   critical: 30                 # Nagios CRITICAL at this share (%) of mirrors down
 * ```
 *
 * Redirect policy (`redirects`): a redirect within the mirror's own scheme, host and port is
 * always followed (up to `max_redirects`; a repeated URL is `redirect_loop`).
 * - `same_origin`: any redirect to another host or port fails as `redirect_offsite`;
 * - `public` (default): other hosts are followed unless they are, or resolve to, a private,
 *   loopback, link-local or otherwise non-global address (`redirect_private`);
 * - `any`: follow anywhere (labs and tests on loopback).
 */
import {z} from 'zod'

export const REDIRECT_POLICIES = ['same_origin', 'public', 'any'] as const
export type RedirectPolicy = (typeof REDIRECT_POLICIES)[number]

export const ProbeConfigSchema = z
  .object({
    /** Path below every mirror's base URL to request instead of the smallest scanned file. */
    sentinel: z.string().min(1).optional(),
    /** Seconds to establish the TCP connection and TLS handshake. */
    connect_timeout: z.number().positive().default(5),
    /** Seconds for a whole check (all redirect hops) before it counts as `timeout`. */
    timeout: z.number().positive().default(15),
    /** Consecutive failures before a protocol/family (and the mirror) is marked down. */
    fail_threshold: z.number().int().min(1).max(100).default(2),
    /** Consecutive successes before a down protocol/family is marked up again. */
    ok_threshold: z.number().int().min(1).max(100).default(2),
    /** A mirror down for longer than this (seconds) needs a fresh scan when it comes back. */
    rescan_after_seconds: z.number().int().min(0).default(86400),
    /** Accept self-signed or otherwise invalid HTTPS certificates (`--insecure`). */
    insecure_tls: z.boolean().default(false),
    /** Which redirects a probe follows; see the module docstring. */
    redirects: z.enum(REDIRECT_POLICIES).default('public'),
    /** Redirect hops followed before giving up with `redirect_loop`. */
    max_redirects: z.number().int().min(0).max(20).default(5),
    /** Probe results kept per mirror in `mirror_probe` (older ones are deleted). */
    history: z.number().int().min(1).max(10000).default(100),
    /** State transitions kept per mirror in `mirror_transition`. */
    transitions: z.number().int().min(1).max(10000).default(50),
    /** Mirrors probed in parallel (`--jobs`). */
    jobs: z.number().int().min(1).max(256).default(8),
    /** User-Agent header of probe requests. */
    user_agent: z.string().min(1).default('mb-probe/0.1 (mirror health check)'),
    /** Nagios WARNING when at least this share (percent) of probed mirrors is down. */
    warning: z.number().min(0).max(100).default(10),
    /** Nagios CRITICAL when at least this share (percent) of probed mirrors is down. */
    critical: z.number().min(0).max(100).default(30),
  })
  .strict()

export type ProbeConfig = z.infer<typeof ProbeConfigSchema>
