/**
 * `mb mirror show NAME --files missing|stale|bad`: what one mirror lacks, holds stale or holds
 * corrupt, per folder with counts and, for one folder, paged; its globs and base path decide
 * what it is meant to carry.
 */
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {seedHoldings} from '../helpers/mirror-holdings.js'

describe(`mb mirror show --files (${backend})`, () => {
  let tdb: TestDatabase

  before(async () => {
    tdb = await createTestDatabase()
    const database = await tdb.open()
    try {
      const db = database.db
      const add = async (identifier: string, extra: Record<string, unknown> = {}) =>
        (
          await db
            .insertInto('mirror')
            .values({identifier, http_url: `http://${identifier}/`, ...extra} as any)
            .returning('id')
            .executeTakeFirstOrThrow()
        ).id
      const m = await add('m.test', {exclude_patterns: ['**/*.src.rpm'], last_scan_at: new Date('2026-12-01T09:00:00Z')})
      const other = await add('other.test', {last_scan_at: new Date('2026-12-01T09:00:00Z')})
      await add('new.test')
      await seedHoldings(db, m, other)
      // A content check of m.test's copy of pub/a.iso (1000 bytes, mtime 1,700,000,000), at a time with milliseconds.
      const a = await db.selectFrom('file').select('id').where('path', '=', 'pub/a.iso').executeTakeFirstOrThrow()
      await db
        .insertInto('mirror_file_check')
        .values({mirror_id: m, file_id: a.id, size: 1000, mtime: 1_700_000_000, next_piece: 0, checked_at: new Date('2026-12-01T10:00:00.123Z')} as any)
        .execute()
    } finally {
      await database.close()
    }
  })
  after(async () => tdb?.drop())

  const show = async (...args: string[]) => {
    const r = await mb(['mirror', 'show', 'm.test', '--json', ...args], {env: tdb.env})
    expect(r.code, r.stderr).to.equal(0)
    return r.json()
  }

  it('missing: per folder with counts, leaving out what its globs exclude and what it holds stale or corrupt', async () => {
    expect((await show('--files', 'missing')).folders).to.deep.equal([
      {folder: '', files: 1, bytes: 7000},
      {folder: 'pub', files: 1, bytes: 3000},
    ])
  })

  it('stale and bad: per folder, and the files of a folder with what the mirror has', async () => {
    expect((await show('--files', 'stale')).folders).to.deep.equal([{folder: 'pub', files: 1, bytes: 2000}])
    const stale = await show('--files', 'stale', '--folder', 'pub')
    expect(stale).to.deep.include({mirror: 'm.test', kind: 'stale', folder: 'pub', page: 1, pages: 1, total: 1})
    expect(stale.files).to.deep.equal([{path: 'pub/b.iso', size: 2000, mtime: '2023-11-14T22:13:21Z', mirror_size: 5, mirror_mtime: '2020-09-13T12:26:40Z'}])
    const bad = await show('--files', 'bad', '--folder', '/pub/sub/')
    expect(bad.files.map((f: any) => [f.path, f.piece])).to.deep.equal([['pub/sub/d.iso', 3]])
  })

  it('pages a folder, and prints a table for people', async () => {
    const page = await show('--files', 'missing', '--folder', 'pub', '--page-size', '1', '--page', '1')
    expect(page).to.deep.include({total: 1, pages: 1})
    const text = await mb(['mirror', 'show', 'm.test', '--files', 'missing'], {env: tdb.env})
    expect(text.stdout).to.contain("m.test: 2 missing file(s) in 2 folder(s); `--folder FOLDER` lists one folder's files\nfolder\tfiles\tsize\n")
    expect(text.stdout).to.match(/^pub\t1\t2\.9 KiB$/m)
    const bad = await mb(['mirror', 'show', 'm.test', '--files', 'lost'], {env: tdb.env})
    expect(bad.code).to.equal(2)
    // The folders are not paged: --page without --folder is refused, not ignored.
    const unpaged = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--page', '2'], {env: tdb.env})
    expect(unpaged.code).to.equal(2)
    expect(unpaged.stderr).to.contain('when using --page: --folder')
  })

  it('a folder with none of the kind says so without an empty table; a folder not in the tree is an error', async () => {
    const none = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--folder', 'pub/sub'], {env: tdb.env})
    expect(none.code, none.stderr).to.equal(0)
    expect(none.stdout.trim()).to.equal('m.test: 0 missing file(s) in pub/sub, page 1 of 1')
    const past = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--folder', 'pub', '--page', '3'], {env: tdb.env})
    expect(past.stdout.trim()).to.equal('m.test: 1 missing file(s) in pub, page 3 of 1')
    const typo = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--folder', 'pbu'], {env: tdb.env})
    expect(typo.code).to.equal(1)
    expect(typo.stderr).to.contain('--folder "pbu" is not a folder of the tree: the index holds no file in it')
    expect(typo.stdout).to.equal('')
    // `..` is refused as mb mirror list --path and the page's ?folder= refuse it.
    const dots = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--folder', 'pub/../pub'], {env: tdb.env})
    expect(dots.code).to.equal(2)
    expect(dots.stderr).to.contain('--folder "pub/../pub" must be a directory of the tree, without empty, "." or ".." segments')
  })

  it('says a mirror never scanned lacks every file because it was never scanned', async () => {
    const r = await mb(['mirror', 'show', 'new.test', '--files', 'missing'], {env: tdb.env})
    expect(r.stdout).to.contain('new.test: 7 missing file(s) in 3 folder(s) (never scanned: `mb scan new.test` finds what it holds);')
    const folder = await mb(['mirror', 'show', 'new.test', '--files', 'missing', '--folder', 'pub/sub'], {env: tdb.env})
    expect(folder.stdout).to.contain('new.test: 2 missing file(s) in pub/sub (never scanned: `mb scan new.test` finds what it holds), page 1 of 1\n')
    const stale = await mb(['mirror', 'show', 'new.test', '--files', 'stale'], {env: tdb.env})
    expect(stale.stdout).to.not.contain('never scanned')
  })

  it('prints the times of corrupt copies and content checks in whole seconds, as every other time', async () => {
    const bad = await mb(['mirror', 'show', 'm.test', '--files', 'bad', '--folder', 'pub/sub'], {env: tdb.env})
    expect(bad.stdout).to.match(/^pub\/sub\/d\.iso\t5000\t2023-11-14T22:13:24Z\t3 \(found \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$/m)
    const lookup = await mb(['file', 'lookup', 'pub/a.iso'], {env: tdb.env})
    expect(lookup.stdout).to.match(/^m\.test\t0\/0\t2026-12-01T10:00:00Z\t-\t-$/m)
    const show = await mb(['mirror', 'show', 'm.test'], {env: tdb.env})
    expect(show.stdout).to.match(/^content_checks: .*; last check 2026-12-01T10:00:00Z$/m)
  })

  it('refuses a --folder that can name no folder (exit 2) or names none of the index (exit 1), as ?folder= is 400 on the page', async () => {
    for (const folder of ['..', 'pub/../..', './pub', 'pub//sub', 'a\\b', 'x'.repeat(1025)]) {
      const r = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--folder', folder], {env: tdb.env})
      expect(r.code, `${folder}: ${r.stderr}`).to.equal(2)
      expect(r.stderr).to.match(/--folder ".*" (must be a directory of the tree|must not contain NUL or backslashes|is longer than 1024 bytes)/)
    }
    for (const folder of ['nosuch', 'pub/b.iso', 'pub/su']) {
      const r = await mb(['mirror', 'show', 'm.test', '--files', 'stale', '--folder', folder, '--json'], {env: tdb.env})
      expect(r.code, `${folder}: ${r.stderr}`).to.equal(1)
      expect(r.json().error).to.deep.include({
        code: 'FILE_NOT_FOUND',
        message: `--folder ${JSON.stringify(folder)} is not a folder of the tree: the index holds no file in it (\`mb mirror show m.test --files stale\` lists the folders)`,
      })
    }
    expect((await show('--files', 'missing', '--folder', '/')).total).to.equal(1)
    expect((await show('--files', 'bad', '--folder', 'pub')).total).to.equal(0)
  })
})
