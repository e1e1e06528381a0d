/**
 * Retention of download statistics: daily rows older than the policy roll up into monthly
 * rows, and monthly rows older than theirs are deleted. `mb stats prune` runs it by hand or
 * from cron; `mb serve` runs it once a day ({@link startDailyPrune}).
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import {errorMessage} from '../errors.js'
import type {RetentionPolicy} from './config.js'
import type {StatsLogger} from './collector.js'
import {isoDay} from '../time.js'

/** What one prune did, as `mb stats prune --json` prints it (snake_case keys). Dates are UTC 'YYYY-MM-DD'. */
export interface PruneResult {
  /** Daily rows before this day were rolled up. */
  daily_cutoff: string
  /** Monthly rows before this month (first day) were deleted. */
  monthly_cutoff: string
  /** Daily rows moved (deleted from stats_daily, added into stats_monthly). */
  daily_rows_rolled_up: number
  /** Monthly rows those daily rows were added into (new or existing). */
  monthly_rows_touched: number
  /** Downloads moved from daily to monthly rows. */
  downloads_rolled_up: number
  /** Monthly rows deleted as older than the monthly retention. */
  monthly_rows_deleted: number
}

/**
 * Applies `policy` as of `now` (UTC), in one transaction:
 * 1. deletes daily rows with day < today - dailyRetentionDays and adds their sums into the
 *    monthly rows of their month (`INSERT … ON CONFLICT DO UPDATE … + EXCLUDED`), in one
 *    statement (`WITH moved AS (DELETE … RETURNING *)`), so a concurrent flush or a second
 *    replica pruning at the same time can neither lose nor double a count;
 * 2. deletes monthly rows with month < first day of (this month - monthlyRetentionMonths).
 * Monthly totals afterwards equal the daily sums they replaced plus what they held before.
 * @throws the database error (nothing is changed then)
 */
export async function pruneStats(database: Pick<Database, 'db'>, policy: RetentionPolicy, now: Date = new Date()): Promise<PruneResult> {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())
  const dailyCutoff = isoDay(today - policy.dailyRetentionDays * 86_400_000)
  const monthlyCutoff = isoDay(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - policy.monthlyRetentionMonths, 1))
  return database.db.transaction().execute(async (trx) => {
    const moved = await sql<{rows: number; monthly: number; downloads: number}>`
      WITH moved AS (
        DELETE FROM stats_daily WHERE day < ${dailyCutoff}::date
        RETURNING day, path, mirror_id, country, downloads, bytes, other_requests
      ), rolled AS (
        SELECT date_trunc('month', day)::date AS month, path, mirror_id, country,
               sum(downloads)::bigint AS downloads, sum(bytes)::bigint AS bytes, sum(other_requests)::bigint AS other_requests,
               count(*)::bigint AS n
        FROM moved GROUP BY 1, 2, 3, 4
      ), upserted AS (
        INSERT INTO stats_monthly (month, path, mirror_id, country, downloads, bytes, other_requests)
        SELECT month, path, mirror_id, country, downloads, bytes, other_requests FROM rolled
        ON CONFLICT (month, path, mirror_id, country) DO UPDATE SET
          downloads = stats_monthly.downloads + EXCLUDED.downloads,
          bytes = stats_monthly.bytes + EXCLUDED.bytes,
          other_requests = stats_monthly.other_requests + EXCLUDED.other_requests
        RETURNING 1
      )
      SELECT (SELECT coalesce(sum(n), 0) FROM rolled)::bigint AS rows,
             (SELECT count(*) FROM upserted)::bigint AS monthly,
             (SELECT coalesce(sum(downloads), 0) FROM rolled)::bigint AS downloads`.execute(trx)
    const deleted = await sql`DELETE FROM stats_monthly WHERE month < ${monthlyCutoff}::date`.execute(trx)
    const row = moved.rows[0]
    return {
      daily_cutoff: dailyCutoff,
      monthly_cutoff: monthlyCutoff,
      daily_rows_rolled_up: Number(row.rows),
      monthly_rows_touched: Number(row.monthly),
      downloads_rolled_up: Number(row.downloads),
      monthly_rows_deleted: Number(deleted.numAffectedRows ?? 0n),
    }
  })
}

/** Seconds between a failed retention run and its retry (an outage should not cost a day). */
export const PRUNE_RETRY_SECONDS = 300

/**
 * Runs {@link pruneStats} once shortly after start (after `firstDelaySeconds`, default 60)
 * and then every 24 hours, on unref'd timers. A failed run (the database down, say) is
 * logged and retried after `retrySeconds` (default {@link PRUNE_RETRY_SECONDS}, 5 minutes)
 * until one succeeds; the 24 hours count from the last success. Returns a function that
 * stops it.
 */
export function startDailyPrune(
  database: Pick<Database, 'db'>,
  policy: RetentionPolicy,
  options: {
    logger?: StatsLogger
    firstDelaySeconds?: number
    retrySeconds?: number
    onResult?: (result: PruneResult) => void
    onError?: (error: unknown) => void
  } = {},
): () => void {
  const retrySeconds = options.retrySeconds ?? PRUNE_RETRY_SECONDS
  let stopped = false
  let timer: NodeJS.Timeout | undefined
  const schedule = (seconds: number) => {
    if (stopped) return
    timer = setTimeout(() => void run(), seconds * 1000)
    timer.unref()
  }
  const run = async () => {
    if (stopped) return
    try {
      const result = await pruneStats(database, policy)
      options.logger?.info?.({...result}, 'stats: retention applied')
      options.onResult?.(result)
      schedule(86_400)
    } catch (error) {
      options.logger?.error({err: errorMessage(error)}, `stats: applying the retention policy failed; will retry in ${retrySeconds} s`)
      options.onError?.(error)
      schedule(retrySeconds)
    }
  }
  schedule(options.firstDelaySeconds ?? 60)
  return () => {
    stopped = true
    clearTimeout(timer)
  }
}
