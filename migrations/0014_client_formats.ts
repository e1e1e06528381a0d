/**
 * What BitTorrent (BEP 3) and zsync 0.6 need, computed by `mb index --hashes` beside the
 * other hashes and fresh under the same rule (`hashed_size`/`hashed_mtime`):
 *
 * - `file.sha1_pieces`: SHA-1 digests (hex, concatenated) of each `piece_size` piece, for the
 *   `.torrent` info dictionary (BitTorrent v1 pieces are SHA-1 whatever the Metalink pieces
 *   use). Null: not computed yet.
 * - `file.zsync_block_size`: the zsync block size in bytes when block sums were computed for
 *   this version (files from `zsync.min_size` up), else null. It lives on `file` so that the
 *   snapshot can tell that a `.zsync` exists without reading the sums.
 * - `file_zsync`: the block sums themselves, as zsyncmake writes them after the header (per
 *   block the trailing rsum bytes and the leading MD4 bytes of `hash_lengths`), kept out of
 *   `file` so that the rows every scan rewrites stay small (1.4 MB for a 700 MB file).
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE file ADD COLUMN sha1_pieces text, ADD COLUMN zsync_block_size integer`.execute(db)
  await sql`
    CREATE TABLE file_zsync (
      file_id integer PRIMARY KEY REFERENCES file(id) ON DELETE CASCADE,
      hash_lengths text NOT NULL,
      sums bytea NOT NULL
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS file_zsync`.execute(db)
  await sql`ALTER TABLE file DROP COLUMN sha1_pieces, DROP COLUMN zsync_block_size`.execute(db)
}
