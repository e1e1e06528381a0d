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
      const m = await add('m.test', {exclude_patterns: ['**/*.src.rpm']})
      const other = await add('other.test')
      await seedHoldings(db, m, other)
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
