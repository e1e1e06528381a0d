/**
 * One probe of one mirror right after `mb mirror add` or `mb mirror enable`, so that a mirror
 * is not trusted blindly until the next probe round. The probe is recorded like any round
 * (`mirror_probe`, the per-scheme summaries, the up/down state), and its outcome is reported
 * in words; a failed probe never fails the command that asked for it.
 */
import type {Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {errorMessage} from '../errors.js'
import type {UnprobedPolicy} from '../select/config.js'
import type {ProbeConfig} from './config.js'
import type {Resolver} from './http.js'
import {type MirrorRoundResult, probeMirrors} from './run.js'

/** What the one probe found: the recorded round, or why there is none. */
export type ProbeOnce =
  /** The mirror was probed and the result recorded. */
  | {probed: true; result: MirrorRoundResult}
  /** Nothing was recorded: `reason` says why (no HTTP(S) URL, or the probe itself failed). */
  | {probed: false; reason: string}

/**
 * Probes mirror `identifier` once (enabled or not) and records the result.
 *
 * @param config  the `probe:` section (timeouts: a dead host costs up to `probe.timeout` seconds)
 * @returns never rejects for a probe that finds the mirror down, nor for a probe that fails
 *          to run (say, a database error while recording): both are reported in the result
 */
export async function probeOnce(db: Kysely<DB>, config: ProbeConfig, identifier: string, options: {resolver?: Resolver} = {}): Promise<ProbeOnce> {
  try {
    const round = await probeMirrors(db, config, {names: [identifier], jobs: 1, resolver: options.resolver})
    const result = round.mirrors[0]
    if (!result) return {probed: false, reason: 'the mirror was removed before it could be probed'}
    if (result.skipped) return {probed: false, reason: result.skipped}
    return {probed: true, result}
  } catch (error) {
    return {probed: false, reason: `the probe failed: ${errorMessage(error)}`}
  }
}

/** The `--json` form of a probe after add/enable: the round's result, or `{probed: false, reason}`. */
export function probeOnceJson(outcome: ProbeOnce | null): (MirrorRoundResult & {probed: true}) | {probed: false; reason: string} {
  if (outcome === null) return {probed: false, reason: 'not probed (--no-probe)'}
  return outcome.probed ? {probed: true, ...outcome.result} : outcome
}

function schemeWord(value: boolean | null): string | null {
  return value === null ? null : value ? 'up' : 'down'
}

/**
 * Lines that say what a probe after add/enable found and what selection makes of it, e.g.
 * `Probe: up (http up, https down: tls_error on https/ipv4); HTTPS clients are not sent to it.`
 *
 * @param outcome   the probe, or null when `--no-probe` skipped it
 * @param unprobed  the effective `select.unprobed`, which decides about a mirror not probed
 */
export function describeProbe(name: string, outcome: ProbeOnce | null, unprobed: UnprobedPolicy): string {
  const untrusted =
    unprobed === 'skip'
      ? `it gets no redirects until a probe finds it up (select.unprobed: skip; \`mb probe ${name}\` probes it).`
      : `selection uses it as if it were up (select.unprobed: use) until a probe says otherwise (\`mb probe ${name}\`).`
  if (outcome === null) return `Not probed (--no-probe): ${untrusted}`
  if (!outcome.probed) return `Not probed: ${outcome.reason}. The mirror is registered; ${untrusted}`
  const r = outcome.result
  const failed = r.checks.filter((c) => !c.ok).map((c) => `${c.reason} on ${c.key}`)
  const schemes = [
    ['http', schemeWord(r.http_up)],
    ['https', schemeWord(r.https_up)],
  ]
    .filter(([, state]) => state !== null)
    .map(([scheme, state]) => `${scheme} ${state}`)
  const detail = [schemes.join(', '), ...(failed.length > 0 ? [failed.join(', ')] : [])].join('; ')
  if (!r.up) return `Probe: down (${detail}). The mirror is registered but gets no redirects until probes find it up again (\`mb probe ${name}\`).`
  const down = [r.http_up === false ? 'HTTP' : null, r.https_up === false ? 'HTTPS' : null].filter(Boolean)
  const note = down.length > 0 ? ` ${down.join(' and ')} clients are not sent to it while its ${down.join(' and ')} fails.` : ''
  return `Probe: up (${detail}).${note}${r.needs_rescan ? ' It needs a fresh scan before it gets redirects (`mb scan`).' : ''}`
}
