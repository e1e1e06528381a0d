/**
 * The SQL condition "this row was written by a transaction that the transaction snapshot
 * `since` could not see", for the `txid` columns of docs/change-tracking.md, with the
 * snapshot's bounds written into the statement as literals.
 *
 * Why literals: the planner estimates a condition from the values it can see. With the
 * bounds computed in the statement (`pg_snapshot_xmax($1)`, `ANY(ARRAY(SELECT
 * pg_snapshot_xip($1)))`) the in-flight list is an unknown array, and when every row of
 * `file` carries one `txid` (a tree written by one `mb index`), "equal to an unknown value"
 * is estimated as every row, so the planner read the whole table on every refresh. With
 * literals an idle refresh is estimated, and read, as the empty index range it is.
 */

/** A `pg_snapshot` taken apart: `xmax` and the in-flight ids, as decimal strings. */
export interface SnapshotBounds {
  xmax: string
  xip: string[]
}

const SNAPSHOT_TEXT = /^(\d+):(\d+):((?:\d+(?:,\d+)*)?)$/

/**
 * Parses `pg_current_snapshot()::text` (`xmin:xmax:xip,...`, PostgreSQL's
 * `pg_snapshot` output; full 64-bit transaction ids, so freezing and wraparound do not
 * change them).
 * @throws Error when `text` is not in that form (it always comes from the database)
 */
export function snapshotBounds(text: string): SnapshotBounds {
  const match = SNAPSHOT_TEXT.exec(text)
  if (!match) throw new Error(`not a pg_snapshot: ${JSON.stringify(text)}`)
  return {xmax: match[2], xip: match[3] === '' ? [] : match[3].split(',')}
}

/**
 * The condition on `column` (an `xid8`) that holds for rows written by a transaction that
 * committed at or after `since`'s xmax or was in flight when `since` was taken: exactly the
 * rows a view with that snapshot could not see. Every other transaction had ended before
 * `since`, so its rows were read then. The result is an index range (or two) on `column`,
 * with no parameters.
 */
export function unseenCondition(since: SnapshotBounds, column = 'txid'): string {
  const newer = `${column} >= '${since.xmax}'::xid8`
  if (since.xip.length === 0) return `(${newer})`
  return `(${newer} OR ${column} = ANY('{${since.xip.join(',')}}'::xid8[]))`
}
