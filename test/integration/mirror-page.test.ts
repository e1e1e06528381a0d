/**
 * A page per mirror on `mb serve`, `GET /mirrors/NAME`: its public facts, then the files it
 * lacks, holds stale or holds corrupt per folder with counts (the same folders as `mb mirror
 * show --files`), one folder's files paged, the 404s that do not reveal a mirror the
 * overview leaves out, the 400s of bad input, the page in headless Chromium, and the folders
 * under `scan.exclude` (the bitset `mb serve` makes after its load) as `mb mirror show` counts them.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {seedHoldings} from '../helpers/mirror-holdings.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

/** Files lacking on m.test in pub/many/, for the paging. */
const MANY = 25

describe(`the page per mirror, GET /mirrors/NAME (${backend})`, function () {
  this.timeout(180_000)
  let t: TestDatabase
  let dir: string
  let serve: ServeProcess

  before(async () => {
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-mirror-page-'))
    const root = join(dir, 'root')
    // A top directory named `mirrors` stays reachable where no mirror has the name.
    mkdirSync(join(root, 'mirrors'), {recursive: true})
    writeFileSync(join(root, 'mirrors/notes.txt'), 'not a mirror\n')
    const database = await t.open()
    try {
      const db = database.db
      const add = async (identifier: string, extra: Record<string, unknown> = {}) =>
        (
          await db
            .insertInto('mirror')
            .values({identifier, http_url: `http://${identifier}/`, admin: 'Jo Admin', admin_email: `admin@${identifier}`, comment: 'secret remark', ...extra} as any)
            .returning('id')
            .executeTakeFirstOrThrow()
        ).id
      const m = await add('m.test', {country: 'de', exclude_patterns: ['**/*.src.rpm']})
      const other = await add('other.test')
      await add('campus.test', {client_prefixes: ['10.0.0.0/8']})
      await add('off.test', {enabled: false})
      await add('pfx.test', {prefix_only: true})
      await add('plain.test', {base_path: 'pub/'})
      await seedHoldings(
        db,
        m,
        other,
        Array.from({length: MANY}, (_, i) => `pub/many/f${String(i).padStart(2, '0')}.iso`),
      )
    } finally {
      await database.close()
    }
    serve = await startServe(['--root', root], t.env)
  })

  after(async () => {
    await serve?.stop()
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const json = async (query: string, name = 'm.test') => {
    const res = await request(serve.port, `/mirrors/${name}${query}`, {headers: {accept: 'application/json'}})
    expect(res.status, res.body.toString()).to.equal(200)
    expect(res.headers['content-type']).to.equal('application/json; charset=utf-8')
    return JSON.parse(res.body.toString())
  }

  it('gives the mirror as the overview shows it, and what it lacks per folder, as mb mirror show does', async () => {
    const page = await json('')
    const overview = JSON.parse((await request(serve.port, '/mirrors', {headers: {accept: 'application/json'}})).body.toString())
    expect(page.mirror).to.deep.equal(overview.mirrors.find((r: any) => r.name === 'm.test'))
    expect(page.mirror).to.deep.include({name: 'm.test', country: 'DE', files: 2, bad_copies: 1})
    expect(page).to.deep.include({files: 'missing', total: 2 + MANY, page: 1, page_size: 100, pages: 1, count: 3})
    const cli = await mb(['mirror', 'show', 'm.test', '--files', 'missing', '--json'], {env: t.env})
    expect(cli.code, cli.stderr).to.equal(0)
    expect(page.folders).to.deep.equal(cli.json().folders)
    expect(page.folders.map((f: any) => [f.folder, f.files])).to.deep.equal([
      ['', 1],
      ['pub', 1],
      ['pub/many', MANY],
    ])
    for (const kind of ['stale', 'bad']) {
      const shown = await mb(['mirror', 'show', 'm.test', '--files', kind, '--json'], {env: t.env})
      expect((await json(`?files=${kind}`)).folders, kind).to.deep.equal(shown.json().folders)
    }
    // Without globs, under a base path: counted per directory without path strings.
    const plain = await json('', 'plain.test')
    const shown = await mb(['mirror', 'show', 'plain.test', '--files', 'missing', '--json'], {env: t.env})
    expect(plain.folders).to.deep.equal(shown.json().folders)
    expect(plain.folders.map((f: any) => [f.folder, f.files])).to.deep.equal([
      ['pub', 4],
      ['pub/many', MANY],
      ['pub/sub', 2],
    ])
    expect((await json('?folder=pub', 'plain.test')).entries.map((f: any) => f.path)).to.deep.equal(['pub/a.iso', 'pub/b.iso', 'pub/c.iso', 'pub/x.src.rpm'])
    expect((await json('?folder=/', 'plain.test')).entries).to.deep.equal([])
    const body = JSON.stringify(page)
    expect(body).to.not.match(/admin|secret|campus|off\.test|pfx\.test|prefix/)
  })

  it("pages one folder's files, with the mirror's copy of a stale one", async () => {
    const second = await json('?folder=pub/many&page=2&page_size=10')
    expect(second).to.deep.include({folder: 'pub/many', count: MANY, page: 2, page_size: 10, pages: 3})
    expect(second.entries.map((f: any) => f.path)).to.deep.equal(Array.from({length: 10}, (_, i) => `pub/many/f${String(10 + i).padStart(2, '0')}.iso`))
    expect((await json('?folder=pub/many&page=3&page_size=10')).entries).to.have.length(5)
    expect((await json('?folder=pub/many&page=9&page_size=10')).entries).to.deep.equal([])
    // `?page=` alone pages by the page's own 100 rows, as its first page shows them.
    expect(await json('?folder=pub/many&page=1')).to.deep.include({page: 1, page_size: 100, pages: 1})
    expect((await json('?folder=/&page_size=5')).entries).to.deep.equal([{path: 'top.iso', size: 7000, mtime: '2023-11-14T22:13:26Z'}])
    const stale = await json('?files=stale&folder=/pub/')
    expect(stale.entries).to.deep.equal([{path: 'pub/b.iso', size: 2000, mtime: '2023-11-14T22:13:21Z', mirror_size: 5, mirror_mtime: '2020-09-13T12:26:40Z'}])
    expect((await json('?files=bad&folder=pub/sub')).entries.map((f: any) => f.path)).to.deep.equal(['pub/sub/d.iso'])
    expect((await json('?folder=pub/sub')).entries).to.deep.equal([])
  })

  it('is 404 for an unknown mirror and for one the overview leaves out, and serves the tree beside them', async () => {
    for (const name of ['nobody.test', 'campus.test', 'off.test', 'pfx.test']) {
      const res = await request(serve.port, `/mirrors/${name}`)
      expect(res.status, name).to.equal(404)
      expect(res.body.toString()).to.equal(`Not found: no mirror named ${name} is listed on /mirrors.\n`)
    }
    const file = await request(serve.port, '/mirrors/notes.txt')
    expect(file.status).to.equal(200)
    expect(file.body.toString()).to.equal('not a mirror\n')
  })

  it('refuses bad ?files, ?folder and paging with a clear 400', async () => {
    const bad = async (query: string) => {
      const res = await request(serve.port, `/mirrors/m.test${query}`)
      expect(res.status, query).to.equal(400)
      return res.body.toString()
    }
    expect(await bad('?files=lost')).to.equal('Bad request: ?files= must be one of missing, stale, bad.\n')
    expect(await bad('?folder=../etc')).to.match(/^Bad request: \?folder= must be a directory of the tree/)
    expect(await bad('?folder=nowhere')).to.equal('Bad request: ?folder= must be a folder of the tree; /nowhere holds no file.\n')
    expect(await bad('?folder=%zz')).to.equal('Bad request: ?folder= is not percent-encoded UTF-8.\n')
    expect(await bad('?folder=%FC')).to.equal('Bad request: ?folder= is not percent-encoded UTF-8.\n')
    expect(await bad('?folder=%00')).to.equal('Bad request: ?folder= must not contain NUL or backslashes.\n')
    expect(await bad('?files=%zz')).to.equal('Bad request: ?files= must be one of missing, stale, bad.\n')
    expect(await bad('?page=0')).to.equal('Bad request: ?page= must be a whole number from 1 to 999999.\n')
    expect(await bad('?page_size=1001')).to.equal('Bad request: ?page_size= must be a whole number from 1 to 1000.\n')
  })

  it('is linked from /mirrors and drawn in headless Chromium', async function () {
    requireBinary(this, 'chromium', 'chromium')
    const overview = (await request(serve.port, '/mirrors')).body.toString()
    expect(overview).to.contain('<a href="mirrors/m.test">m.test</a>')
    const page = `http://127.0.0.1:${serve.port}/mirrors/m.test?folder=pub/many&page=2&page_size=10`
    const args = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', `--user-data-dir=${join(dir, 'profile')}`, '--dump-dom', page]
    const dom = spawnSync('chromium', args, {encoding: 'utf8', timeout: 120_000})
    expect(dom.status, dom.stderr).to.equal(0)
    expect(dom.stdout).to.contain('<h1>Mirror m.test</h1>')
    expect(dom.stdout).to.match(/<table id="mirror">[\s\S]*<td>m\.test<\/td><td>DE<\/td>/)
    expect(dom.stdout.match(/<tr><td>pub\/many\/f\d\d\.iso<\/td>/g)).to.have.length(10)
    expect(dom.stdout).to.contain('Page 2 of 3 · <a rel="prev" href="?files=missing&amp;folder=pub%2Fmany&amp;page=1&amp;page_size=10">previous</a>')
    expect(dom.stdout).to.not.match(/admin|secret|campus/)
  })
})

describe(`the page per mirror under scan.exclude (${backend})`, function () {
  this.timeout(180_000)
  let t: TestDatabase
  let dir: string
  let serve: ServeProcess
  let config: string

  before(async () => {
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-mirror-page-globs-'))
    mkdirSync(join(dir, 'root'))
    config = join(dir, 'mb.yaml')
    writeFileSync(config, "scan:\n  exclude: ['pub/many/f1*']\n")
    const database = await t.open()
    try {
      const add = async (identifier: string, extra: Record<string, unknown> = {}) =>
        (
          await database.db
            .insertInto('mirror')
            .values({identifier, http_url: `http://${identifier}/`, ...extra} as any)
            .returning('id')
            .executeTakeFirstOrThrow()
        ).id
      const m = await add('m.test')
      const other = await add('other.test')
      await add('plain.test', {base_path: 'pub/'})
      await seedHoldings(
        database.db,
        m,
        other,
        Array.from({length: MANY}, (_, i) => `pub/many/f${String(i).padStart(2, '0')}.iso`),
      )
    } finally {
      await database.close()
    }
    serve = await startServe(['--root', join(dir, 'root'), '--config', config], t.env)
  })

  after(async () => {
    await serve?.stop()
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('reads the globs from the bitset made after the load, as mb mirror show reads them', async () => {
    const res = await request(serve.port, '/mirrors/plain.test', {headers: {accept: 'application/json'}})
    expect(res.status, res.body.toString()).to.equal(200)
    const shown = await mb(['mirror', 'show', 'plain.test', '--files', 'missing', '--json', '--config', config], {env: t.env})
    expect(shown.code, shown.stderr).to.equal(0)
    const folders = JSON.parse(res.body.toString()).folders
    expect(folders).to.deep.equal(shown.json().folders)
    expect(folders.map((f: any) => [f.folder, f.files])).to.deep.equal([
      ['pub', 4],
      ['pub/many', MANY - 10],
      ['pub/sub', 2],
    ])
  })
})
