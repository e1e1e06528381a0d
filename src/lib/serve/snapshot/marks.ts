/**
 * Whether anything a snapshot holds changed since a transaction snapshot, in one statement
 * that reads no `file` row: the snapshot keeper's poll (docs/change-tracking.md, "Waking
 * up"). An idle poll is this statement alone, outside any transaction; only when it finds a
 * change does the keeper open a read view and read what changed (./snapshot.ts).
 *
 * A table is changed when it holds a row whose `txid` the snapshot could not see
 * (./unseen.ts), or, for the small tables a refresh re-reads whole (`mirror`,
 * `redirect_rule`, `file_link`, `mirror_file_bad`), when its row count differs from the
 * count read with the snapshot: a write that only deletes leaves no newer row, but a set of
 * old rows that differs from the old set is a smaller one. `file` and `file_tombstone` are
 * large and have their txid index: each condition is the first index entry of a range
 * (`ORDER BY txid LIMIT 1`), a shape no plan answers faster by a sequential scan, whatever
 * the statistics say; an in-flight id is the range from it to itself, not an equality, which
 * would let the planner drop the ordering and stop at the first matching row of a scan.
 */
import {type SnapshotBounds, snapshotBounds, unseenCondition} from './unseen.js'

/** Row counts of the tables a refresh re-reads whole, as one transaction snapshot saw them. */
export interface TableCounts {
  mirrors: number
  rules: number
  links: number
  badCopies: number
}

/** What {@link marksStatement} tells. */
export interface Marks {
  /** The statement's own transaction snapshot (`pg_snapshot` text): what it saw. */
  snapshot: string
  counts: TableCounts
  /** Rows of `file` or `file_tombstone` written since. */
  files: boolean
  /** Rows of the small tables written since, by table. */
  newer: {mirrors: boolean; rules: boolean; links: boolean; badCopies: boolean}
}

/** Runs one statement; its rows as arrays of column values. */
export interface StatementRunner {
  query(text: string): Promise<unknown[][]>
}

const SMALL_TABLES: ReadonlyArray<[keyof TableCounts, string]> = [
  ['mirrors', 'mirror'],
  ['rules', 'redirect_rule'],
  ['links', 'file_link'],
  ['badCopies', 'mirror_file_bad'],
]

/** The first `txid` of `table` in the index range `[from, to]` (to: unbounded when null), as a boolean "there is one". */
function rangeHasRow(table: string, from: string, to: string | null): string {
  const upper = to === null ? '' : ` AND txid <= '${to}'::xid8`
  return `(SELECT txid FROM ${table} WHERE txid >= '${from}'::xid8${upper} ORDER BY txid LIMIT 1) IS NOT NULL`
}

/** The rows of `table` that `since` could not see, by the txid index (see the module doc). */
function indexedUnseen(table: string, since: SnapshotBounds): string {
  return [rangeHasRow(table, since.xmax, null), ...since.xip.map((id) => rangeHasRow(table, id, id))].join(' OR ')
}

/**
 * The one statement of a poll: its snapshot, then per small table its row count and whether a
 * row is newer than `since` (`pg_snapshot` text), then whether `file` or `file_tombstone`
 * holds a row newer than `since`. The bounds are literals (./unseen.ts says why).
 */
function marksStatement(since: string): string {
  const bounds = snapshotBounds(since)
  const unseen = unseenCondition(bounds)
  // Named apart: a driver that returns rows as objects keeps one column per name.
  const columns = SMALL_TABLES.map((_, i) => `t${i}.n AS n${i}, coalesce(t${i}.newer, false) AS newer${i}`)
  const tables = SMALL_TABLES.map(([, table], i) => `(SELECT count(*)::int AS n, bool_or(${unseen}) AS newer FROM ${table}) t${i}`)
  const files = `${indexedUnseen('file', bounds)} OR ${indexedUnseen('file_tombstone', bounds)}`
  return `SELECT pg_current_snapshot()::text AS snapshot, ${columns.join(', ')}, ${files} AS files FROM ${tables.join(', ')}`
}

/**
 * Runs {@link marksStatement} on `runner` (a read view, or a single statement outside any
 * transaction) and parses its row.
 * @param since  the `pg_snapshot` text of the snapshot to compare with
 * @throws whatever the driver throws
 */
export async function readMarks(runner: StatementRunner, since: string): Promise<Marks> {
  const [row] = await runner.query(marksStatement(since))
  const counts = {} as TableCounts
  const newer = {} as Marks['newer']
  SMALL_TABLES.forEach(([key], i) => {
    counts[key] = Number(row[1 + 2 * i])
    newer[key] = Boolean(row[2 + 2 * i])
  })
  return {snapshot: String(row[0]), counts, newer, files: Boolean(row[1 + 2 * SMALL_TABLES.length])}
}

/** Whether the marks show any change against the counts a snapshot holds. */
export function changedSince(marks: Marks, known: TableCounts): boolean {
  return marks.files || SMALL_TABLES.some(([key]) => marks.newer[key] || marks.counts[key] !== known[key])
}
