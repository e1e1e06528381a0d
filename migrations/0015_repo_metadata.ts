/**
 * Package-repository metadata for dnf/yum metalinks and dnf's `countme` statistics.
 *
 * - `repomd_history`: every version of a `repodata/repomd.xml` that `mb index` or
 *   `mb serve --watch` saw, keyed by origin path and SHA-256: size in bytes, mtime and the
 *   repository's own `timestamp` in Unix seconds (UTC), and its MD5/SHA-1/SHA-512 (hex).
 *   `replaced_at` is when a newer version replaced it (null: the current one); `mirrors`
 *   holds the ids of the mirrors that held it at that moment. Versions replaced within the
 *   last `yum.alternates_days` become the metalink's `mm0:alternates`, and their mirrors stay
 *   listed, as MirrorManager keeps recently replaced file details.
 * - `file.signature`: `.asc` or `.sig` when that detached signature of the file is indexed
 *   beside it and smaller than it (`.asc` first), else null; kept by `mb index` for the
 *   paths it changes (src/lib/origin/signatures.ts), filled here for the rows there are.
 * - `stats_countme`: dnf's `countme=N` (N = 1..4, how old the system is, in dnf's weekly
 *   buckets) per UTC day x repo x arch x bucket, added up by `mb serve`'s flushes.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE file ADD COLUMN signature text`.execute(db)
  await sql`
    UPDATE file f SET signature = s.suffix FROM (
      SELECT DISTINCT ON (left(g.path, -4)) left(g.path, -4) AS target, right(g.path, 4) AS suffix, g.size
      FROM file g WHERE g.path LIKE '%.asc' OR g.path LIKE '%.sig'
      ORDER BY left(g.path, -4), right(g.path, 4) = '.sig') s
    WHERE f.path = s.target AND s.size < f.size`.execute(db)
  await sql`
    CREATE TABLE repomd_history (
      path text NOT NULL,
      sha256 text NOT NULL,
      size bigint NOT NULL,
      mtime bigint NOT NULL,
      repo_timestamp bigint NOT NULL,
      md5 text NOT NULL,
      sha1 text NOT NULL,
      sha512 text NOT NULL,
      mirrors smallint[] NOT NULL DEFAULT '{}',
      first_seen_at timestamptz NOT NULL DEFAULT now(),
      replaced_at timestamptz,
      PRIMARY KEY (path, sha256)
    )`.execute(db)
  await sql`
    CREATE TABLE stats_countme (
      day date NOT NULL,
      repo text NOT NULL,
      arch text NOT NULL,
      bucket smallint NOT NULL CHECK (bucket BETWEEN 1 AND 4),
      hits bigint NOT NULL DEFAULT 0,
      PRIMARY KEY (day, repo, arch, bucket)
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS stats_countme`.execute(db)
  await sql`DROP TABLE IF EXISTS repomd_history`.execute(db)
  await sql`ALTER TABLE file DROP COLUMN IF EXISTS signature`.execute(db)
}
