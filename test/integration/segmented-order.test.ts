// @store-independent: the order of the metalink formats' sources
/**
 * Segmented clients get mirrors that honour Range first: a mirror that probing found
 * answering a ranged request with the whole file (`range_ok = false`) is listed after every
 * mirror that honours Range in the meta4, Metalink 3, a torrent's web seeds and the
 * `Link: rel=duplicate` alternatives, though it ranks first for a plain download; a ranged
 * request is never redirected there.
 */
import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import bencode from 'bencode'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {rangeHonouringFirst} from '../../src/lib/select/segmented.js'
import type {Candidate} from '../../src/lib/select/types.js'
import {backend, useTestDatabase} from '../helpers/db.js'
import {headerLines, request} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoLite2-City-Test.mmdb', import.meta.url).pathname

/** The order of hosts a list gives: the two that honour Range (in either order, as the ranking has them), then the whole-file mirror. */
function expectRangeLast(hosts: string[], what: string): void {
  expect(hosts, what).to.have.length(3)
  expect([...hosts.slice(0, 2)].sort(), what).to.deep.equal(['a.mirror.test', 'b.mirror.test'])
  expect(hosts[2], what).to.equal('whole.mirror.test')
}

describe('rangeHonouringFirst', () => {
  const candidate = (identifier: string, rangeOk: boolean | undefined) => ({mirror: {identifier, rangeOk}}) as unknown as Candidate
  it('moves the mirrors that ignore Range last, keeping each part in rank order; the same array when none does', () => {
    const ranked = [candidate('a', false), candidate('b', true), candidate('c', undefined), candidate('d', false), candidate('e', true)]
    expect(rangeHonouringFirst(ranked).map((c) => c.mirror.identifier)).to.deep.equal(['b', 'c', 'e', 'a', 'd'])
    const all = [candidate('a', true), candidate('b', undefined)]
    expect(rangeHonouringFirst(all)).to.equal(all)
  })
})

describe(`segmented clients get mirrors that honour Range first (${backend})`, () => {
  const store = useTestDatabase()
  let root: string
  let running: RunningServer
  let base: string

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-segmented-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'big.iso'), randomBytes(300 * 1024))
    await indexOrigin(store.database.db, root)
    await hashIndex(store.database, root, {jobs: 1})
    const mirror = async (identifier: string, score: number, rangeOk: boolean | null) =>
      (
        await store.database.db
          .insertInto('mirror')
          .values({identifier, http_url: `http://${identifier}/pub-mirror/`, country: 'DE', continent: 'EU', score, range_ok: rangeOk, last_scan_ok_at: new Date()} as any)
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id
    // The whole-file mirror carries nearly all the weight: it is the sticky choice of a plain download.
    const ids = [await mirror('whole.mirror.test', 100_000, false), await mirror('a.mirror.test', 1, true), await mirror('b.mirror.test', 1, null)]
    await store.database.db.updateTable('file').set({mirrors: ids}).execute()
    const config = ConfigSchema.parse({
      root,
      geoip: [GEOIP],
      serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, country_query: 'trusted', country_query_clients: ['127.0.0.1/32']},
      select: {retry_window_seconds: 0},
      probe: {content_interval_seconds: 0},
      log_level: 'silent',
    })
    running = await startServe(config, {database: store.database})
    base = running.url
  })
  after(async () => {
    await running?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const hostOf = (url: string) => new URL(url).hostname

  it('a plain download goes to the whole-file mirror; a ranged one never does', async () => {
    const plain = await request(Number(new URL(base).port), '/pub/big.iso?country=DE')
    expect(plain.status).to.equal(302)
    expect(plain.headers['x-mb-mirror']).to.equal('whole.mirror.test')
    const ranged = await request(Number(new URL(base).port), '/pub/big.iso?country=DE', {headers: {Range: 'bytes=1000-'}})
    expect(ranged.status).to.equal(302)
    expect(ranged.headers['x-mb-mirror']).to.not.equal('whole.mirror.test')
  })

  it('the Link alternatives list it last', async () => {
    const res = await request(Number(new URL(base).port), '/pub/big.iso?country=DE')
    const links = headerLines(res, 'Link').filter((l) => l.includes('rel=duplicate') && l.includes('.mirror.test'))
    expectRangeLast(
      links.map((l) => hostOf(l.slice(1, l.indexOf('>')))),
      'Link',
    )
  })

  it('the meta4 and Metalink 3 list it after the mirrors that honour Range', async () => {
    for (const suffix of ['meta4', 'metalink']) {
      const res = await fetch(`${base}/pub/big.iso.${suffix}?country=DE`)
      expect(res.status).to.equal(200)
      const urls = [...(await res.text()).matchAll(/<url[^>]*>([^<]+)<\/url>/g)].map((m) => m[1]).filter((u) => u.includes('.mirror.test'))
      expectRangeLast(urls.map(hostOf), suffix)
    }
  })

  it("a torrent's web seeds list it after the mirrors that honour Range", async () => {
    const res = await fetch(`${base}/pub/big.iso.torrent?country=DE`)
    expect(res.status).to.equal(200)
    const torrent = bencode.decode(Buffer.from(await res.arrayBuffer())) as {'url-list': Uint8Array[]}
    const seeds = torrent['url-list'].map((u) => Buffer.from(u).toString()).filter((u) => u.includes('.mirror.test'))
    expectRangeLast(seeds.map(hostOf), 'url-list')
  })
})
