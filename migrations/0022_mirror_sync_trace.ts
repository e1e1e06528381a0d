/**
 * What a mirror's copy of the sync trace file says (`sync.trace_path`, src/lib/sync/trace.ts):
 *
 * - `mirror.synced_at`: the time in the mirror's trace, i.e. when the origin state the mirror
 *   last copied whole was written. Null until a probe round read a trace. It changes only when
 *   the mirror syncs, so a mirror in a steady state leaves its row untouched; the lag (how far
 *   it is behind the origin's own trace) is computed where it is shown or used.
 * - `mirror.sync_error`: why the last read of the trace failed (HTTP status, a file that is
 *   no trace, a time in the future); null when it was read.
 * - `mirror.sync_validator`: the trace answer's `ETag` (or `Last-Modified`), sent back as
 *   `If-None-Match` (or `If-Modified-Since`) so that an unchanged trace costs a `304`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN synced_at timestamptz, ADD COLUMN sync_error text, ADD COLUMN sync_validator text`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN synced_at, DROP COLUMN sync_error, DROP COLUMN sync_validator`.execute(db)
}
