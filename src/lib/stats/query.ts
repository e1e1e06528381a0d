/**
 * Reading download statistics: `stats_daily` and `stats_monthly` together (so totals span
 * the retention boundary), grouped by file, directory, mirror, country, day or month.
 *
 * Semantics:
 * - `since`/`until` are inclusive UTC days. Daily rows match by day; a monthly rollup row
 *   matches when its month overlaps the range (it is counted whole: rollups have no days).
 * - `--by day` labels monthly rollup rows with their month ('YYYY-MM'), as they have no day.
 * - `total` is computed over the same filter in the same statement as the rows, so it always
 *   equals the sum of all groups. With `limit`, `rows` holds the first N groups and `other`
 *   the remainder, so `rows + other = total`.
 */
import {sql, type RawBuilder} from 'kysely'
import type {Database} from '../db/index.js'
import {UsageError} from '../errors.js'
import {resolveMirror} from '../mirrors/registry.js'
import {escapeLike, folderSql} from '../db/sql.js'
import {trimLeadingSlashes} from '../text.js'
import {isoDay} from '../time.js'

export const GROUPINGS = ['file', 'dir', 'mirror', 'country', 'day', 'month'] as const
export type Grouping = (typeof GROUPINGS)[number]

/** Download counts of one group (or a total). */
export interface StatsRow {
  /** The group: a path, a directory ('/' = the root), a mirror identifier ('origin' for the origin), a country ('--' unknown), a day or a month. */
  key: string
  downloads: number
  /** Bytes delivered for downloads (local bytes sent; the file size for redirects). */
  bytes: number
  /** HEADs, metalinks, hashes, mirror lists, 304s and Range continuations. */
  other_requests: number
}

export interface StatsQuery {
  by: Grouping
  /** Inclusive first UTC day, 'YYYY-MM-DD'. */
  since?: string
  /** Inclusive last UTC day, 'YYYY-MM-DD'. */
  until?: string
  /** Only paths starting with this prefix (no leading '/'). */
  pathPrefix?: string
  /** Only this mirror (identifier), or 'origin'. */
  mirror?: string
  /** At most this many groups in `rows`; the rest is summed in `other`. */
  limit?: number
}

export interface StatsResult {
  by: Grouping
  since: string | null
  until: string | null
  rows: StatsRow[]
  /** The groups beyond `limit`, summed (absent when nothing was cut). */
  other?: StatsRow & {groups: number}
  total: Omit<StatsRow, 'key'>
  /** How many groups matched in all. */
  groups: number
}

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/
const RELATIVE = /^(\d{1,5})([dwmy])$/

/**
 * Parses a day for `--since`/`--until`: 'YYYY-MM-DD', 'today', 'yesterday', or a span back
 * from today (UTC): `7d` (days), `2w` (weeks), `3m` (months), `1y` (years); `0d` is today.
 * @returns the UTC day 'YYYY-MM-DD'
 * @throws UsageError naming the flag and the accepted forms
 */
export function parseDay(value: string, flag: string, now: Date = new Date()): string {
  const v = value.trim().toLowerCase()
  const y = now.getUTCFullYear()
  const m = now.getUTCMonth()
  const d = now.getUTCDate()
  if (v === 'today') return isoDay(Date.UTC(y, m, d))
  if (v === 'yesterday') return isoDay(Date.UTC(y, m, d - 1))
  const rel = RELATIVE.exec(v)
  if (rel) {
    const n = Number(rel[1])
    const unit = rel[2]
    const ms = unit === 'd' ? Date.UTC(y, m, d - n) : unit === 'w' ? Date.UTC(y, m, d - 7 * n) : unit === 'm' ? Date.UTC(y, m - n, d) : Date.UTC(y - n, m, d)
    return isoDay(ms)
  }
  const abs = DATE.exec(v)
  if (abs) {
    const ms = Date.UTC(Number(abs[1]), Number(abs[2]) - 1, Number(abs[3]))
    if (isoDay(ms) === v && Number(abs[1]) >= 1970) return v
  }
  throw new UsageError(`${flag} ${JSON.stringify(value)} is not a date. Use YYYY-MM-DD (UTC), today, yesterday, or a span back from today such as 7d, 2w, 3m or 1y.`, 'BAD_DATE')
}

/**
 * The mirror id for `--mirror NAME`: 0 for 'origin', else the mirror {@link resolveMirror} finds.
 * @throws MbError MIRROR_NOT_FOUND; UsageError AMBIGUOUS_MIRROR
 */
async function statsMirrorId(database: Pick<Database, 'db'>, name: string): Promise<number> {
  return name === 'origin' ? 0 : (await resolveMirror(database.db, name)).id
}

function keyExpr(by: Grouping, period: 'day' | 'month'): RawBuilder<string> {
  const col = sql.ref(period === 'day' ? 's.day' : 's.month')
  switch (by) {
    case 'file':
      return sql<string>`s.path`
    case 'dir':
      return folderSql('s.path', '/')
    case 'mirror':
      // A count of an id no mirror holds now is the last mirror removed with that id; a
      // retired id (-id) holds the counts of every mirror removed with it (migration 0020).
      return sql<string>`CASE WHEN s.mirror_id = 0 THEN 'origin' ELSE coalesce(m.identifier,
        (SELECT string_agg(r.identifier, ', ' ORDER BY r.removed_at) || ' (removed)' FROM removed_mirror r
          WHERE r.mirror_id = abs(s.mirror_id) AND (s.mirror_id < 0 OR r.removed_at = (SELECT max(q.removed_at) FROM removed_mirror q WHERE q.mirror_id = s.mirror_id))),
        '#' || s.mirror_id::text) END`
    case 'country':
      return sql<string>`s.country::text`
    case 'day':
      return period === 'day' ? sql<string>`to_char(${col}, 'YYYY-MM-DD')` : sql<string>`to_char(${col}, 'YYYY-MM')`
    case 'month':
      return sql<string>`to_char(${col}, 'YYYY-MM')`
  }
}

/**
 * Runs a statistics query (see the module doc for the semantics).
 * @throws UsageError for since > until or a bad limit; MbError MIRROR_NOT_FOUND for an unknown mirror
 */
export async function queryStats(database: Pick<Database, 'db'>, query: StatsQuery): Promise<StatsResult> {
  if (query.since && query.until && query.since > query.until) throw new UsageError(`--since ${query.since} is after --until ${query.until}. Swap them.`, 'BAD_DATE')
  if (query.limit !== undefined && (!Number.isInteger(query.limit) || query.limit < 1)) throw new UsageError('--limit must be a positive integer.', 'BAD_LIMIT')
  const mirrorId = query.mirror === undefined ? undefined : await statsMirrorId(database, query.mirror)
  const prefix = query.pathPrefix === undefined ? undefined : trimLeadingSlashes(query.pathPrefix)

  const part = (period: 'day' | 'month') => {
    const table = sql.table(period === 'day' ? 'stats_daily' : 'stats_monthly')
    const col = sql.ref(period === 'day' ? 's.day' : 's.month')
    const conds: RawBuilder<unknown>[] = [sql`true`]
    if (query.since) conds.push(period === 'day' ? sql`${col} >= ${query.since}::date` : sql`${col} >= date_trunc('month', ${query.since}::date)::date`)
    if (query.until) conds.push(sql`${col} <= ${query.until}::date`)
    if (prefix) conds.push(sql`s.path LIKE ${escapeLike(prefix) + '%'}`)
    if (mirrorId !== undefined) conds.push(sql`s.mirror_id = ${mirrorId}`)
    return sql`SELECT ${keyExpr(query.by, period)} AS key, s.downloads, s.bytes, s.other_requests
      FROM ${table} s ${query.by === 'mirror' ? sql`LEFT JOIN mirror m ON m.id = s.mirror_id` : sql``}
      WHERE ${sql.join(conds, sql` AND `)}`
  }
  const chronological = query.by === 'day' || query.by === 'month'
  const order = chronological ? sql`key ASC` : sql`downloads DESC, other_requests DESC, key ASC`
  const limit = query.limit === undefined ? sql`` : sql`LIMIT ${query.limit}`
  const result = await sql<{key: string; downloads: number; bytes: number; other_requests: number; groups: number; t_downloads: number; t_bytes: number; t_other: number}>`
    WITH u AS (${part('day')} UNION ALL ${part('month')}),
    g AS (SELECT key, sum(downloads)::bigint AS downloads, sum(bytes)::bigint AS bytes, sum(other_requests)::bigint AS other_requests FROM u GROUP BY key)
    SELECT key, downloads, bytes, other_requests,
      count(*) OVER ()::bigint AS groups,
      sum(downloads) OVER ()::bigint AS t_downloads, sum(bytes) OVER ()::bigint AS t_bytes, sum(other_requests) OVER ()::bigint AS t_other
    FROM g ORDER BY ${order} ${limit}`.execute(database.db)
  const rows: StatsRow[] = result.rows.map((r) => ({key: r.key, downloads: Number(r.downloads), bytes: Number(r.bytes), other_requests: Number(r.other_requests)}))
  const first = result.rows[0]
  const total = first ? {downloads: Number(first.t_downloads), bytes: Number(first.t_bytes), other_requests: Number(first.t_other)} : {downloads: 0, bytes: 0, other_requests: 0}
  const groups = first ? Number(first.groups) : 0
  const out: StatsResult = {by: query.by, since: query.since ?? null, until: query.until ?? null, rows, total, groups}
  if (groups > rows.length) {
    const shown = rows.reduce((a, r) => ({downloads: a.downloads + r.downloads, bytes: a.bytes + r.bytes, other_requests: a.other_requests + r.other_requests}), {
      downloads: 0,
      bytes: 0,
      other_requests: 0,
    })
    out.other = {
      key: '(other)',
      downloads: total.downloads - shown.downloads,
      bytes: total.bytes - shown.bytes,
      other_requests: total.other_requests - shown.other_requests,
      groups: groups - rows.length,
    }
  }
  return out
}
