/**
 * Background content checks inside `mb serve` (`probe.content_interval_seconds` > 0): the
 * rounds of `mb probe --content` (./content-check.ts), one every interval, so that corrupt
 * copies are found before clients find them without a cron job.
 *
 * The budget is per mirror and hour: `probe.content_budget_bytes` is what one mirror may be
 * asked for in any hour, so a round every `interval` seconds fetches at most
 * `content_budget_bytes × interval / 3600` bytes from each mirror (all of it when the interval
 * is an hour or longer: one round per interval then). The first round runs when the last one
 * (of this process, an earlier one or another replica: `background_round`) is an interval
 * old, at once on a store that never had one, so that restarts do not add rounds and a new
 * server finds corrupt copies before its clients do. A round that checked nothing (no mirror
 * up yet, no hashed file) is not recorded: the next start checks at once.
 *
 * With several replicas on one PostgreSQL database only one checks at a time: a round first
 * takes {@link CONTENT_CHECK_LOCK} and is skipped when another replica holds it.
 */
import type {ProbeConfig} from './config.js'
import type {Database} from '../db/index.js'
import {CONTENT_CHECK_LOCK} from '../db/named-locks.js'
import {type ProbeLogger, startLockedRounds} from './rounds.js'
import {checkMirrorContents, type ContentRound, type ContentRoundOptions} from './content-check.js'

/** One hour, the period `probe.content_budget_bytes` is a budget for (seconds). */
const HOUR = 3600

/** A running background checker. */
export interface BackgroundContentChecks {
  /** Stops the timer and ends a running round at once (the mirrors whose checks it cut short record none of them). */
  stop(): Promise<void>
  /** Runs one round now (tests); resolves to the round, or null when skipped or failed. */
  runOnce(): Promise<ContentRound | null>
  /** Bytes each mirror may be asked for per round. */
  readonly roundBudgetBytes: number
}

/** Bytes per mirror and round, for rounds every `intervalSeconds` within `budgetPerHour` bytes per mirror and hour. */
export function roundBudget(budgetPerHour: number, intervalSeconds: number): number {
  return Math.floor(budgetPerHour * Math.min(1, intervalSeconds / HOUR))
}

/**
 * Starts content checks every `probe.content_interval_seconds` (the first one when due, see
 * the module doc). Rounds never overlap; errors are logged, never thrown.
 * @param options.resolver  host name resolver (tests)
 */
export function startBackgroundContentChecks(
  database: Database,
  config: {probe: ProbeConfig},
  options: {logger?: ProbeLogger; resolver?: ContentRoundOptions['resolver']} = {},
): BackgroundContentChecks {
  const intervalSeconds = config.probe.content_interval_seconds
  if (!(intervalSeconds > 0)) throw new RangeError('probe.content_interval_seconds must be positive')
  const budgetBytes = roundBudget(config.probe.content_budget_bytes, intervalSeconds)
  const logger = options.logger

  async function round(signal: AbortSignal): Promise<ContentRound> {
    const result = await checkMirrorContents(database, config.probe, {budgetBytes, resolver: options.resolver, signal})
    for (const m of result.mirrors) {
      if (m.marked_bad > 0)
        logger?.warn({mirror: m.identifier, corrupt: m.marked_bad}, `content check: ${m.marked_bad} corrupt cop${m.marked_bad === 1 ? 'y' : 'ies'} on ${m.identifier} taken out of selection`)
      if (m.removed_missing > 0)
        logger?.warn(
          {mirror: m.identifier, missing: m.removed_missing},
          `content check: ${m.removed_missing} missing cop${m.removed_missing === 1 ? 'y' : 'ies'} on ${m.identifier} taken out until its next scan`,
        )
    }
    logger?.info({checked: result.checked, corrupt: result.corrupt, marked_bad: result.marked_bad, cleared: result.cleared, budget_bytes: budgetBytes}, 'content check round done')
    return result
  }

  const rounds = startLockedRounds(database, CONTENT_CHECK_LOCK, round, {intervalSeconds, what: 'content check', first: 'due', counts: (r) => r.checked > 0, logger})
  return {runOnce: rounds.runOnce, roundBudgetBytes: budgetBytes, stop: rounds.stop}
}
