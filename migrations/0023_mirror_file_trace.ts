/**
 * Copies vouched for by a sync trace (`select.trust_trace`, src/lib/probe/trust.ts): one row
 * per mirror and file that a probe round put into the file's mirror set because the mirror's
 * trace (`mirror.synced_at`) is at least `sync.margin_seconds` newer than the file's indexing,
 * before any scan listed it.
 *
 * - `size`, `mtime`: the origin version vouched for (bytes, Unix seconds); a change of the file
 *   (`mb index`) drops the row with the mirror from its set.
 * - `trace_at`: the mirror's trace time that vouched for it; `added_at`: when.
 *
 * The next successful scan of the mirror covering the file decides: it keeps the copy in the
 * set when listed (the row goes: the copy is then held "by scan") and takes it out otherwise.
 * Like `mirror_file_stale`, the table is not tracked for snapshots: the mirror sets carry the
 * effect, and `mb file lookup` reads these rows to say "by trace".
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE mirror_file_trace (
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      file_id integer NOT NULL REFERENCES file(id) ON DELETE CASCADE,
      size bigint NOT NULL,
      mtime bigint NOT NULL,
      trace_at timestamptz NOT NULL,
      added_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (mirror_id, file_id)
    )`.execute(db)
  await sql`CREATE INDEX mirror_file_trace_file_idx ON mirror_file_trace (file_id)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE mirror_file_trace`.execute(db)
}
