/**
 * The origin's meter: every response the origin delivers itself is counted by why, in a small
 * fixed set of reasons ({@link ORIGIN_METER_REASONS}, mapped from the `X-MB-Origin-Reason`
 * mb sends), for `mb_origin_bytes_total{reason}` and `mb_origin_requests_total{reason}`
 * (src/lib/operator/origin-metrics.ts), the `/mirrors` overview, and `stats_origin`
 * (migration 0031) per UTC day, which `mb stats origin` sets against the day's downloads
 * (docs/operations.md, "The origin's share").
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import {isoDay} from '../time.js'

/** The reasons the origin's deliveries are counted by. */
export const ORIGIN_METER_REASONS = ['no_mirror', 'origin_only', 'index_stale', 'small_file', 'fallback', 'rule', 'local_network', 'other'] as const

export type OriginMeterReason = (typeof ORIGIN_METER_REASONS)[number]

/** Each `X-MB-Origin-Reason` mb sends, by the meter reason it counts under. */
const METER_REASON: Readonly<Record<string, OriginMeterReason>> = {
  no_mirror: 'no_mirror',
  verify_failed: 'no_mirror',
  origin_only: 'origin_only',
  index_stale: 'index_stale',
  not_indexed: 'index_stale',
  small_file: 'small_file',
  origin_fallback: 'fallback',
  rule: 'rule',
  excluded_agent: 'rule',
  excluded_mime: 'rule',
  excluded_client: 'local_network',
}

/**
 * The meter reason of an `X-MB-Origin-Reason`: `no_mirror` (no eligible mirror holds the
 * file, or none passed a verified redirect's check), `origin_only`, `index_stale` (the disk
 * holds a version the index and so no mirror has yet, or a file not indexed yet),
 * `small_file`, `fallback` (the origin form `/_origin/PATH`), `rule` (a redirect rule, an
 * excluded User-Agent or MIME type), `local_network` (`select.exclude_clients`), else `other`.
 */
export function originMeterReason(reason: string): OriginMeterReason {
  return METER_REASON[reason] ?? 'other'
}

/** The unflushed origin counts in memory: per UTC day and meter reason (a few keys a day). */
export class OriginCounts {
  private counts = new Map<string, {requests: number; bytes: number}>()

  /** Counts one delivery at `time` (ms since the epoch, UTC) for `X-MB-Origin-Reason` `reason`, `bytes` body bytes sent. */
  add(time: number, reason: string, bytes: number): void {
    const key = `${isoDay(time)}\n${originMeterReason(reason)}`
    const known = this.counts.get(key)
    if (known === undefined) this.counts.set(key, {requests: 1, bytes})
    else {
      known.requests += 1
      known.bytes += bytes
    }
  }

  /**
   * Adds the counts to `stats_origin` in one upsert; on failure they are kept (added to any
   * counted meanwhile) and `onError` hears why. Never throws.
   */
  async flush(database: Pick<Database, 'db'>, onError: (error: unknown) => void): Promise<void> {
    if (this.counts.size === 0) return
    const taken = this.counts
    this.counts = new Map()
    const rows = [...taken].map(([key, c]) => {
      const [day, reason] = key.split('\n')
      return {day, reason, requests: c.requests, bytes: c.bytes}
    })
    try {
      await sql`INSERT INTO stats_origin (day, reason, requests, bytes)
        SELECT day, reason, requests, bytes FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(day date, reason text, requests bigint, bytes bigint)
        ON CONFLICT (day, reason) DO UPDATE SET requests = stats_origin.requests + excluded.requests, bytes = stats_origin.bytes + excluded.bytes`.execute(database.db)
    } catch (error) {
      for (const [key, c] of taken) {
        const known = this.counts.get(key)
        if (known === undefined) this.counts.set(key, c)
        else {
          known.requests += c.requests
          known.bytes += c.bytes
        }
      }
      onError(error)
    }
  }
}

/** One UTC day of the origin's share: bytes by reason beside all the bytes of the day's downloads. */
export interface OriginShareRow {
  /** 'YYYY-MM-DD' (UTC). */
  day: string
  /** Bytes of the day's downloads, redirected (the file size) or delivered (`stats_daily`). */
  downloadBytes: number
  /** Bytes the origin delivered itself (`stats_origin`). */
  originBytes: number
  /** originBytes / downloadBytes, 0..1 (0 when there were none). */
  share: number
  /** Bytes the origin delivered, by meter reason (every reason, 0 when none). */
  byReason: Record<OriginMeterReason, number>
}

/**
 * The origin's share per UTC day over the inclusive days `since`..`until` ('YYYY-MM-DD';
 * either may be absent), oldest first; days with neither downloads nor origin deliveries are
 * left out.
 * @throws whatever the database driver throws
 */
export async function queryOriginShare(database: Pick<Database, 'db'>, range: {since?: string; until?: string} = {}): Promise<OriginShareRow[]> {
  const since = range.since ?? null
  const until = range.until ?? null
  const origin = await sql<{day: string; reason: string; bytes: string | number}>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, reason, sum(bytes) AS bytes FROM stats_origin
    WHERE (${since}::date IS NULL OR day >= ${since}::date) AND (${until}::date IS NULL OR day <= ${until}::date)
    GROUP BY day, reason`.execute(database.db)
  const downloads = await sql<{day: string; bytes: string | number}>`
    SELECT to_char(day, 'YYYY-MM-DD') AS day, sum(bytes) AS bytes FROM stats_daily
    WHERE (${since}::date IS NULL OR day >= ${since}::date) AND (${until}::date IS NULL OR day <= ${until}::date)
    GROUP BY day`.execute(database.db)
  const days = new Map<string, OriginShareRow>()
  const row = (day: string) => {
    let r = days.get(day)
    if (r === undefined) {
      r = {day, downloadBytes: 0, originBytes: 0, share: 0, byReason: Object.fromEntries(ORIGIN_METER_REASONS.map((k) => [k, 0])) as Record<OriginMeterReason, number>}
      days.set(day, r)
    }
    return r
  }
  for (const d of downloads.rows) row(d.day).downloadBytes = Number(d.bytes)
  for (const o of origin.rows) {
    const r = row(o.day)
    r.byReason[(ORIGIN_METER_REASONS as readonly string[]).includes(o.reason) ? (o.reason as OriginMeterReason) : 'other'] += Number(o.bytes)
    r.originBytes += Number(o.bytes)
  }
  const rows = [...days.values()].sort((a, b) => a.day.localeCompare(b.day))
  for (const r of rows) r.share = r.downloadBytes > 0 ? Math.min(1, r.originBytes / r.downloadBytes) : 0
  return rows
}
