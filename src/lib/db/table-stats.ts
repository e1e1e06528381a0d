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
  /** Live rows: exact when counted (`exact`), else the statistics' estimate (`n_live_tup`, or `reltuples` before any). */
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
 * @throws whatever the driver throws (store unreachable)
 */
export async function tableStats(db: Kysely<DB>, exact = false): Promise<TableStats[]> {
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
    const rows = exact ? await countRows(db, r.table) : Math.round(estimate)
    result.push({
      table: r.table,
      rows,
      rows_exact: exact,
      dead_rows: Number(r.dead ?? 0),
      table_bytes: Number(r.table_bytes),
      total_bytes: Number(r.total_bytes),
      last_vacuum: isoOrNull(r.last_vacuum),
      last_analyze: isoOrNull(r.last_analyze),
    })
  }
  return result
}

/** The exact row count of `table` (a name from the catalog, quoted as an identifier). */
async function countRows(db: Kysely<DB>, table: string): Promise<number> {
  const {rows} = await sql<{n: string | number}>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(db)
  return Number(rows[0]?.n ?? 0)
}
