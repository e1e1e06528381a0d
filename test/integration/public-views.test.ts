/**
 * What a client can steer and see through a real `mb serve` (a child process, on the
 * configured backend): `?country=` is ignored by default and, with
 * `serve.country_query: trusted`, honoured only from a trusted proxy's own address or a
 * configured client network, and never counted under the forced country; the public mirror
 * list shows a client only the mirrors it could be sent to, and never a client network,
 * while `mb mirror list` and `mb file lookup` keep the admin view.
 */
import {expect} from 'chai'
import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'
const SE = '89.160.20.112'
const CAMPUS_CLIENT = '10.1.2.3'
const HIDDEN = ['corp.example.org', 'campus.example.org', 'off.example.org', '10.0.0.0/8', '10.1.0.0/16', '64500', 'admin-secret@example.org', 'INTERNAL-NOTE', 'score']

/** Origin `big.iso`; mirrors 1 gb and 2 se (public), 3 corp (only 10.0.0.0/8 clients), 4 campus (prefix_only 10.1.0.0/16), 5 off (disabled). */
async function seed(database: TestDatabase): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'mb-public-root-'))
  writeFileSync(join(root, 'big.iso'), Buffer.alloc(10_000, 'b'))
  const db = await database.open()
  try {
    const common = {admin_email: 'admin-secret@example.org', comment: 'INTERNAL-NOTE', last_scan_ok_at: new Date()}
    await db.db
      .insertInto('mirror')
      .values([
        {id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/pub/', country: 'GB', continent: 'EU', ...common},
        {id: 2, identifier: 'se.example.org', http_url: 'http://se.example.org/', country: 'SE', continent: 'EU', ...common},
        {id: 3, identifier: 'corp.example.org', http_url: 'http://corp.example.org/', country: 'DE', continent: 'EU', client_prefixes: ['10.0.0.0/8'], ...common},
        {id: 4, identifier: 'campus.example.org', http_url: 'http://campus.example.org/', country: 'DE', continent: 'EU', prefixes: ['10.1.0.0/16'], prefix_only: true, asn: 64500, ...common},
        {id: 5, identifier: 'off.example.org', http_url: 'http://off.example.org/', country: 'GB', continent: 'EU', enabled: false, ...common},
      ] as any)
      .execute()
    await db.db
      .insertInto('file')
      .values({path: 'big.iso', size: 10_000, mtime: Math.floor(statSync(join(root, 'big.iso')).mtimeMs / 1000), mirrors: [1, 2, 3, 4, 5]})
      .execute()
  } finally {
    await db.close()
  }
  return root
}

describe(`public views of mb serve (${backend})`, function () {
  let database: TestDatabase
  let root: string
  let configFile: string
  const servers: ServeProcess[] = []
  const serveArgs = () => ['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32']

  before(async () => {
    database = await createTestDatabase()
    root = await seed(database)
    configFile = join(root, '..', `mb-public-${process.pid}.yaml`)
    writeFileSync(configFile, `serve:\n  country_query: trusted\n  country_query_clients: ["${SE}/32"]\n`)
  })

  after(async () => {
    for (const s of servers) await s.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
    if (configFile) rmSync(configFile, {force: true})
  })

  const get = (serve: ServeProcess, target: string, headers: Record<string, string> = {}) => request(serve.port, target, {headers})

  describe('?country= off by default', () => {
    let serve: ServeProcess
    before(async () => {
      serve = await startServe([...serveArgs(), '--no-stats'], database.env)
      servers.push(serve)
    })
    // One server per embedded store: the next block starts its own on the same store.
    after(() => serve?.stop())

    it('ignores ?country= from any client, valid or not, and redirects as for the real client', async () => {
      for (const cc of ['SE', 'se', 'ZZ']) {
        const res = await get(serve, `/big.iso?country=${cc}`, {'X-Forwarded-For': GB})
        expect(res.status, cc).to.equal(302)
        expect(res.headers.location, cc).to.equal('http://gb.example.org/pub/big.iso')
        expect(res.headers['x-mb-realm'], cc).to.equal('country')
      }
      // Even the trusted proxy's own address: nobody may steer (127.0.0.1 has no GeoIP country).
      const own = await get(serve, '/big.iso?country=SE')
      expect(own.status).to.equal(302)
      expect(own.headers['x-mb-realm']).to.equal('world')
      const list = JSON.parse((await get(serve, '/big.iso.mirrorlist?country=SE', {Accept: 'application/json'})).body.toString())
      expect(list.client).to.deep.equal({ip: '127.0.0.1', country: null, continent: null, asn: null})
    })
  })

  describe('serve.country_query: trusted', () => {
    let serve: ServeProcess
    before(async () => {
      serve = await startServe([...serveArgs(), '--config', configFile, '--stats-flush-interval', '1'], database.env)
      servers.push(serve)
    })

    it('ignores ?country= from an untrusted client (no 400 for a bad code either)', async () => {
      const forced = await get(serve, '/big.iso?country=SE', {'X-Forwarded-For': GB})
      expect(forced.status).to.equal(302)
      expect(forced.headers.location).to.equal('http://gb.example.org/pub/big.iso')
      const bad = await get(serve, '/big.iso?country=ZZ', {'X-Forwarded-For': GB})
      expect(bad.status).to.equal(302)
      expect(bad.headers.location).to.equal('http://gb.example.org/pub/big.iso')
    })

    it("honours ?country= from the trusted proxy's own address, and refuses a bad code there", async () => {
      const forced = await get(serve, '/big.iso?country=SE')
      expect(forced.status).to.equal(302)
      expect(forced.headers.location).to.equal('http://se.example.org/big.iso')
      expect(forced.headers['x-mb-realm']).to.equal('country')
      const bad = await get(serve, '/big.iso?country=ZZ')
      expect(bad.status).to.equal(400)
      expect(bad.body.toString()).to.include('?country= must be an ISO 3166-1 alpha-2 code')
      // A value that is not percent-encoded UTF-8 is refused too, not taken as no ?country= at all.
      for (const query of ['country=%zz', 'country=%FC', 'x=1&country=%']) {
        const malformed = await get(serve, `/big.iso?${query}`)
        expect(malformed.status, query).to.equal(400)
        expect(malformed.body.toString(), query).to.include('?country= must be an ISO 3166-1 alpha-2 code')
      }
    })

    it('honours ?country= from a configured client network behind the proxy', async () => {
      const forced = await get(serve, '/big.iso?country=GB', {'X-Forwarded-For': SE})
      expect(forced.status).to.equal(302)
      expect(forced.headers.location).to.equal('http://gb.example.org/pub/big.iso')
      expect(forced.headers['x-mb-realm']).to.equal('country')
    })

    it('shows a client outside the restricted networks neither those mirrors nor any network', async () => {
      const json = await get(serve, '/big.iso.mirrorlist', {'X-Forwarded-For': GB, Accept: 'application/json'})
      expect(json.status).to.equal(200)
      const list = JSON.parse(json.body.toString())
      expect(list.realms.map((g: any) => [g.realm, g.mirrors.map((m: any) => m.identifier)])).to.deep.equal([
        ['country', ['gb.example.org']],
        ['continent', ['se.example.org']],
      ])
      expect(list.outdated).to.deep.equal([])
      const html = (await get(serve, '/big.iso.mirrorlist', {'X-Forwarded-For': GB})).body.toString()
      expect(html).to.include('<td>gb.example.org</td>')
      for (const hidden of HIDDEN) {
        expect(json.body.toString(), hidden).not.to.include(hidden)
        expect(html, hidden).not.to.include(hidden)
      }
    })

    it('shows a client inside the networks the restricted mirrors, without their networks', async () => {
      const json = await get(serve, '/big.iso.mirrorlist', {'X-Forwarded-For': CAMPUS_CLIENT, Accept: 'application/json'})
      const list = JSON.parse(json.body.toString())
      expect(list.realms.map((g: any) => [g.realm, g.mirrors.map((m: any) => m.identifier).sort()])).to.deep.equal([
        ['prefix', ['campus.example.org']],
        ['world', ['corp.example.org', 'gb.example.org', 'se.example.org']],
      ])
      expect(list.client.ip).to.equal(CAMPUS_CLIENT)
      const html = (await get(serve, '/big.iso.mirrorlist', {'X-Forwarded-For': CAMPUS_CLIENT})).body.toString()
      expect(html).to.include('<td>campus.example.org</td>')
      expect(html).to.include('<td>corp.example.org</td>')
      for (const hidden of ['off.example.org', '10.0.0.0/8', '10.1.0.0/16', '64500', 'admin-secret@example.org', 'INTERNAL-NOTE', 'score']) {
        expect(json.body.toString(), hidden).not.to.include(hidden)
        expect(html, hidden).not.to.include(hidden)
      }
    })

    it('counts forced requests under the real client country, never the forced one', async () => {
      await serve.stop()
      const rows = await (async () => {
        const db = await database.open()
        try {
          return await db.db.selectFrom('stats_daily').select(['path', 'mirror_id', 'country', 'downloads']).where('downloads', '>', 0).orderBy('mirror_id').orderBy('country').execute()
        } finally {
          await db.close()
        }
      })()
      // 1 GB (two ignored ?country=), 1 SE (forced GB from 89.160.20.112), 2 -- (forced SE from 127.0.0.1).
      expect(rows.map((r) => [r.path, Number(r.mirror_id), r.country, Number(r.downloads)])).to.deep.equal([
        ['big.iso', 1, 'GB', 2],
        ['big.iso', 1, 'SE', 1],
        ['big.iso', 2, '--', 1],
      ])
      const countries = (await mb(['stats', '--by', 'country', '--json'], {env: database.env})).json()
      const byCountry = Object.fromEntries(countries.rows.map((r: any) => [r.key, r.downloads]))
      expect(byCountry).to.deep.equal({GB: 2, SE: 1, '--': 1})
    })

    it('keeps the admin view in the CLI: client networks, prefixes and passed-over mirrors', async () => {
      const list = await mb(['mirror', 'list', '--json'], {env: database.env})
      expect(list.code, list.stderr).to.equal(0)
      const byName = Object.fromEntries(list.json().map((m: any) => [m.identifier, m]))
      expect(byName['corp.example.org'].client_prefixes).to.deep.equal(['10.0.0.0/8'])
      expect(byName['campus.example.org'].prefixes).to.deep.equal(['10.1.0.0/16'])
      expect(byName['campus.example.org'].prefix_only).to.equal(true)
      expect(byName['off.example.org'].enabled).to.equal(false)
      const lookup = await mb(['file', 'lookup', 'big.iso', '--client-ip', GB, '--geoip', GEOIP, '--json'], {env: database.env})
      expect(lookup.code, lookup.stderr).to.equal(0)
      const explain = lookup.json().files[0].explain
      const reasons = Object.fromEntries(explain.excluded.map((e: any) => [e.mirror, [e.reason, e.detail]]))
      expect(reasons['corp.example.org'][0]).to.equal('client_not_allowed')
      expect(reasons['corp.example.org'][1]).to.include('10.0.0.0/8')
      expect(reasons['campus.example.org'][0]).to.equal('prefix_only')
      expect(reasons['campus.example.org'][1]).to.include('10.1.0.0/16')
      expect(reasons['off.example.org'][0]).to.equal('disabled')
    })
  })
})
