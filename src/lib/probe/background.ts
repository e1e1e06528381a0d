/**
 * Background probing inside `mb serve --probe-interval SECONDS`: the same rounds as
 * `mb probe`, every interval, with pooled connections kept per mirror between rounds.
 *
 * With several replicas on one PostgreSQL database, only one probes at a time: each round
 * first takes the named lock {@link PROBE_LOCK} and skips the round when another replica
 * holds it. PGlite allows one process per data directory, so there it is trivially single.
 */
import type {SelectConfig} from '../select/config.js'
import type {SyncConfig} from '../sync/config.js'
import type {Database} from '../db/index.js'
import {PROBE_LOCK} from '../db/named-locks.js'
import type {ProbeConfig} from './config.js'
import type {ProbeClient, Resolver} from './http.js'
import {hookFailureMessage, runChangeHook, stateChanges} from './notify.js'
import {probeMirrors, type ProbeRound} from './run.js'
import {type ProbeLogger, startLockedRounds} from './rounds.js'

/** A running background prober. */
export interface BackgroundProbes {
  /** Stops the timer, ends a running round (its mirrors not probed to the end keep their state), and closes the pooled connections. */
  stop(): Promise<void>
  /** Runs one round now (also used by tests); resolves to the round, or null when skipped. */
  runOnce(): Promise<ProbeRound | null>
}

/**
 * Starts probing every `intervalSeconds` (first round right away). Rounds never overlap;
 * errors are logged, never thrown.
 *
 * @param database  an open database (it also holds the probe lock)
 * @param config    the effective configuration (`probe:` section)
 * @param options.intervalSeconds  seconds between the starts of rounds (> 0)
 * @param options.logger           where to log transitions and failures
 * @param options.resolver         host name resolver (tests)
 */
export function startBackgroundProbes(
  database: Database,
  config: {probe: ProbeConfig; select: Pick<SelectConfig, 'trust_trace'>; sync: Pick<SyncConfig, 'trace_path' | 'margin_seconds'>},
  options: {intervalSeconds: number; logger?: ProbeLogger; resolver?: Resolver},
): BackgroundProbes {
  if (!(options.intervalSeconds > 0)) throw new RangeError('intervalSeconds must be positive')
  const clients = new Map<number, ProbeClient>()
  const logger = options.logger

  async function round(signal: AbortSignal): Promise<ProbeRound> {
    const result = await probeMirrors(database.db, config.probe, {
      signal,
      clients,
      resolver: options.resolver,
      tracePath: config.sync.trace_path,
      trustMarginSeconds: config.select.trust_trace ? config.sync.margin_seconds : undefined,
    })
    for (const mirror of result.mirrors) {
      for (const t of mirror.transitions.filter((t) => t.scope === 'mirror'))
        logger?.warn({mirror: mirror.identifier, from: t.from, to: t.to, reason: t.reason}, `mirror ${mirror.identifier} is ${t.to}`)
    }
    logger?.info({probed: result.probed, up: result.up, down: result.down}, 'probe round done')
    const script = config.probe.on_change
    if (script)
      await runChangeHook(script, stateChanges(result), {
        timeoutSeconds: config.probe.on_change_timeout,
        onFailure: (change, problem) => logger?.warn({mirror: change.mirror, scope: change.scope, hook: script}, hookFailureMessage(script, change, problem)),
      })
    return result
  }

  const rounds = startLockedRounds(database, PROBE_LOCK, round, {intervalSeconds: options.intervalSeconds, what: 'probe', first: 'now', logger})
  return {
    runOnce: rounds.runOnce,
    async stop() {
      await rounds.stop()
      await Promise.all([...clients.values()].map((c) => c.close()))
      clients.clear()
    },
  }
}
