/**
 * `file.mirror_only`: the origin no longer holds the file, but it lies under `serve.mirror_only`
 * and a mirror still holds its last indexed version, so the index keeps it (hashes, mirror set)
 * and `mb serve` redirects it (src/lib/origin/index.ts, docs/operations.md "Files the origin
 * pruned"). `mb index` sets it when the file leaves the tree and clears it when the file comes
 * back; the row goes when no mirror holds the file any more, or by `mb file forget`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE file ADD COLUMN mirror_only boolean NOT NULL DEFAULT false`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE file DROP COLUMN IF EXISTS mirror_only`.execute(db)
}
