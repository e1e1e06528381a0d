/**
 * The listings of `mb mirror show --files` read in bounded pieces: with globs, the rows are
 * read a few at a time (a folder larger than one read) and give the counts and pages that one
 * read gives; without globs, SQL counts per folder as `folderOf` does.
 */
import {expect} from 'chai'
import {type FileKind, type MirrorScope, mirrorFileFolders, mirrorFilesIn} from '../../src/lib/lookup/mirror-files.js'
import {folderOf} from '../../src/lib/text.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`mirror file listings read in pieces (${backend})`, () => {
  const store = useTestDatabase()
  let g: MirrorScope
  let plain: MirrorScope
  const big = Array.from({length: 30}, (_, i) => `big/f${String(i).padStart(2, '0')}.iso`)
  const paths = [
    ...big,
    ...Array.from({length: 10}, (_, i) => `big/x${i}.src.rpm`),
    ...Array.from({length: 5}, (_, i) => `big/skip-${i}.iso`),
    ...Array.from({length: 4}, (_, i) => `big/sub/s${i}.iso`),
    'other/o.iso',
    'top.iso',
    'top two é.iso',
    'a/b/c/d/deep.iso',
    'big/held.iso',
  ]
  const sizeOf = (path: string) => 100 + paths.indexOf(path)

  before(async () => {
    const db = store.database.db
    const add = async (identifier: string, extra: Record<string, unknown>) => {
      const row = await db
        .insertInto('mirror')
        .values({identifier, http_url: `http://${identifier}/`, ...extra} as any)
        .returning(['id', 'base_path', 'include_patterns', 'exclude_patterns'])
        .executeTakeFirstOrThrow()
      return {...row, id: Number(row.id)} as MirrorScope
    }
    g = await add('g.test', {include_patterns: ['big/**', 'top*'], exclude_patterns: ['**/*.src.rpm']})
    plain = await add('plain.test', {})
    await db
      .insertInto('file')
      .values(paths.map((path) => ({path, size: sizeOf(path), mtime: 1_700_000_000, mirrors: path === 'big/held.iso' ? [g.id] : []})))
      .execute()
  })

  const scan = {include: [], exclude: ['**/skip-*']}

  it('counts per folder with globs, a few rows per read, as one read does', async () => {
    const db = store.database.db
    const expected = [
      {folder: '', files: 2, bytes: sizeOf('top.iso') + sizeOf('top two é.iso')},
      {folder: 'big', files: 30, bytes: big.reduce((n, p) => n + sizeOf(p), 0)},
      {folder: 'big/sub', files: 4, bytes: [0, 1, 2, 3].reduce((n, i) => n + sizeOf(`big/sub/s${i}.iso`), 0)},
    ]
    for (const readRows of [1, 3, 7, 10_000]) expect(await mirrorFileFolders(db, g, 'missing', scan, {readRows})).to.deep.equal(expected)
  })

  it('pages a folder larger than one read with globs, as one read does', async () => {
    const db = store.database.db
    for (const readRows of [3, 10_000]) {
      const pages = []
      for (let page = 1; page <= 6; page++) pages.push(await mirrorFilesIn(db, g, 'missing', scan, 'big', page, 7, {readRows}))
      expect(pages.map((p) => p.total)).to.deep.equal([30, 30, 30, 30, 30, 30])
      expect(pages.map((p) => p.files.length)).to.deep.equal([7, 7, 7, 7, 2, 0])
      expect(pages.flatMap((p) => p.files.map((f) => f.path))).to.deep.equal(big)
      expect(pages[0]!.files[0]).to.deep.equal({path: 'big/f00.iso', size: 100, mtime: '2023-11-14T22:13:20Z'})
    }
  })

  it('without globs, SQL counts and pages as the pass over every row does', async () => {
    const db = store.database.db
    const none = {include: [], exclude: []}
    const everything = {include: ['**'], exclude: []}
    const kind: FileKind = 'missing'
    const bySql = await mirrorFileFolders(db, plain, kind, none)
    expect(bySql).to.deep.equal(await mirrorFileFolders(db, plain, kind, everything, {readRows: 4}))
    expect(bySql.map((f) => f.folder)).to.deep.equal([...new Set(paths.map(folderOf))].sort())
    expect(bySql.reduce((n, f) => n + f.files, 0)).to.equal(paths.length)
    for (const folder of ['', 'big', 'a/b/c/d', 'nowhere']) {
      for (const page of [1, 2, 9]) expect(await mirrorFilesIn(db, plain, kind, none, folder, page, 4)).to.deep.equal(await mirrorFilesIn(db, plain, kind, everything, folder, page, 4, {readRows: 3}))
    }
    expect((await mirrorFilesIn(db, plain, kind, none, 'big', 2, 4)).files.map((f) => f.path)).to.deep.equal(['big/f04.iso', 'big/f05.iso', 'big/f06.iso', 'big/f07.iso'])
  })
})
