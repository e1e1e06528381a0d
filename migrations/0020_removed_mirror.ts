/**
 * Removed mirrors stay known (`mb mirror remove`): one row per removal with the mirror's id at
 * the time, its name, its URLs (credentials redacted), when and by whom (the OS user that ran
 * the command). Mirror ids are reused (the add path takes the lowest free id), so `mirror_id`
 * is not unique: `mb stats` names a count of an id that no mirror holds now, or of a retired
 * id (`-id`), from these rows ("NAME (removed)") instead of `#id`.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE removed_mirror (
      id serial PRIMARY KEY,
      mirror_id smallint NOT NULL,
      identifier text NOT NULL,
      http_url text,
      https_url text,
      rsync_url text,
      ftp_url text,
      removed_at timestamptz NOT NULL DEFAULT now(),
      removed_by text NOT NULL
    )`.execute(db)
  await sql`CREATE INDEX removed_mirror_mirror_id ON removed_mirror (mirror_id, removed_at)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE removed_mirror`.execute(db)
}
