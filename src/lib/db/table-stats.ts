/**
 * The tables of mb's schema as PostgreSQL's statistics see them (`mb db stats`): rows, size
 * on disk, dead rows and the last (auto)vacuum and analyze of each. The same query on
 * PostgreSQL and on the embedded store (PGlite is PostgreSQL, with its cumulative
 * statistics), from the catalog (`pg_class`) and `pg_stat_user_tables` (PostgreSQL
 * documentation, "The Cumulative Statistics System").
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from './schema.js'

/** One table of the schema, as `mb db stats --json` shows it. */
export interface TableStats {
  /** The table's name (schema `public`). */
  table: string
  /**
   * Live rows: exact when counted (`exact`, or a table the statistics know nothing of whose
   * heap is at most {@link COUNT_UNKNOWN_BYTES}), else the statistics' estimate (`n_live_tup`,
   * `reltuples`, or for a table never analyzed the planner's guess from its pages).
   */
  rows: number
  /** Whether `rows` was counted (`count(*)`) rather than estimated. */
  rows_exact: boolean
  /** Dead row versions not yet vacuumed (`n_dead_tup`). */
  dead_rows: number
  /** The table's own heap, bytes (`pg_relation_size`). */
  table_bytes: number
  /** Heap, TOAST and indexes together, bytes (`pg_total_relation_size`). */
  total_bytes: number
  /** The later of the last manual and automatic vacuum, ISO 8601 UTC; null when never. */
  last_vacuum: string | null
  /** The later of the last manual and automatic analyze, ISO 8601 UTC; null when never. */
  last_analyze: string | null
}

interface Row {
  table: string
  live: string | number | null
  estimate: string | number | null
  dead: string | number | null
  table_bytes: string | number
  total_bytes: string | number
  last_vacuum: Date | string | null
  last_analyze: Date | string | null
}

/**
 * Heap size in bytes up to which a table without statistics (`reltuples` -1: never vacuumed or
 * analyzed, as every table of the embedded store is, which runs no autovacuum and keeps
 * `n_live_tup` only while one process holds it) is counted rather than guessed: a count over
 * 16 MiB takes milliseconds, where the statistics would say 0 rows and the planner's guess
 * for a table of a few pages is off by hundreds (it assumes at least 10 pages).
 */
const COUNT_UNKNOWN_BYTES = 16 * 1024 * 1024

/** An ISO 8601 UTC time of a timestamp column (a Date from `pg`, a string or Date from PGlite), or null. */
function isoOrNull(value: Date | string | null): string | null {
  if (value === null) return null
  const date = value instanceof Date ? value : new Date(value)
  return Number.isNaN(date.getTime()) ? null : date.toISOString()
}

/**
 * Every ordinary table of the current schema, largest first (total bytes).
 * @param exact count each table's rows (`count(*)`: a full read of each table, seconds at
 *   millions of files) instead of taking the statistics' estimate
 * @param countUnknownBytes heap bytes up to which a table without statistics is counted
 *   anyway (default 16 MiB); a larger one gets the planner's estimate
 * @throws whatever the driver throws (store unreachable)
 */
export async function tableStats(db: Kysely<DB>, exact = false, countUnknownBytes = COUNT_UNKNOWN_BYTES): Promise<TableStats[]> {
  const {rows} = await sql<Row>`
    SELECT c.relname AS table, s.n_live_tup AS live, c.reltuples AS estimate, s.n_dead_tup AS dead,
      pg_relation_size(c.oid) AS table_bytes, pg_total_relation_size(c.oid) AS total_bytes,
      GREATEST(s.last_vacuum, s.last_autovacuum) AS last_vacuum,
      GREATEST(s.last_analyze, s.last_autoanalyze) AS last_analyze
    FROM pg_class c
    JOIN pg_namespace n ON n.oid = c.relnamespace
    LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
    WHERE c.relkind IN ('r', 'p') AND n.nspname = current_schema()
    ORDER BY pg_total_relation_size(c.oid) DESC, c.relname`.execute(db)
  const result: TableStats[] = []
  for (const r of rows) {
    // n_live_tup is 0 until the table's first vacuum or analyze reports, reltuples -1 before it.
    const estimate = Math.max(Number(r.live ?? 0), Number(r.estimate ?? 0), 0)
    const unknown = estimate === 0 && Number(r.estimate ?? -1) < 0 && Number(r.table_bytes) > 0
    const count = exact || (unknown && Number(r.table_bytes) <= countUnknownBytes)
    const rows = count ? await countRows(db, r.table) : unknown ? await plannerRows(db, r.table) : Math.round(estimate)
    result.push({
      table: r.table,
      rows,
      rows_exact: count,
      dead_rows: Number(r.dead ?? 0),
      table_bytes: Number(r.table_bytes),
      total_bytes: Number(r.total_bytes),
      last_vacuum: isoOrNull(r.last_vacuum),
      last_analyze: isoOrNull(r.last_analyze),
    })
  }
  return result
}

/**
 * The planner's row estimate for a full read of `table` (`EXPLAIN`, which reads no row): for
 * a table without statistics it scales the table's current pages by an assumed row width.
 */
async function plannerRows(db: Kysely<DB>, table: string): Promise<number> {
  const {rows} = await sql<{'QUERY PLAN': unknown}>`EXPLAIN (FORMAT JSON) SELECT * FROM ${sql.table(table)}`.execute(db)
  const raw = rows[0]?.['QUERY PLAN']
  const plan = (typeof raw === 'string' ? JSON.parse(raw) : raw) as Array<{Plan?: {'Plan Rows'?: number}}>
  return Math.round(Number(plan[0]?.Plan?.['Plan Rows'] ?? 0))
}

/** The exact row count of `table` (a name from the catalog, quoted as an identifier). */
async function countRows(db: Kysely<DB>, table: string): Promise<number> {
  const {rows} = await sql<{n: string | number}>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(db)
  return Number(rows[0]?.n ?? 0)
}
