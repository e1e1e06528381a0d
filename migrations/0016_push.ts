/**
 * Push sync (docs/push.md): a mirror that does not pull gets the origin tree pushed to it by
 * `mb push`.
 * - `push_url`: where to push, an rsync daemon module that accepts uploads
 *   (`rsync://host/module/`) or `user@host:path` over ssh; null = the mirror pulls.
 * - `push_include`: picomatch globs on origin paths; when non-empty only matching files are
 *   pushed to the mirror.
 * - `last_push_at` / `last_push_ok_at` / `last_push_error`: the outcome of the last push, as
 *   the `last_scan_*` columns record scans; `last_push_error` says why it failed.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror
    ADD COLUMN push_url text,
    ADD COLUMN push_include text[] NOT NULL DEFAULT '{}',
    ADD COLUMN last_push_at timestamptz,
    ADD COLUMN last_push_ok_at timestamptz,
    ADD COLUMN last_push_error text`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror DROP COLUMN push_url, DROP COLUMN push_include, DROP COLUMN last_push_at, DROP COLUMN last_push_ok_at, DROP COLUMN last_push_error`.execute(db)
}
