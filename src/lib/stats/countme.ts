/**
 * dnf's `countme` statistics: how many systems asked for each repository's metadata, per UTC
 * day x repo x arch x bucket (`stats_countme`, migration 0015), as MirrorManager counts them
 * for Fedora. dnf adds `&countme=N` to one metalink or mirror-list request per system and
 * week; N (1..4) says how old the system is. Only requests for a configured (repo, arch)
 * with a valid N are counted (src/lib/yum/routes.ts), so the keys stay few.
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import {isoDay} from '../time.js'

/** Most distinct unflushed keys kept: beyond it new keys are not counted (repo x arch x 4 x days). */
const MAX_KEYS = 10_000

/** The unflushed countme counts in memory. */
export class CountmeCounts {
  private counts = new Map<string, number>()

  /** Counts one request at `time` (ms since the epoch, UTC). */
  add(time: number, countme: {repo: string; arch: string; bucket: number}): void {
    const key = `${isoDay(time)}\n${countme.repo}\n${countme.arch}\n${countme.bucket}`
    const known = this.counts.get(key)
    if (known === undefined && this.counts.size >= MAX_KEYS) return
    this.counts.set(key, (known ?? 0) + 1)
  }

  /** Unflushed keys. */
  get keys(): number {
    return this.counts.size
  }

  /**
   * Adds the counts to `stats_countme` in one upsert; on failure they are kept (added to any
   * counted meanwhile) and `onError` hears why. Never throws.
   */
  async flush(database: Pick<Database, 'db'>, onError: (error: unknown) => void): Promise<void> {
    if (this.counts.size === 0) return
    const taken = this.counts
    this.counts = new Map()
    const rows = [...taken].map(([key, hits]) => {
      const [day, repo, arch, bucket] = key.split('\n')
      return {day, repo, arch, bucket: Number(bucket), hits}
    })
    try {
      await sql`INSERT INTO stats_countme (day, repo, arch, bucket, hits)
        SELECT day, repo, arch, bucket, hits FROM json_to_recordset(${JSON.stringify(rows)}::json) AS r(day date, repo text, arch text, bucket smallint, hits bigint)
        ON CONFLICT (day, repo, arch, bucket) DO UPDATE SET hits = stats_countme.hits + excluded.hits`.execute(database.db)
    } catch (error) {
      for (const [key, hits] of taken) this.counts.set(key, (this.counts.get(key) ?? 0) + hits)
      onError(error)
    }
  }
}

/** The countme counts of one (repo, arch): hits per bucket (index 0 = bucket 1) and their sum. */
export interface CountmeRow {
  repo: string
  arch: string
  buckets: [number, number, number, number]
  total: number
}

/**
 * The countme counts per (repo, arch) over the inclusive UTC days `since`..`until`
 * ('YYYY-MM-DD'; either may be absent), ordered by repo and arch.
 * @throws whatever the database driver throws
 */
export async function queryCountme(database: Pick<Database, 'db'>, range: {since?: string; until?: string} = {}): Promise<CountmeRow[]> {
  const result = await sql<{repo: string; arch: string; bucket: number; hits: string | number}>`
    SELECT repo, arch, bucket, sum(hits) AS hits FROM stats_countme
    WHERE (${range.since ?? null}::date IS NULL OR day >= ${range.since ?? null}::date) AND (${range.until ?? null}::date IS NULL OR day <= ${range.until ?? null}::date)
    GROUP BY repo, arch, bucket ORDER BY repo, arch, bucket`.execute(database.db)
  const rows: CountmeRow[] = []
  for (const r of result.rows) {
    let row = rows.at(-1)
    if (!row || row.repo !== r.repo || row.arch !== r.arch) {
      row = {repo: r.repo, arch: r.arch, buckets: [0, 0, 0, 0], total: 0}
      rows.push(row)
    }
    row.buckets[Number(r.bucket) - 1] = Number(r.hits)
    row.total += Number(r.hits)
  }
  return rows
}
