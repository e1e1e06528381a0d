/**
 * Writing download counts to `stats_daily`: batches of entries, one multi-row upsert each
 * (`INSERT … SELECT FROM json_to_recordset(…) ON CONFLICT DO UPDATE SET downloads =
 * stats_daily.downloads + EXCLUDED.downloads`). Upserts add, so several replicas flushing
 * into one PostgreSQL add up.
 *
 * A batch PostgreSQL refuses for a value of some row (a data error, which would fail again
 * at every retry) is bisected: written in halves, and halves of halves, around the rows it
 * refuses; those are dropped alone and reported. Any other error (connection, resources)
 * stops the write: what was not written is handed back to be retried.
 */
import {sql} from 'kysely'
import type {Database} from '../db/index.js'
import type {Pacer} from './pacing.js'
import type {Entry} from './pending.js'

/** What {@link writeBatches} did. */
interface Written {
  /** Rows written. */
  written: number
  /** Upsert statements that wrote rows (one per batch, more where a batch was bisected). */
  statements: number
  /** Set when an error that is not a row error stopped the write: the error, and the entries not written. */
  failure?: {error: unknown; rest: Entry[]}
}

/** What {@link writeAround} did with a batch PostgreSQL partly refused. */
interface WrittenAround {
  /** Rows written. */
  written: number
  /** Upsert statements that wrote rows. */
  statements: number
  /** Rows refused alone (dropped), and the last such refusal. */
  rejected: Entry[]
  rowError: unknown
  /** Rows not tried because `failure` (not a row error) stopped the batch. */
  retained: Entry[]
  failure?: unknown
}

/**
 * Writes `entries` in batches of `batchSize`, one upsert each, waiting between batches as
 * `pacer` says. A batch refused for a row's value is bisected ({@link writeAround}); the rows
 * refused alone go to `onRejected` (with the last refusal) and the write goes on.
 */
export async function writeBatches(database: Pick<Database, 'db'>, entries: Entry[], batchSize: number, pacer: Pacer, onRejected: (rows: Entry[], error: unknown) => void): Promise<Written> {
  let written = 0
  let statements = 0
  for (let i = 0; i < entries.length; i += batchSize) {
    const batch = entries.slice(i, i + batchSize)
    const started = performance.now()
    try {
      await upsertDaily(database, batch)
      written += batch.length
      statements += 1
    } catch (first) {
      if (!isRowError(first)) return {written, statements, failure: {error: first, rest: entries.slice(i)}}
      // PostgreSQL refused a value of some row (not the connection): write the batch around
      // the rows it refuses, and drop those alone (reported as lost).
      const split = await writeAround(database, batch, first)
      written += split.written
      statements += split.statements
      if (split.rejected.length > 0) onRejected(split.rejected, split.rowError)
      if (split.failure !== undefined) return {written, statements, failure: {error: split.failure, rest: [...split.retained, ...entries.slice(i + batchSize)]}}
      continue
    }
    if (i + batchSize < entries.length) await pacer.afterBatch(started)
  }
  return {written, statements}
}

/**
 * After `batch` failed with `rowError` ({@link isRowError}): writes it in halves, and halves
 * of halves, around the rows PostgreSQL refuses; a refused single row is rejected. Stops at
 * the first error that is not a row error: what was not written yet is then `retained`,
 * with that error as `failure`.
 */
async function writeAround(database: Pick<Database, 'db'>, batch: Entry[], rowError: unknown): Promise<WrittenAround> {
  const out: WrittenAround = {written: 0, statements: 0, rejected: [], rowError, retained: []}
  const split = (part: Entry[]) => [part.slice(part.length >> 1), part.slice(0, part.length >> 1)]
  if (batch.length === 1) out.rejected.push(batch[0])
  const stack: Entry[][] = batch.length > 1 ? split(batch) : []
  while (stack.length > 0) {
    const part = stack.pop()!
    if (out.failure !== undefined) {
      out.retained.push(...part)
      continue
    }
    try {
      await upsertDaily(database, part)
      out.written += part.length
      out.statements += 1
    } catch (error) {
      if (!isRowError(error)) {
        out.failure = error
        out.retained.push(...part)
      } else if (part.length === 1) {
        out.rejected.push(part[0])
        out.rowError = error
      } else {
        stack.push(...split(part))
      }
    }
  }
  return out
}

/**
 * True for an error PostgreSQL raised about a value of the statement (SQLSTATE class 22, data
 * exception, e.g. a string JSON cannot carry; class 23, integrity constraint violation): the
 * same rows would fail again. Connection, resource and server errors are not row errors:
 * those counts are kept and retried.
 */
function isRowError(error: unknown): boolean {
  const code = (error as {code?: unknown} | null)?.code
  return typeof code === 'string' && code.length === 5 && (code.startsWith('22') || code.startsWith('23'))
}

/**
 * One multi-row upsert of aggregated counts into `stats_daily` (adds, never overwrites). The
 * batch travels as one JSON array of the entries (`json_to_recordset`): `JSON.stringify` is
 * native, about a third of what building seven PostgreSQL array literals cost per key
 * (`unnest` of seven typed arrays cost PostgreSQL the same CPU per row, within the noise).
 * Rows are upserted in primary-key order (ORDER BY in the statement), which keeps concurrent
 * replicas from deadlocking; the collector hands the batches over path by path in path
 * order (./pending.ts), so that this sort only orders each path's few keys.
 */
async function upsertDaily(database: Pick<Database, 'db'>, batch: Entry[]): Promise<void> {
  const rows = JSON.stringify(batch)
  await sql`
    INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes, other_requests)
    SELECT day, path, "mirrorId", country, downloads, bytes, "otherRequests"
    FROM json_to_recordset(${rows}::json) AS x(day date, path text, "mirrorId" smallint, country char(2), downloads bigint, bytes bigint, "otherRequests" bigint)
    ORDER BY 1, 2, 3, 4
    ON CONFLICT (day, path, mirror_id, country) DO UPDATE SET
      downloads = stats_daily.downloads + EXCLUDED.downloads,
      bytes = stats_daily.bytes + EXCLUDED.bytes,
      other_requests = stats_daily.other_requests + EXCLUDED.other_requests`.execute(database.db)
}
