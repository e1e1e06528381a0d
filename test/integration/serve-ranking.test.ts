/**
 * How `mb serve` ranks, through a real child process on the configured backend: an IPv6
 * client with IPv4-only mirrors (`select.ipv6` prefer and require, and how each explanation
 * says it), the alternatives and metalink order for a German client with many mirrors on
 * its continent, `other_countries` sharing a country's requests, and `select.sticky_key`.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, headerLines, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
/** In the GeoIP2 test data: 2a02:d180::/29 is DE, at 51.5 N 10.5 E. */
const DE_V6 = '2a02:d180::1'

/** [identifier, country, latitude, longitude]; every mirror is IPv4-only (probing found no IPv6). */
const MIRRORS: Array<[string, string, number | null, number | null]> = [
  ['de-fra', 'DE', 50.11, 8.68],
  ['de-ber', 'DE', 52.52, 13.4],
  ['de-muc', 'DE', 48.14, 11.58],
  ['nl', 'NL', 52.37, 4.9],
  ['at', 'AT', 48.21, 16.37],
  ['fr', 'FR', 48.86, 2.35],
  ['pl', 'PL', 52.23, 21.01],
  ['cz', 'CZ', 50.08, 14.44],
  ['ch', 'CH', 47.38, 8.54],
  ['dk', 'DK', 55.68, 12.57],
  ['be', 'BE', 50.85, 4.35],
  ['ng-lagos', 'NG', 6.52, 3.38],
  ['ng-abuja', 'NG', 9.08, 7.4],
  ['us', 'US', null, null],
  ['ca-shares', 'CA', null, null],
  ['ca', 'CA', null, null],
]
const FILES = Array.from({length: 40}, (_, i) => `pool/f${String(i).padStart(2, '0')}.iso`)

async function seed(database: TestDatabase): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'mb-ranking-root-'))
  const body = Buffer.alloc(20_000, 'r')
  writeFileSync(join(root, 'big.iso'), body)
  mkdirSync(join(root, 'pool'))
  for (const f of FILES) writeFileSync(join(root, f), body)
  const db = await database.open()
  try {
    await db.db
      .insertInto('mirror')
      .values(
        MIRRORS.map(([identifier, country, latitude, longitude], i) => ({
          id: i + 1,
          identifier,
          http_url: `http://${identifier}.example.org/pub/`,
          https_url: null,
          country,
          continent: country === 'NG' ? 'AF' : country === 'US' || country === 'CA' ? 'NA' : 'EU',
          latitude,
          longitude,
          ipv6: false,
          score: 100,
          other_countries: identifier === 'ca-shares' ? ['US'] : [],
        })) as any,
      )
      .execute()
    const all = MIRRORS.map((_, i) => i + 1)
    for (const path of ['big.iso', ...FILES]) {
      const mtime = Math.floor(statSync(join(root, path)).mtimeMs / 1000)
      await db.db.insertInto('file').values({path, size: body.length, mtime, mirrors: all}).execute()
    }
  } finally {
    await db.close()
  }
  return root
}

function configFile(dir: string, name: string, select: string): string {
  const file = join(dir, name)
  writeFileSync(
    file,
    `geoip: [${GEOIP}]\ntrusted_proxies: [127.0.0.1/32]\nserve:\n  country_query: trusted\n  country_query_clients: [10.0.0.0/8]\n  allow_broad_trusted_proxies: true\nselect:\n${select}`,
  )
  return file
}

describe(`mb serve: ranking (${backend})`, function () {
  this.timeout(300_000)
  let database: TestDatabase
  let root: string
  let dir: string
  let serve: ServeProcess | undefined
  const get = (target: string, headers: Record<string, string> = {}) => request(serve!.port, target, {headers})
  const mirrorOf = async (target: string, xff: string) => {
    const res = await get(target, {'X-Forwarded-For': xff})
    expect(res.status, target).to.equal(302)
    return String(res.headers['x-mb-mirror'])
  }

  before(async () => {
    database = await createTestDatabase()
    root = await seed(database)
    dir = mkdtempSync(join(tmpdir(), 'mb-ranking-config-'))
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  describe('defaults: select.ipv6 prefer, sticky_key network', () => {
    before(async () => {
      serve = await startServe(['--root', root, '--config', configFile(dir, 'prefer.yaml', '  max_alternatives: 5\n')], database.env)
    })
    after(async () => {
      await serve?.stop()
      serve = undefined
    })

    it('an IPv6 client with IPv4-only mirrors is redirected to a near mirror of its country, alternatives nearest-first on its continent', async () => {
      const res = await get('/big.iso', {'X-Forwarded-For': DE_V6})
      expect(res.status).to.equal(302)
      expect(res.headers['x-mb-realm']).to.equal('country')
      const chosen = String(res.headers['x-mb-mirror'])
      expect(['de-fra', 'de-ber']).to.include(chosen)
      const other = chosen === 'de-fra' ? 'de-ber' : 'de-fra'
      expect(res.headers.location).to.equal(`http://${chosen}.example.org/pub/big.iso`)
      expect(headerLines(res, 'Link').filter((l) => l.includes('rel=duplicate'))).to.deep.equal([
        `<http://${chosen}.example.org/pub/big.iso>; rel=duplicate; pri=1; geo=de`,
        `<http://${other}.example.org/pub/big.iso>; rel=duplicate; pri=2; geo=de`,
        '<http://de-muc.example.org/pub/big.iso>; rel=duplicate; pri=3; geo=de',
        '<http://cz.example.org/pub/big.iso>; rel=duplicate; pri=4; geo=cz',
        '<http://nl.example.org/pub/big.iso>; rel=duplicate; pri=5; geo=nl',
      ])
    })

    it('the metalink lists every eligible mirror in the same order, and no origin with so many', async () => {
      const res = await get('/big.iso.meta4', {'X-Forwarded-For': DE_V6})
      expect(res.status).to.equal(200)
      const urls = [...res.body.toString().matchAll(/<url[^>]*>([^<]+)<\/url>/g)].map((m) => m[1])
      const hosts = urls.map((u) => new URL(u).hostname.replace('.example.org', ''))
      expect(hosts.slice(0, 2).sort()).to.deep.equal(['de-ber', 'de-fra'])
      expect(hosts.slice(2, 13)).to.deep.equal(['de-muc', 'cz', 'nl', 'be', 'ch', 'dk', 'at', 'fr', 'pl', 'ng-abuja', 'ng-lagos'])
      expect(hosts.slice(13, 16).sort()).to.deep.equal(['ca', 'ca-shares', 'us'])
      expect(urls).to.have.length(16)
    })

    it('other_countries: US requests are shared with the Canadian mirror by the scores; the other Canadian mirror gets none', async () => {
      const counts: Record<string, number> = {}
      for (let i = 0; i < 300; i++) {
        const m = await mirrorOf('/big.iso?country=US', `10.${i >> 8}.${i & 255}.1`)
        counts[m] = (counts[m] ?? 0) + 1
      }
      expect(Object.keys(counts).sort()).to.deep.equal(['ca-shares', 'us'])
      expect(counts['ca-shares']).to.be.within(150 - 40, 150 + 40)
      // Deterministic: the same clients get the same mirrors again.
      for (let i = 0; i < 20; i++) expect(await mirrorOf('/big.iso?country=US', `10.${i >> 8}.${i & 255}.9`)).to.equal(await mirrorOf('/big.iso?country=US', `10.${i >> 8}.${i & 255}.1`))
    })

    it('a forced ?country=RU is in Europe, as GeoIP has Russia: with no Russian mirror, the continent realm is Europe', async () => {
      // Before, RU took countries-list's Asia, which has no mirror here: the realm was world.
      const res = await get('/big.iso?country=ru', {'X-Forwarded-For': '10.7.7.7'})
      expect(res.status).to.equal(302)
      expect(res.headers['x-mb-realm']).to.equal('continent')
      expect(['de-fra', 'de-ber', 'de-muc', 'cz', 'nl', 'be', 'ch', 'dk', 'at', 'fr', 'pl']).to.include(String(res.headers['x-mb-mirror']))
    })

    it('sticky_key network: every file of one /24 goes to one mirror', async () => {
      const seen = new Set<string>()
      for (const f of FILES) seen.add(await mirrorOf(`/${f}?country=US`, '10.1.1.1'))
      expect(seen.size).to.equal(1)
    })
  })

  describe('select.ipv6 require, sticky_key network+path, metalink_max_mirrors 3', () => {
    before(async () => {
      serve = await startServe(['--root', root, '--config', configFile(dir, 'require.yaml', '  ipv6: require\n  sticky_key: network+path\n  metalink_max_mirrors: 3\n')], database.env)
    })
    after(async () => {
      await serve?.stop()
      serve = undefined
    })

    it('an IPv6 client with IPv4-only mirrors gets the file from the origin, and the headers name no_ipv6', async () => {
      const res = await get('/big.iso', {'X-Forwarded-For': DE_V6})
      expect(res.status).to.equal(200)
      expect(res.body.length).to.equal(20_000)
      expect(res.headers['x-mb-origin-reason']).to.equal('no_mirror')
      expect(res.headers['x-mb-origin-detail']).to.equal('no eligible mirror for this client: no_ipv6 (16); 16 mirrors checked')
    })

    it('the mirror list tells the IPv6 client why', async () => {
      const res = await get('/big.iso.mirrorlist', {'X-Forwarded-For': DE_V6, Accept: 'application/json'})
      const list = JSON.parse(res.body.toString())
      expect(list.origin).to.deep.equal({reason: 'no_mirror', detail: 'no mirror that holds this version serves IPv6 clients; over IPv4 one would'})
      expect(list.realms).to.deep.equal([])
    })

    it('metalink_max_mirrors caps the metalink', async () => {
      const res = await get('/big.iso.meta4?country=DE', {'X-Forwarded-For': '10.2.3.4'})
      const urls = [...res.body.toString().matchAll(/<url[^>]*>([^<]+)<\/url>/g)].map((m) => m[1])
      expect(urls, 'three mirrors and no origin (serve.origin_fallback_mirrors 2)').to.have.length(3)
      expect(urls.slice(0, 3).every((u) => /^http:\/\/de-(fra|ber|muc)\.example\.org\/pub\/big\.iso$/.test(u))).to.equal(true)
    })

    it('sticky_key network+path: one /24 spreads its files over the pool, each file sticky', async () => {
      const counts: Record<string, number> = {}
      for (const f of FILES) {
        const m = await mirrorOf(`/${f}?country=US`, '10.1.1.1')
        counts[m] = (counts[m] ?? 0) + 1
        expect(await mirrorOf(`/${f}?country=US`, '10.1.1.200'), f).to.equal(m)
      }
      expect(Object.keys(counts).sort()).to.deep.equal(['ca-shares', 'us'])
      expect(counts.us).to.be.within(8, 32)
    })
  })

  describe('mb file lookup --client-ip', () => {
    it('names no_ipv6 under require, and under prefer ranks the IPv4-only mirrors with a note', async () => {
      const require = await mb(['file', 'lookup', 'big.iso', '--client-ip', DE_V6, '--config', join(dir, 'require.yaml'), '--json'], {env: database.env})
      expect(require.code, require.stderr).to.equal(0)
      const explain = require.json().files[0].explain
      expect(explain.origin).to.deep.equal({reason: 'no_mirror', detail: 'no eligible mirror for this client: no_ipv6 (16); 16 mirrors checked'})
      expect(explain.excluded.filter((e: {reason: string}) => e.reason !== 'no_ipv6')).to.deep.equal([])
      const prefer = await mb(['file', 'lookup', 'big.iso', '--client-ip', DE_V6, '--config', join(dir, 'prefer.yaml'), '--json'], {env: database.env})
      const ranked = prefer.json().files[0].explain.ranked
      expect(ranked).to.have.length(16)
      // No mirror has IPv6, so none ranks after one that has: the notes are the distance rule's.
      const notes = ranked.filter((c: {note: string | null}) => c.note !== null).map((c: {mirror: string; note: string}) => [c.mirror, c.note])
      const far = (km: number, realm: string, nearest: number) => `${km} km away, beyond 1.5 x the nearest ${realm} mirror's ${nearest} km: ranked after the near ones`
      expect(notes).to.deep.equal([
        ['de-muc', far(382, 'country', 201)],
        ['ch', far(479, 'continent', 319)],
        ['dk', far(484, 'continent', 319)],
        ['at', far(557, 'continent', 319)],
        ['fr', far(650, 'continent', 319)],
        ['pl', far(726, 'continent', 319)],
      ])
    })
  })
})
