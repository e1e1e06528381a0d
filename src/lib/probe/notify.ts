/**
 * Telling someone what a probe round changed: the mirrors that went down or started failing
 * (`mb probe --fail-on-down`), and the `probe.on_change` hook, a program run once per state transition
 * of the round (by `mb probe` and by `mb serve --probe-interval` alike).
 *
 * The hook gets the transition in its environment, no arguments and no stdin:
 * - `MB_MIRROR`: the mirror's identifier;
 * - `MB_SCOPE`: `mirror` (the mirror as a whole) or a protocol/family such as `https/ipv6`;
 * - `MB_PROTOCOL`, `MB_FAMILY`: the two parts of such a scope (empty for `mirror`);
 * - `MB_OLD_STATE`: `up`, `down`, or `unknown` (a protocol/family probed for the first time);
 * - `MB_NEW_STATE`: `up` or `down`;
 * - `MB_REASON`: the check's reason code (`ok`, `refused`, `timeout`, `http_404`, ...);
 * - `MB_AT`: when, ISO 8601 UTC.
 * Transitions run one at a time, in the round's order, each for at most
 * `probe.on_change_timeout` seconds (then its process group is killed). Its output goes to
 * stderr (stdout stays the command's: `--json`). A hook that fails, times out or cannot be
 * started is reported through `onFailure` and changes nothing else: the round stands.
 */
import {spawn} from 'node:child_process'
import type {ProbeRound} from './run.js'

/** One state transition of a round. */
export interface StateChange {
  mirror: string
  /** `mirror`, or a protocol/family key such as `http/ipv4`. */
  scope: string
  from: string
  to: string
  reason: string
  /** ISO 8601, UTC. */
  at: string
}

/** Every transition of `round`, mirror by mirror, in the order they were recorded. */
export function stateChanges(round: ProbeRound): StateChange[] {
  return round.mirrors.flatMap((m) => m.transitions.map((t) => ({mirror: m.identifier, scope: t.scope, from: t.from, to: t.to, reason: t.reason, at: t.at})))
}

/** The mirrors (as a whole) that went from up to down in `round`. */
export function wentDown(round: ProbeRound): StateChange[] {
  return stateChanges(round).filter((c) => c.scope === 'mirror' && c.from === 'up' && c.to === 'down')
}

/**
 * The mirrors that were up and failed every check of `round`, but are not down yet (fewer
 * failed rounds in a row than `probe.fail_threshold`): with {@link wentDown}, what lets
 * `--fail-on-down` alert on the first failed round rather than the one that takes the mirror
 * out. `reason` is the first failed check's.
 */
export function startedFailing(round: ProbeRound): Array<{mirror: string; reason: string}> {
  return round.mirrors.filter((m) => m.was_up && m.up && m.checks.length > 0 && m.checks.every((c) => !c.ok)).map((m) => ({mirror: m.identifier, reason: m.checks[0].reason}))
}

/** The hook's environment for `change`, on top of `base`. */
export function hookEnvironment(change: StateChange, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const [protocol, family] = change.scope === 'mirror' ? ['', ''] : change.scope.split('/')
  return {
    ...base,
    MB_MIRROR: change.mirror,
    MB_SCOPE: change.scope,
    MB_PROTOCOL: protocol ?? '',
    MB_FAMILY: family ?? '',
    MB_OLD_STATE: change.from,
    MB_NEW_STATE: change.to,
    MB_REASON: change.reason,
    MB_AT: change.at,
  }
}

/**
 * Runs `script` (an absolute path to an executable) once for each of `changes`, one at a
 * time, each for at most `timeoutSeconds`.
 * @param onFailure called with the change and what went wrong (exit status, signal, timeout,
 *        spawn error); never throws
 */
export async function runChangeHook(script: string, changes: StateChange[], options: {timeoutSeconds: number; onFailure: (change: StateChange, problem: string) => void}): Promise<void> {
  for (const change of changes) {
    const problem = await runOnce(script, hookEnvironment(change), options.timeoutSeconds * 1000)
    if (problem !== undefined) options.onFailure(change, problem)
  }
}

/** Runs `script` once with `env`; resolves to undefined when it exits 0, else to what went wrong. */
function runOnce(script: string, env: NodeJS.ProcessEnv, timeoutMs: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    let timedOut = false
    // Its own process group, so that a timeout also ends what a shell script started.
    const child = spawn(script, [], {env, stdio: ['ignore', 2, 2], detached: true})
    const timer = setTimeout(() => {
      timedOut = true
      try {
        process.kill(-child.pid!, 'SIGKILL')
      } catch {
        child.kill('SIGKILL')
      }
    }, timeoutMs)
    child.once('error', (error) => {
      clearTimeout(timer)
      resolve(`cannot run it: ${error.message}`)
    })
    child.once('exit', (code, signal) => {
      clearTimeout(timer)
      if (timedOut) resolve(`killed after ${timeoutMs / 1000} s (probe.on_change_timeout)`)
      else if (code === 0) resolve(undefined)
      else resolve(signal ? `killed by ${signal}` : `exit status ${code}`)
    })
  })
}

/** The one-line report of a hook failure, for stderr or a log. */
export function hookFailureMessage(script: string, change: StateChange, problem: string): string {
  return `probe.on_change ${script} failed for ${change.mirror} (${change.scope} ${change.from}->${change.to}): ${problem}`
}
