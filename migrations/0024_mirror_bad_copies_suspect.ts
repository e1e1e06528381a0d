/**
 * `mirror.bad_copies_suspect_at`: when content checks (`mb probe --content`, the background
 * checks of `mb serve`) had found at least `probe.suspect_bad_copies` corrupt copies on the
 * mirror (`mirror_file_bad`). While it is set the mirror is suspect, out of selection (reason
 * `bad_copies`), as after a refused scan: a mirror that corrupted that many files is likely
 * to have corrupted others that no check has read yet. A content round that finds fewer
 * (copies repaired, or gone at a scan) clears it, and so does
 * `mb mirror edit NAME --trust-scan`. Null = not suspect.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN bad_copies_suspect_at timestamptz`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN bad_copies_suspect_at`.execute(db)
}
