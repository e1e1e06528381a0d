/**
 * `mb serve` through a real child process on the configured backend (PGlite or PostgreSQL):
 * redirects with exact Location/headers/Link lines, local delivery (bytes, Range, 304),
 * 404, directory indexes, bad input, HTTPS via a trusted proxy; on PostgreSQL also live
 * changes (mirror disable, origin file rewritten).
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {sql} from 'kysely'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, headerLines, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'
const SE = '89.160.20.112'
const US = '216.160.83.56'

interface Seeded {
  root: string
  big: Buffer
  small: Buffer
  localOnly: Buffer
}

/** Origin tree + index rows: mirrors 1 gb (http+https), 2 se (http only), 3 us (http+https). */
async function seed(database: TestDatabase): Promise<Seeded> {
  const root = mkdtempSync(join(tmpdir(), 'mb-serve-root-'))
  const big = Buffer.alloc(10_000, 'b')
  const small = Buffer.from('tiny\n')
  const localOnly = Buffer.alloc(6000, 'l')
  mkdirSync(join(root, 'dir'), {recursive: true})
  writeFileSync(join(root, 'big.iso'), big)
  writeFileSync(join(root, 'se-only.bin'), big)
  writeFileSync(join(root, 'small.txt'), small)
  writeFileSync(join(root, 'local-only.dat'), localOnly)
  writeFileSync(join(root, 'dir', 'with space#1+x:y.iso'), big)
  writeFileSync(join(root, 'dir', '<b>&amp.txt'), small)
  writeFileSync(join(root, 'not-indexed.txt'), small)
  const db = await database.open()
  try {
    await db.db
      .insertInto('mirror')
      .values([
        {id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/pub/', https_url: 'https://gb.example.org/pub/', country: 'GB', continent: 'EU'},
        {id: 2, identifier: 'se.example.org', http_url: 'http://se.example.org/', https_url: null, country: 'SE', continent: 'EU'},
        {id: 3, identifier: 'us.example.org', http_url: 'http://us.example.org/mirror/', https_url: 'https://us.example.org/mirror/', country: 'US', continent: 'NA'},
      ] as any)
      .execute()
    const mtime = (p: string) => Math.floor(statSync(join(root, p)).mtimeMs / 1000)
    const rows = [
      {path: 'big.iso', size: big.length, mirrors: [1, 2, 3]},
      {path: 'se-only.bin', size: big.length, mirrors: [2]},
      {path: 'small.txt', size: small.length, mirrors: [1, 2, 3]},
      {path: 'local-only.dat', size: localOnly.length, mirrors: []},
      {path: 'dir/with space#1+x:y.iso', size: big.length, mirrors: [1]},
      {path: 'gone.iso', size: 50_000, mirrors: []},
    ]
    for (const r of rows)
      await db.db
        .insertInto('file')
        .values({path: r.path, size: r.size, mtime: r.path === 'gone.iso' ? 0 : mtime(r.path), mirrors: r.mirrors})
        .execute()
  } finally {
    await db.close()
  }
  return {root, big, small, localOnly}
}

describe(`mb serve (${backend})`, function () {
  let database: TestDatabase
  let seeded: Seeded
  let serve: ServeProcess
  const get = (target: string, headers: Record<string, string> = {}, method = 'GET') => request(serve.port, target, {headers, method})

  before(async () => {
    database = await createTestDatabase()
    seeded = await seed(database)
    serve = await startServe(['--root', seeded.root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'debug'], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (seeded) rmSync(seeded.root, {recursive: true, force: true})
  })

  it('redirects a GB client to the GB mirror with exact headers and Link lines', async () => {
    const res = await get('/big.iso', {'X-Forwarded-For': GB})
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.equal('http://gb.example.org/pub/big.iso')
    expect(res.headers['x-mb-mirror']).to.equal('gb.example.org')
    expect(res.headers['x-mb-realm']).to.equal('country')
    expect(res.headers['cache-control']).to.equal('private, no-store')
    const links = headerLines(res, 'link').filter((l) => l.includes('rel=duplicate'))
    expect(links, 'the mirrors only: no client prefers the origin').to.have.length(3)
    expect(links[0]).to.equal('<http://gb.example.org/pub/big.iso>; rel=duplicate; pri=1; geo=gb')
    expect(links[1]).to.equal('<http://se.example.org/big.iso>; rel=duplicate; pri=2; geo=se')
    expect(links[2]).to.equal('<http://us.example.org/mirror/big.iso>; rel=duplicate; pri=3; geo=us')
    expect(res.body.length).to.equal(0)
  })

  it('answers 304 to a conditional GET of a redirected file whose indexed version is not newer, and redirects a newer one', async () => {
    const stat = statSync(join(seeded.root, 'big.iso'))
    const mtime = new Date(Math.floor(stat.mtimeMs / 1000) * 1000)
    const same = await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': mtime.toUTCString()})
    expect([same.status, same.headers['last-modified'], same.headers.location, same.body.length]).to.deep.equal([304, mtime.toUTCString(), undefined, 0])
    const later = await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': new Date().toUTCString()})
    expect(later.status).to.equal(304)
    // A date later than the server's clock is invalid (RFC 9110 §13.1.3): ignored, so the redirect stays.
    const future = await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': new Date(Date.now() + 86_400_000).toUTCString()})
    expect([future.status, future.headers['x-mb-mirror']]).to.deep.equal([302, 'us.example.org'])
    const older = await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': new Date(mtime.getTime() - 1000).toUTCString()})
    expect([older.status, older.headers['x-mb-mirror']]).to.deep.equal([302, 'us.example.org'])
    // If-None-Match takes precedence (RFC 9110 §13.2.2), and mb has no tag of its own for a mirrored version.
    const tagged = await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': mtime.toUTCString(), 'If-None-Match': '"abc"'})
    expect(tagged.status).to.equal(302)
    expect((await get('/big.iso', {'X-Forwarded-For': US, 'If-Modified-Since': 'yesterday'})).status).to.equal(302)
  })

  it('answers pipelined requests in order: redirects written at the end of the turn, a 404 at once, each where it was asked', async () => {
    // One write holding five requests: node parses them in one turn; the redirects are
    // queued for its end (src/lib/serve/turn-batch.ts) and the 404 is not.
    const targets = ['/big.iso', '/nope.iso', '/big.iso', '/small.txt', '/big.iso']
    const raw = targets.map((t, i) => `GET ${t} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Forwarded-For: ${GB}\r\n${i === targets.length - 1 ? 'Connection: close\r\n' : ''}\r\n`).join('')
    const text = await new Promise<string>((resolve, reject) => {
      const socket = connect(serve.port, '127.0.0.1')
      const chunks: Buffer[] = []
      socket.on('data', (c) => chunks.push(c))
      socket.on('error', reject)
      socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')))
      socket.write(raw)
    })
    const answers = [...text.matchAll(/HTTP\/1\.1 (\d{3}) [^\r]*\r\n((?:[^\r]+\r\n)*)\r\n/g)].map((m) => ({status: Number(m[1]), location: /^Location: (.*)$/im.exec(m[2])?.[1]}))
    expect(answers.map((a) => a.status)).to.deep.equal([302, 404, 302, 200, 302])
    expect(answers.filter((a) => a.status === 302).map((a) => a.location)).to.deep.equal(Array(3).fill('http://gb.example.org/pub/big.iso'))
  })

  it('answers HEAD like GET', async () => {
    const res = await get('/big.iso', {'X-Forwarded-For': SE}, 'HEAD')
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.equal('http://se.example.org/big.iso')
    expect(res.headers['x-mb-realm']).to.equal('country')
  })

  it('sends SE and US clients to their own mirrors, and falls back to the continent', async () => {
    expect((await get('/big.iso', {'X-Forwarded-For': US})).headers.location).to.equal('http://us.example.org/mirror/big.iso')
    const gbForSeOnly = await get('/se-only.bin', {'X-Forwarded-For': GB})
    expect(gbForSeOnly.headers.location).to.equal('http://se.example.org/se-only.bin')
    expect(gbForSeOnly.headers['x-mb-realm']).to.equal('continent')
    const usForSeOnly = await get('/se-only.bin', {'X-Forwarded-For': US})
    expect(usForSeOnly.headers['x-mb-realm']).to.equal('world')
  })

  it('percent-encodes spaces and # in Location, and keeps + and : literal (RFC 3986 §3.3 pchar)', async () => {
    const res = await get('/dir/with%20space%231%2Bx%3Ay.iso', {'X-Forwarded-For': GB})
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.equal('http://gb.example.org/pub/dir/with%20space%231+x:y.iso')
  })

  it('an HTTPS request via the trusted proxy never gets an http:// Location', async () => {
    const viaProxy = {'X-Forwarded-For': SE, 'X-Forwarded-Proto': 'https'}
    const res = await get('/big.iso', viaProxy)
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.match(/^https:\/\//)
    expect(res.headers.location).to.not.include('se.example.org')
    for (const link of headerLines(res, 'link').filter((l) => l.includes('rel=duplicate'))) expect(link).to.match(/^<https:\/\//)
    // The only holder has no https_url: the origin delivers instead of downgrading.
    const seOnly = await get('/se-only.bin', viaProxy)
    expect(seOnly.status).to.equal(200)
    expect(seOnly.headers.location).to.equal(undefined)
    expect(seOnly.body.equals(seeded.big)).to.equal(true)
  })

  it('delivers small files locally with exact bytes, Content-Length and Last-Modified', async () => {
    const res = await get('/small.txt', {'X-Forwarded-For': GB})
    expect(res.status).to.equal(200)
    expect(res.body.equals(seeded.small)).to.equal(true)
    expect(res.headers['content-length']).to.equal(String(seeded.small.length))
    expect(res.headers['x-mb-origin-reason']).to.equal('small_file')
    expect(new Date(res.headers['last-modified']!).getTime()).to.equal(Math.floor(statSync(join(seeded.root, 'small.txt')).mtimeMs / 1000) * 1000)
  })

  it('delivers a file no mirror holds locally, with Range, 416 and 304', async () => {
    const full = await get('/local-only.dat')
    expect(full.status).to.equal(200)
    expect(full.body.equals(seeded.localOnly)).to.equal(true)
    expect(full.headers['x-mb-origin-reason']).to.equal('no_mirror')
    const part = await get('/local-only.dat', {Range: 'bytes=100-199'})
    expect(part.status).to.equal(206)
    expect(part.headers['content-range']).to.equal(`bytes 100-199/${seeded.localOnly.length}`)
    expect(part.body.equals(seeded.localOnly.subarray(100, 200))).to.equal(true)
    const unsatisfiable = await get('/local-only.dat', {Range: 'bytes=999999-'})
    expect(unsatisfiable.status).to.equal(416)
    const notModified = await get('/local-only.dat', {'If-Modified-Since': full.headers['last-modified']!})
    expect(notModified.status).to.equal(304)
    expect(notModified.body.length).to.equal(0)
    const future = await get('/local-only.dat', {'If-Modified-Since': new Date(Date.now() + 86_400_000).toUTCString()})
    expect([future.status, future.body.equals(seeded.localOnly)]).to.deep.equal([200, true])
    const head = await get('/local-only.dat', {}, 'HEAD')
    expect(head.status).to.equal(200)
    expect(head.headers['content-length']).to.equal(String(seeded.localOnly.length))
    expect(head.body.length).to.equal(0)
  })

  it('delivers a file on disk that is not indexed yet', async () => {
    const res = await get('/not-indexed.txt')
    expect(res.status).to.equal(200)
    expect(res.body.equals(seeded.small)).to.equal(true)
  })

  it('answers 404 for missing files, and for indexed files missing from disk', async () => {
    expect((await get('/nope.iso')).status).to.equal(404)
    expect((await get('/gone.iso', {'X-Forwarded-For': GB})).status).to.equal(404)
    expect((await get('/small.txt/')).status).to.equal(404)
  })

  it('redirects a directory to its slashed form and lists it with escaped names and encoded links', async () => {
    const bare = await get('/dir?x=1')
    expect(bare.status).to.equal(301)
    expect(bare.headers.location).to.equal('/dir/?x=1')
    const index = await get('/dir/')
    expect(index.status).to.equal(200)
    expect(index.headers['content-type']).to.match(/^text\/html/)
    const html = index.body.toString()
    expect(html).to.include('<a href="%3Cb%3E&amp;amp.txt">&lt;b&gt;&amp;amp.txt</a>')
    expect(html).to.include('<a href="./with%20space%231+x:y.iso">with space#1+x:y.iso</a>')
    expect(html).to.include('<td align="right">10000</td>')
    const root = await get('/')
    expect(root.status).to.equal(200)
    expect(root.body.toString()).to.include('<a href="dir/">dir/</a>')
  })

  describe('bad input gets a clean 4xx or a safe default, never a 500', () => {
    const cases: Array<[string, string, Record<string, string>, number]> = [
      ['encoded NUL', '/big.iso%00.txt', {}, 400],
      ['raw .. segments', '/dir/../../../etc/passwd', {}, 400],
      ['encoded .. segments', '/dir/%2e%2e/%2E%2E/etc/passwd', {}, 400],
      ['encoded slash and ..', '/dir/..%2f..%2fetc%2fpasswd', {}, 400],
      ['backslash traversal', '/dir/..%5c..%5cetc', {}, 400],
      ['malformed escape', '/big.iso%zz', {}, 400],
      ['?country= (ignored: off by default)', '/big.iso?country=ZZ', {'X-Forwarded-For': GB}, 302],
      ['huge query string', `/big.iso?${'q'.repeat(40_000)}`, {}, 431],
      ['huge path', `/${'p'.repeat(5000)}`, {}, 414],
    ]
    for (const [name, target, headers, status] of cases) {
      it(`${name} -> ${status}`, async () => {
        const res = await get(target, headers)
        expect(res.status).to.equal(status)
      })
    }

    it('unparsable X-Forwarded-For falls back to the proxy address (world pool)', async () => {
      const res = await get('/big.iso', {'X-Forwarded-For': 'garbage, <script>, 999.1.1.1'})
      expect(res.status).to.equal(302)
      expect(res.headers['x-mb-realm']).to.equal('world')
    })

    it('?country= does not override GeoIP unless serve.country_query allows the client', async () => {
      const res = await get('/big.iso?country=se', {'X-Forwarded-For': GB})
      expect(res.headers.location).to.equal('http://gb.example.org/pub/big.iso')
    })

    it('other methods get 405 with Allow', async () => {
      const res = await get('/big.iso', {}, 'POST')
      expect(res.status).to.equal(405)
      expect(res.headers.allow).to.equal('GET, HEAD')
    })

    it('never reached the catch-all', () => {
      expect(serve.output()).to.not.include('request failed')
      expect(serve.output()).to.not.match(/"st":5\d\d/)
    })
  })

  it('logs one JSON line per request at --log-level debug', async () => {
    await get('/big.iso?logcheck=1', {'X-Forwarded-For': GB})
    let line: any
    for (let i = 0; i < 50 && !line; i++) {
      line = serve
        .output()
        .split('\n')
        .filter((l) => l.includes('logcheck=1'))
        .map((l) => JSON.parse(l))[0]
      if (!line) await sleep(100)
    }
    expect(line).to.include({ip: GB, cc: 'GB', m: 'GET', st: 302, out: 'redirect', mirror: 'gb.example.org', realm: 'country'})
  })
  // On PGlite, mb serve shares its store through a socket, so the same live changes work.
  describe(`live changes (${backend})`, () => {
    /** Polls until `check` passes, at most `seconds`. */
    async function eventually(seconds: number, check: () => Promise<boolean>): Promise<boolean> {
      const deadline = Date.now() + seconds * 1000
      while (Date.now() < deadline) {
        if (await check()) return true
        await sleep(100)
      }
      return false
    }

    it('a mirror disabled with `mb mirror disable` stops receiving redirects within 5 s', async () => {
      expect((await get('/big.iso', {'X-Forwarded-For': GB})).headers['x-mb-mirror']).to.equal('gb.example.org')
      const disabled = await mb(['mirror', 'disable', 'gb.example.org', '--json'], {env: database.env})
      expect(disabled.code, disabled.stderr).to.equal(0)
      const moved = await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).headers['x-mb-mirror'] !== 'gb.example.org')
      expect(moved).to.equal(true)
      const res = await get('/big.iso', {'X-Forwarded-For': GB})
      expect(res.headers['x-mb-mirror']).to.equal('se.example.org')
      expect(res.headers['x-mb-realm']).to.equal('continent')
      expect((await mb(['mirror', 'enable', 'gb.example.org', '--no-probe'], {env: database.env})).code).to.equal(0)
      expect(await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).headers['x-mb-mirror'] === 'gb.example.org')).to.equal(true)
    })

    it('a mirror in a maintenance window set with `mb mirror edit --maintenance-until` gets no redirects until it ends', async () => {
      const until = new Date(Date.now() + 3_600_000).toISOString()
      expect((await mb(['mirror', 'edit', 'gb.example.org', '--maintenance-until', until], {env: database.env})).code).to.equal(0)
      expect(await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).headers['x-mb-mirror'] === 'se.example.org')).to.equal(true)
      expect((await mb(['mirror', 'edit', 'gb.example.org', '--maintenance-until', 'none'], {env: database.env})).code).to.equal(0)
      expect(await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).headers['x-mb-mirror'] === 'gb.example.org')).to.equal(true)
    })

    it('an origin file rewritten with a new size is served locally until a rescan', async () => {
      const changed = Buffer.alloc(12_345, 'n')
      writeFileSync(join(seeded.root, 'big.iso'), changed)
      // Re-index with the origin index library (what `mb index` runs).
      const indexDb = await database.open()
      try {
        const result = await indexOrigin(indexDb.db, seeded.root)
        expect(result).to.include({changed: 1})
      } finally {
        await indexDb.close()
      }
      expect(await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).status === 200)).to.equal(true)
      const local = await get('/big.iso', {'X-Forwarded-For': GB})
      expect(local.body.equals(changed)).to.equal(true)
      expect(local.headers['x-mb-origin-reason']).to.equal('no_mirror')
      // A rescan confirms the GB mirror has the new version (the scan reconciler's write).
      const db = await database.open()
      try {
        await sql`UPDATE file SET mirrors = '{1}' WHERE path = 'big.iso'`.execute(db.db)
      } finally {
        await db.close()
      }
      expect(await eventually(5, async () => (await get('/big.iso', {'X-Forwarded-For': GB})).status === 302)).to.equal(true)
      expect((await get('/big.iso', {'X-Forwarded-For': US})).headers.location).to.equal('http://gb.example.org/pub/big.iso')
    })
  })
})
