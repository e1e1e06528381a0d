/**
 * One mirror's holdings as the tests of `mb mirror show --files` (test/integration/
 * mirror-files.test.ts) and of `GET /mirrors/NAME` (mirror-page.test.ts) read them: seven
 * files, of which mirror `m` holds pub/a.iso and pub/sub/e.iso, holds pub/b.iso stale (5 bytes
 * of an older version) and pub/sub/d.iso corrupt (piece 3); `other` holds every file. File i
 * has 1000 × (i + 1) bytes and mtime 1,700,000,000 + i.
 */
import type {Kysely} from 'kysely'
import type {DB} from '../../src/lib/db/schema.js'

/** The seven paths, in the order their sizes and mtimes follow. */
const HOLDING_PATHS = ['pub/a.iso', 'pub/b.iso', 'pub/c.iso', 'pub/x.src.rpm', 'pub/sub/d.iso', 'pub/sub/e.iso', 'top.iso']

/** Inserts the files (and `more` after them, held by `other` only) with `m`'s stale and corrupt copies. */
export async function seedHoldings(db: Kysely<DB>, m: number, other: number, more: readonly string[] = []): Promise<void> {
  const paths = [...HOLDING_PATHS, ...more]
  const rows = await db
    .insertInto('file')
    .values(paths.map((path, i) => ({path, size: 1000 * (i + 1), mtime: 1_700_000_000 + i, mirrors: path === 'pub/a.iso' || path === 'pub/sub/e.iso' ? [m, other] : [other]})))
    .returning(['id', 'path'])
    .execute()
  const id = (path: string) => Number(rows.find((r) => r.path === path)!.id)
  await db
    .insertInto('mirror_file_stale')
    .values({mirror_id: m, file_id: id('pub/b.iso'), size: 5, mtime: 1_600_000_000})
    .execute()
  await db
    .insertInto('mirror_file_bad')
    .values({mirror_id: m, file_id: id('pub/sub/d.iso'), size: 5000, mtime: 1_700_000_004, piece: 3})
    .execute()
}
