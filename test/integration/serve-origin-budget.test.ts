/**
 * The origin is metered and kept within its budget (docs/selection.md, "The origin's budget
 * and fallback"): a running `mb serve` delivers the origin form `/_origin/PATH` of a file a
 * mirror holds only within `serve.origin_budget` (per client network and in all), and answers
 * a `302` to the best mirror over it, so four connections of one address cannot pull the
 * tree from the origin; a file no mirror holds is always delivered. Every delivery is counted
 * by reason in `mb_origin_bytes_total` and `mb_origin_requests_total`. Bad budget and retry
 * values are refused with the key and the accepted range.
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
const BIG = 256 * 1024
const FILES: Record<string, number> = {'big.iso': BIG, 'lonely.iso': 64 * 1024, 'small.txt': 100}

/** Origin tree + index rows: big.iso on two GB mirrors, lonely.iso on none, small.txt (under min_size) on both. */
async function seed(database: TestDatabase, root: string): Promise<void> {
  for (const [name, size] of Object.entries(FILES)) writeFileSync(join(root, name), Buffer.alloc(size, name[0]))
  const db = await database.open()
  try {
    await db.db
      .insertInto('mirror')
      .values([
        {id: 1, identifier: 'gb1.example.org', http_url: 'http://gb1.example.org/', country: 'GB', continent: 'EU'},
        {id: 2, identifier: 'gb2.example.org', http_url: 'http://gb2.example.org/', country: 'GB', continent: 'EU'},
      ] as any)
      .execute()
    for (const [path, size] of Object.entries(FILES)) {
      const mtime = Math.floor(statSync(join(root, path)).mtimeMs / 1000)
      await db.db
        .insertInto('file')
        .values({path, size, mtime, mirrors: path === 'lonely.iso' ? [] : [1, 2]})
        .execute()
    }
  } finally {
    await db.close()
  }
}

/** The `mb_origin_*_total{reason}` samples at the metrics endpoint `serve` printed, by reason. */
async function originMetrics(serve: ServeProcess): Promise<{bytes: Record<string, number>; requests: Record<string, number>}> {
  const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
  const text = await (await fetch(`${metricsUrl}/metrics`)).text()
  const read = (name: string) => Object.fromEntries([...text.matchAll(new RegExp(`^${name}\\{reason="([a-z_]+)"\\} (\\d+)$`, 'gm'))].map((m) => [m[1], Number(m[2])]))
  return {bytes: read('mb_origin_bytes_total'), requests: read('mb_origin_requests_total')}
}

describe(`mb serve: the origin's budget and meter (${backend})`, function () {
  let database: TestDatabase
  let root: string
  let config: string
  let serve: ServeProcess | undefined

  before(async () => {
    database = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-origin-budget-'))
    await seed(database, root)
    config = join(root, '..', `${root.split('/').pop()}.yaml`)
    // One big.iso per network and about a minute; no limit in all (the per-network one is what this tests).
    // Counts flushed every second, for `mb stats origin` and the /mirrors overview.
    writeFileSync(config, `serve:\n  origin_budget:\n    bytes_per_second: 0\n    network_bytes_per_second: ${Math.floor(BIG / 60)}\nstats:\n  flush_interval_seconds: 1\n`)
    serve = await startServe(['--config', config, '--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--metrics-listen', '127.0.0.1:0'], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
    if (config) rmSync(config, {force: true})
  })

  const get = (path: string, ip: string, headers: Record<string, string> = {}) => request(serve!.port, path, {headers: {'X-Forwarded-For': ip, ...headers}})

  it('delivers /_origin/ of a mirrored file within the budget, then redirects to the best mirror; another network has its own', async () => {
    const first = await get('/_origin/big.iso', GB)
    expect([first.status, first.headers['x-mb-origin-reason'], first.body.length]).to.deep.equal([200, 'origin_fallback', BIG])
    const over = await get('/_origin/big.iso', GB)
    expect(over.status, 'over the budget: a redirect').to.equal(302)
    expect(['gb1.example.org', 'gb2.example.org']).to.include(over.headers['x-mb-mirror'])
    expect(over.headers['x-mb-origin-budget']).to.equal('over')
    expect(over.body.length).to.equal(0)
    const other = await get('/_origin/big.iso', SE)
    expect([other.status, other.body.length], 'another network, its own budget').to.deep.equal([200, BIG])
  })

  it('is no bypass: four connections of one address get redirects, not the tree', async () => {
    const ip = '10.20.30.40'
    let delivered = 0
    let redirected = 0
    await Promise.all(
      Array.from({length: 4}, async () => {
        for (let i = 0; i < 10; i++) {
          const res = await get('/_origin/big.iso', ip)
          if (res.status === 200) delivered += res.body.length
          else if (res.status === 302) redirected++
        }
      }),
    )
    expect(delivered, 'one file within the network’s budget').to.be.at.most(BIG)
    expect(redirected).to.be.at.least(39)
  })

  it('always delivers a file no mirror holds, and counts every delivery by reason', async () => {
    const before = await originMetrics(serve!)
    for (let i = 0; i < 5; i++) {
      const res = await get('/_origin/lonely.iso', GB)
      expect([res.status, res.body.length], `fallback ${i + 1} of a file no mirror holds`).to.deep.equal([200, FILES['lonely.iso']])
    }
    const direct = await get('/lonely.iso', GB)
    expect([direct.status, direct.headers['x-mb-origin-reason']]).to.deep.equal([200, 'no_mirror'])
    const small = await get('/small.txt', GB)
    expect([small.status, small.headers['x-mb-origin-reason']]).to.deep.equal([200, 'small_file'])
    const range = await get('/lonely.iso', GB, {Range: 'bytes=0-9'})
    expect([range.status, range.body.length], 'a range is answered for what it asks').to.deep.equal([206, 10])
    const after = await originMetrics(serve!)
    const delta = (kind: 'bytes' | 'requests', reason: string) => (after[kind][reason] ?? 0) - (before[kind][reason] ?? 0)
    expect([delta('requests', 'fallback'), delta('bytes', 'fallback')]).to.deep.equal([5, 5 * FILES['lonely.iso']])
    expect([delta('requests', 'no_mirror'), delta('bytes', 'no_mirror')]).to.deep.equal([2, FILES['lonely.iso'] + 10])
    expect([delta('requests', 'small_file'), delta('bytes', 'small_file')]).to.deep.equal([1, 100])
    expect(Object.keys(after.requests).sort(), 'the fixed set of reasons, each from 0').to.deep.equal([
      'fallback',
      'index_stale',
      'local_network',
      'no_mirror',
      'origin_only',
      'other',
      'rule',
      'small_file',
    ])
  })

  it('shows the day’s origin share by reason on the /mirrors overview and in `mb stats origin`', async () => {
    let origin: any = null
    // The download counts (stats_daily) are written by age, the origin's with each flush: wait for both.
    const settled = () => origin?.byReason?.fallback > 0 && origin?.byReason?.no_mirror > 0 && origin.downloadBytes >= origin.originBytes
    for (let i = 0; i < 100 && !settled(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 400))
      origin = (await (await fetch(`${serve!.url}/mirrors`, {headers: {Accept: 'application/json'}})).json()).origin
    }
    expect(origin?.byReason?.fallback, `the /_origin/ deliveries so far: ${JSON.stringify(origin)}`).to.be.at.least(2 * BIG + 5 * FILES['lonely.iso'])
    expect(origin.byReason.small_file).to.equal(100)
    expect(origin.originBytes).to.be.above(0)
    expect(origin.downloadBytes).to.be.at.least(origin.originBytes)
    const html = await (await fetch(`${serve!.url}/mirrors`)).text()
    expect(html).to.match(/<p id="origin">The origin today \(\d{4}-\d\d-\d\d, UTC\): [^<]+fallback [^<]+<\/p>/)
    await serve!.stop()
    serve = undefined
    const stats = await mb(['stats', 'origin', '--since', '0d', '--json'], {env: database.env})
    expect(stats.code, stats.stderr).to.equal(0)
    const [today] = stats.json().rows
    expect(today.byReason).to.deep.include({fallback: origin.byReason.fallback, small_file: 100})
    expect(today.share).to.be.within(0, 1)
    const table = await mb(['stats', 'origin'], {env: database.env})
    expect(table.stdout)
      .to.match(/share/)
      .and.match(/fallback/)
  })

  it('refuses bad budget and retry values with the key and the accepted range', async () => {
    const bad = join(root, '..', `${root.split('/').pop()}-bad.yaml`)
    try {
      for (const [yaml, key, range] of [
        ['serve:\n  origin_budget:\n    bytes_per_second: -1\n', 'serve.origin_budget.bytes_per_second', 'from 0 to 1000000000000'],
        ['serve:\n  origin_budget:\n    network_bytes_per_second: 1e13\n', 'serve.origin_budget.network_bytes_per_second', 'from 0 to 1000000000000'],
        ['serve:\n  origin_fallback_mirrors: -2\n', 'serve.origin_fallback_mirrors', 'from 0 to 1000'],
        ['select:\n  retry_window_seconds: 100000\n', 'select.retry_window_seconds', 'from 0 to 86400'],
        ['select:\n  retry_memory_entries: 99999999999\n', 'select.retry_memory_entries', 'from 2 to 16777216'],
      ]) {
        writeFileSync(bad, yaml)
        const res = await mb(['config', 'show', '--config', bad])
        expect(res.code, yaml).to.not.equal(0)
        expect(res.stderr, yaml).to.include(key).and.include(range)
      }
    } finally {
      rmSync(bad, {force: true})
    }
  })
})
