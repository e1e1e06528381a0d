/**
 * Signed mirror URLs (src/lib/sign.ts): `mirror.sign_scheme` (null: none;
 * `nginx_secure_link_md5`), its secret, and how long a signed URL stays valid.
 */
import {type Kysely, sql} from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE mirror ADD COLUMN sign_scheme text CHECK (sign_scheme IN ('nginx_secure_link_md5'))`.execute(db)
  await sql`ALTER TABLE mirror ADD COLUMN sign_secret text`.execute(db)
  await sql`ALTER TABLE mirror ADD COLUMN sign_ttl_seconds integer NOT NULL DEFAULT 21600 CHECK (sign_ttl_seconds > 0)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const column of ['sign_ttl_seconds', 'sign_secret', 'sign_scheme']) await sql`ALTER TABLE mirror DROP COLUMN IF EXISTS ${sql.id(column)}`.execute(db)
}
