/**
 * `mb serve` (the compiled CLI, a child process) on the configured backend, for URLs as
 * clients write them and for the origin's truth at request time:
 * - dot segments are removed (RFC 3986 §5.2.4) while the path stays inside the root;
 * - `:` and the other pchars of RFC 3986 §3.3 stay literal in Location, Link, metalinks,
 *   mirror lists, directory redirects and autoindex links;
 * - `?meta4`/`?mirrorlist`/`?metalink` on a file on disk that is not indexed answer with the
 *   origin as the only source;
 * - `Accept` is negotiated with q-values, and a redirect says `Vary: Accept`;
 * - `serve.public_url` replaces Host in absolute URLs;
 * - a file rewritten at the origin, with no `mb index`, is never redirected to an old copy
 *   after one second, is described by its new size, and is re-indexed (hashes included).
 */
import {createHash} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {headerLines, request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const GB = '81.2.69.142'
const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const PUBLIC = 'https://dl.example.org/mb/'
const COLON_DIR = 'openSUSE:Backports:SLE-15'
const COLON_FILE = `${COLON_DIR}/x:y@1+2=3,$;!'()*.rpm`

const hex = (algo: string, data: Buffer) => createHash(algo).update(data).digest('hex')

describe(`mb serve: URLs as clients write them, the origin's truth (${backend})`, function () {
  let database: TestDatabase
  let root: string
  let config: string
  let serve: ServeProcess
  const big = Buffer.alloc(10_000, 'b')
  const changing = Buffer.alloc(20_000, 'o')
  const get = (target: string, headers: Record<string, string> = {}, method = 'GET') => request(serve.port, target, {headers: {'X-Forwarded-For': GB, ...headers}, method})

  before(async () => {
    database = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-origin-truth-'))
    mkdirSync(join(root, 'dir'))
    mkdirSync(join(root, COLON_DIR))
    writeFileSync(join(root, 'big.iso'), big)
    writeFileSync(join(root, COLON_FILE), big)
    writeFileSync(join(root, 'changing.iso'), changing)
    writeFileSync(join(root, 'not-indexed.bin'), Buffer.alloc(7000, 'n'))
    const mtime = (p: string) => Math.floor(statSync(join(root, p)).mtimeMs / 1000)
    const db = await database.open()
    try {
      await db.db
        .insertInto('mirror')
        .values({id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/pub/', country: 'GB', continent: 'EU'} as any)
        .execute()
      for (const path of ['big.iso', COLON_FILE])
        await db.db
          .insertInto('file')
          .values({path, size: big.length, mtime: mtime(path), mirrors: [1]})
          .execute()
      // Hashed: a re-index of this file must hash it again.
      await db.db
        .insertInto('file')
        .values({
          path: 'changing.iso',
          size: changing.length,
          mtime: mtime('changing.iso'),
          mirrors: [1],
          md5: hex('md5', changing),
          sha1: hex('sha1', changing),
          sha256: hex('sha256', changing),
          piece_hash: 'sha256',
          hashed_size: changing.length,
          hashed_mtime: mtime('changing.iso'),
        } as any)
        .execute()
    } finally {
      await db.close()
    }
    config = join(root, '..', `${root.split('/').pop()}.yaml`)
    writeFileSync(config, `serve:\n  public_url: https://dl.example.org/mb\n  poll_seconds: 0.5\n`)
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--config', config, '--metrics-listen', '127.0.0.1:0'], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
    if (config) rmSync(config, {force: true})
  })

  describe('dot segments (RFC 3986 §5.2.4)', () => {
    for (const target of ['/./big.iso', '/dir/../big.iso', '/dir/./.././big.iso', '/dir/%2e%2e/big.iso']) {
      it(`${target} is redirected as /big.iso`, async () => {
        const res = await get(target)
        expect(res.status).to.equal(302)
        expect(res.headers.location).to.equal('http://gb.example.org/pub/big.iso')
      })
    }
    const refused: Array<[string, number]> = [
      ['/../big.iso', 400],
      ['/dir/../../big.iso', 400],
      ['/dir/%2e%2e/%2e%2e/etc/passwd', 400],
      ['/big.iso%00', 400],
      ['/dir/..%5c..%5cbig.iso', 400],
    ]
    for (const [target, status] of refused) {
      it(`${target} climbs out or is malformed: ${status}`, async () => {
        const res = await get(target)
        expect(res.status).to.equal(status)
        expect(res.headers.location).to.equal(undefined)
      })
    }
    it('/dir/.. lists the root', async () => {
      const res = await get('/dir/..')
      expect(res.status).to.equal(200)
      expect(res.body.toString()).to.include('<title>Index of /</title>')
    })
  })

  describe('":" and the other pchars stay literal (RFC 3986 §3.3)', () => {
    const encoded = `${COLON_DIR}/x:y@1+2=3,$;!'()*.rpm`
    it('in Location and Link', async () => {
      const res = await get(`/${encodeURIComponent(COLON_DIR)}/${encodeURIComponent("x:y@1+2=3,$;!'()*.rpm")}`)
      expect(res.status).to.equal(302)
      expect(res.headers.location).to.equal(`http://gb.example.org/pub/${encoded}`)
      expect(headerLines(res, 'link')).to.deep.equal([
        `<http://gb.example.org/pub/${encoded}>; rel=duplicate; pri=1; geo=gb`,
        `<${PUBLIC}${encoded}.meta4>; rel=describedby; type="application/metalink4+xml"`,
      ])
    })
    it('in the meta4 and the mirror list', async () => {
      const meta4 = (await get(`/${encoded}.meta4`)).body.toString()
      expect([...meta4.matchAll(/<url [^>]*>([^<]+)<\/url>/g)].map((m) => m[0])).to.deep.equal([
        `<url location="gb" priority="1">http://gb.example.org/pub/${encoded}</url>`,
        `<url priority="2">${PUBLIC}_origin/${encoded}</url>`,
      ])
      const list = JSON.parse((await get(`/${encoded}?mirrorlist`, {Accept: 'application/json'})).body.toString())
      expect(list.realms[0].mirrors[0].url).to.equal(`http://gb.example.org/pub/${encoded}`)
      expect(list.links.meta4).to.equal(`${PUBLIC}${encoded}.meta4`)
    })
    it('in directory redirects and autoindex links', async () => {
      const redirect = await get(`/${COLON_DIR}`)
      expect(redirect.status).to.equal(301)
      expect(redirect.headers.location).to.equal(`/${COLON_DIR}/`)
      const index = (await get('/')).body.toString()
      // A first segment with ':' would read as a scheme: the relative link starts with './'.
      expect(index).to.include(`<a href="./${COLON_DIR}/">${COLON_DIR}/</a>`)
      const inner = (await get(`/${COLON_DIR}/`)).body.toString()
      expect(inner).to.include(`<a href="./x:y@1+2=3,$;!&#39;()*.rpm">x:y@1+2=3,$;!&#39;()*.rpm</a>`)
    })
  })

  describe('content negotiation (RFC 9110 §12.5.1)', () => {
    it('a q=0 metalink type is refused: the client gets the redirect, which says Vary: Accept', async () => {
      const res = await get('/big.iso', {Accept: '*/*, application/metalink4+xml;q=0'})
      expect(res.status).to.equal(302)
      expect(res.headers.vary).to.equal('Accept, X-Forwarded-For, X-Forwarded-Proto')
    })
    it("aria2c's Accept gets the meta4", async () => {
      const res = await get('/big.iso', {Accept: '*/*,application/metalink4+xml,application/metalink+xml'})
      expect(res.status).to.equal(200)
      expect(res.headers['content-type']).to.equal('application/metalink4+xml')
      expect(res.headers.vary).to.equal('Accept')
    })
    it('a preferred JSON mirror list by q-value; HTML when JSON ranks lower', async () => {
      expect((await get('/big.iso?mirrorlist', {Accept: 'text/html;q=0.5, application/json'})).headers['content-type']).to.equal('application/json; charset=utf-8')
      expect((await get('/big.iso?mirrorlist', {Accept: 'text/html, application/json;q=0.9'})).headers['content-type']).to.equal('text/html; charset=utf-8')
    })
  })

  describe('a file on disk that is not indexed', () => {
    it('?meta4 and ?metalink describe it with the origin as the only source', async () => {
      const res = await get('/not-indexed.bin?meta4')
      expect(res.status).to.equal(200)
      expect(res.headers['content-type']).to.equal('application/metalink4+xml')
      const xml = res.body.toString()
      expect(xml).to.include('<size>7000</size>')
      expect([...xml.matchAll(/<url [^>]*>([^<]+)<\/url>/g)].map((m) => m[1])).to.deep.equal([`${PUBLIC}_origin/not-indexed.bin`])
      const v3 = await get('/not-indexed.bin?metalink')
      expect(v3.status).to.equal(200)
      expect(v3.headers['content-type']).to.equal('application/metalink+xml')
      expect(v3.body.length).to.be.below(3000)
    })
    it('?mirrorlist says the origin serves it', async () => {
      const res = await get('/not-indexed.bin?mirrorlist', {Accept: 'application/json'})
      expect(res.status).to.equal(200)
      const list = JSON.parse(res.body.toString())
      expect(list.size).to.equal(7000)
      expect(list.realms).to.deep.equal([])
      expect(list.origin).to.deep.equal({reason: 'not_indexed', detail: 'this file is new on the origin and is delivered by the origin until the mirrors hold it'})
    })
    it('a plain GET still delivers it, and a missing path is 404', async () => {
      const res = await get('/not-indexed.bin')
      expect(res.status).to.equal(200)
      expect(res.body.length).to.equal(7000)
      expect((await get('/missing.bin?meta4')).status).to.equal(404)
    })
  })

  describe('a file rewritten at the origin with no `mb index`', () => {
    it('is served by the origin and described by its new size within one second, then re-indexed with hashes', async () => {
      expect((await get('/changing.iso')).status).to.equal(302)
      const rewritten = Buffer.alloc(25_000, 'N')
      writeFileSync(join(root, 'changing.iso'), rewritten)
      await sleep(1100)
      const res = await get('/changing.iso')
      expect(res.status).to.equal(200)
      expect(res.headers.location).to.equal(undefined)
      expect(res.headers['x-mb-origin-reason']).to.be.oneOf(['index_stale', 'no_mirror'])
      expect(res.body.equals(rewritten)).to.equal(true)
      const meta4 = (await get('/changing.iso.meta4')).body.toString()
      expect(meta4).to.include('<size>25000</size>')
      expect(meta4).to.not.include('http://gb.example.org/')
      expect(meta4).to.not.include(hex('sha256', changing))
      expect(serve.output()).to.include('"msg":"origin index stale: changing.iso"')
      // Re-indexed by itself, hashes included.
      let row: any
      for (let i = 0; i < 100; i++) {
        const db = await database.open()
        try {
          row = await db.db.selectFrom('file').selectAll().where('path', '=', 'changing.iso').executeTakeFirst()
        } finally {
          await db.close()
        }
        if (row.sha256 === hex('sha256', rewritten)) break
        await sleep(200)
      }
      expect({size: Number(row.size), hashed_size: Number(row.hashed_size), sha256: row.sha256, mirrors: row.mirrors}).to.deep.equal({
        size: 25_000,
        hashed_size: 25_000,
        sha256: hex('sha256', rewritten),
        mirrors: [],
      })
      // The snapshot now has the new hashes: the meta4 carries them.
      let fresh = ''
      for (let i = 0; i < 50 && !fresh.includes(hex('sha256', rewritten)); i++) {
        fresh = (await get('/changing.iso.meta4')).body.toString()
        await sleep(100)
      }
      expect(fresh).to.include(`<hash type="sha-256">${hex('sha256', rewritten)}</hash>`)
      expect(fresh).to.include('<size>25000</size>')
    })

    it('counts it in mb_origin_index_stale_total', async () => {
      const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
      const text = await (await fetch(`${metricsUrl}/metrics`)).text()
      expect(text).to.match(/^mb_origin_index_stale_total 1$/m)
    })

    it("watches the origin's directories by default (serve.disk_check_watch) and reports the count and the limit", async () => {
      const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
      const text = await (await fetch(`${metricsUrl}/metrics`)).text()
      const watched = /^mb_origin_watched_directories\{state="watched"\} (\d+)$/m.exec(text)
      expect(Number(watched?.[1])).to.be.at.least(2) // the root and dir/
      expect(text).to.match(/^mb_origin_watched_directories\{state="unwatched"\} 0$/m)
      expect(serve.output()).to.include('"msg":"origin directories watched (inotify)"')
    })
  })
})
