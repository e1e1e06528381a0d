/**
 * Corrupt copies found by content checks (`mb probe --content`, src/lib/probe/content.ts):
 * one row per mirror and file whose copy, at the origin's size and mtime, returned a piece
 * whose SHA-1 differs from the index's `file.sha1_pieces`.
 *
 * - `size`, `mtime`: the origin version (bytes, Unix seconds) the copy was checked against.
 *   While the file still has that version and the mirror's scans still list its copy at it,
 *   the mirror stays out of `file.mirrors` (the scan's reconciler does not put it back); a
 *   scan listing another size or mtime, or none, drops the row, and so does a change of the
 *   origin file (`mb index`).
 * - `piece`: the 0-based index of the piece that did not match, re-checked first.
 * - `found_at`: when the mismatch was found (the first time, kept while it persists).
 *
 * Like `mirror_file_stale`, the table is not tracked for snapshots: the mirror sets carry
 * the effect, and the views that name a corrupt copy read these rows when asked.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE mirror_file_bad (
      mirror_id smallint NOT NULL REFERENCES mirror(id) ON DELETE CASCADE,
      file_id integer NOT NULL REFERENCES file(id) ON DELETE CASCADE,
      size bigint NOT NULL,
      mtime bigint NOT NULL,
      piece integer NOT NULL,
      found_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (mirror_id, file_id)
    )`.execute(db)
  await sql`CREATE INDEX mirror_file_bad_file_idx ON mirror_file_bad (file_id)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS mirror_file_bad`.execute(db)
}
