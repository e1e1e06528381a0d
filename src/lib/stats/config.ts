/**
 * Settings of the `stats:` section of the config file. Keys are snake_case.
 *
 * ```yaml
 * stats:
 *   enabled: true                 # count downloads in `mb serve`
 *   flush_interval_seconds: 10    # how long a count may wait in memory (a crash loses at most this)
 *   max_pending_keys: 200000      # bound on unflushed (day, path, mirror, country) keys while the DB is down
 *   daily_retention_days: 90      # daily rows older than this roll up into monthly rows
 *   monthly_retention_months: 120 # monthly rows older than this are deleted
 * ```
 */
import {z} from 'zod'

export const StatsConfigSchema = z
  .object({
    enabled: z.boolean().default(true).describe('Count downloads in `mb serve` (the collector); false turns counting off.'),
    flush_interval_seconds: z.coerce.number().positive().max(3600).default(10).describe('Seconds between flushes of the in-memory counts to the database.'),
    max_pending_keys: z.coerce
      .number()
      .int()
      .min(1000)
      .max(100_000_000)
      .default(200_000)
      .describe('Most distinct unflushed keys kept in memory; beyond it the oldest are dropped (and counted as lost).'),
    daily_retention_days: z.coerce.number().int().min(1).max(36_500).default(90).describe('Days of daily rows kept before `mb stats prune` rolls them into monthly rows.'),
    monthly_retention_months: z.coerce.number().int().min(1).max(1200).default(120).describe('Months of monthly rows kept; older ones are deleted.'),
  })
  .strict()

export type StatsConfig = z.infer<typeof StatsConfigSchema>

/** The retention policy `pruneStats` applies. */
export interface RetentionPolicy {
  /** Daily rows for days before (today - dailyRetentionDays) roll up into monthly rows. */
  dailyRetentionDays: number
  /** Monthly rows for months before (this month - monthlyRetentionMonths) are deleted. */
  monthlyRetentionMonths: number
}

/** The retention policy of a `stats:` config section. */
export function retentionPolicy(config: StatsConfig): RetentionPolicy {
  return {dailyRetentionDays: config.daily_retention_days, monthlyRetentionMonths: config.monthly_retention_months}
}
