/**
 * `mb serve --workers 2` download counting (PostgreSQL only, as `--workers` is): the workers
 * hand their counts to the primary, which sums them and writes each (day, path, mirror,
 * country) once; the rows sum exactly to the requests sent, across a SIGTERM and across a
 * SIGUSR2 replacement of the workers.
 */
import {expect} from 'chai'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {setTimeout as sleep} from 'node:timers/promises'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const GEOIP = fileURLToPath(new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url))
// From the MaxMind test data.
const CLIENTS = {GB: '81.2.69.142', SE: '89.160.20.112', US: '216.160.83.56'}
const FILES = [
  {path: 'a.iso', size: 10_000},
  {path: 'b/c.iso', size: 20_000},
  {path: 'd.txt', size: 300_000},
]

/** Requests per (file, country): file i and country j get (i + 1) * (j + 1), 36 in all. */
function plan(): {path: string; country: keyof typeof CLIENTS; times: number}[] {
  const countries = Object.keys(CLIENTS) as (keyof typeof CLIENTS)[]
  return FILES.flatMap((f, i) => countries.map((country, j) => ({path: f.path, country, times: (i + 1) * (j + 1)})))
}

/** One GET per connection (the kernel spreads connections over the workers); the redirect must come. */
async function download(port: number, path: string, country: keyof typeof CLIENTS): Promise<void> {
  const res = await request(port, `/${path}`, {headers: {'X-Forwarded-For': CLIENTS[country]}})
  expect([res.status, res.headers.location]).to.deep.equal([302, `http://m.example/${path}`])
}

/** The JSON log lines with message `msg`. */
function logLines(serve: ServeProcess, msg: string): Record<string, number>[] {
  return serve
    .output()
    .split('\n')
    .filter((line) => line.includes(`"msg":${JSON.stringify(msg)}`))
    .map((line) => JSON.parse(line))
}

;(backend === 'postgres' ? describe : () => undefined)('mb serve --workers 2: download counts summed in the primary (postgres)', function () {
  this.timeout(300_000)
  let tdb: TestDatabase
  let root: string
  let serve: ServeProcess | undefined

  beforeEach(async () => {
    tdb = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-workers-stats-'))
    const database = await tdb.open()
    try {
      await database.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: 'http://m.example/'}).execute()
      await database.db
        .insertInto('file')
        .values(FILES.map((f) => ({...f, mtime: 0, mirrors: [1]})))
        .execute()
    } finally {
      await database.close()
    }
  })

  afterEach(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  async function start(): Promise<ServeProcess> {
    // A long interval: nothing is due while the test runs, so every count travels at the stops.
    const s = await startServe(['--root', root, '--workers', '2', '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--stats-flush-interval', '3600', '--log-level', 'info'], tdb.env)
    for (let i = 0; i < 1200 && logLines(s, 'listening').length < 2; i++) await sleep(100)
    expect(logLines(s, 'listening')).to.have.length(2)
    return s
  }

  async function rows(): Promise<string[]> {
    const database = await tdb.open()
    try {
      const found = await database.db.selectFrom('stats_daily').select(['path', 'mirror_id', 'country', 'downloads', 'bytes', 'other_requests']).orderBy('path').orderBy('country').execute()
      return found.map((r) => `${r.path} ${r.mirror_id} ${r.country} ${r.downloads} ${r.bytes} ${r.other_requests}`)
    } finally {
      await database.close()
    }
  }

  function expected(): string[] {
    return plan()
      .map((p) => `${p.path} 1 ${p.country} ${p.times} ${p.times * FILES.find((f) => f.path === p.path)!.size} 0`)
      .sort()
  }

  it('the rows sum exactly to the requests sent, each key written once by the primary', async () => {
    serve = await start()
    for (const p of plan()) for (let n = 0; n < p.times; n++) await download(serve.port, p.path, p.country)
    await serve.stop()
    expect(serve.child.exitCode).to.equal(0)
    expect(await rows()).to.deep.equal(expected())
    const [primary] = logLines(serve, "stats: the primary wrote the workers' summed counts")
    expect([primary.rowsWritten, primary.statements, primary.flushFailures]).to.deep.equal([9, 1, 0])
    const handed = logLines(serve, 'stats: handed the counts to the cluster primary')
    expect(handed).to.have.length(2)
    // What the workers would have written themselves (each its own keys): at least the 9.
    const perWorker = handed.map((h) => h.keysHandedOff)
    expect(perWorker.reduce((a, b) => a + b, 0)).to.be.within(9, 18)
    console.log(`      rows written: ${primary.rowsWritten} in ${primary.statements} statement(s); the workers' own keys: ${perWorker.join(' + ')}`)
  })

  it('a SIGUSR2 replacement of the workers in the middle loses nothing', async () => {
    serve = await start()
    const requests = plan().flatMap((p) => Array.from({length: p.times}, () => p))
    const half = requests.length / 2
    for (const p of requests.slice(0, half)) await download(serve.port, p.path, p.country)
    serve.child.kill('SIGUSR2')
    // Requests keep coming while the workers are replaced one at a time.
    let i = half
    for (; i < requests.length && logLines(serve, 'workers replaced').length === 0; i++) await download(serve.port, requests[i].path, requests[i].country)
    for (let w = 0; w < 1200 && logLines(serve, 'workers replaced').length === 0; w++) await sleep(100)
    expect(logLines(serve, 'worker replaced')).to.have.length(2)
    for (; i < requests.length; i++) await download(serve.port, requests[i].path, requests[i].country)
    await serve.stop()
    expect(serve.child.exitCode).to.equal(0)
    expect(await rows()).to.deep.equal(expected())
    // Four workers in all handed over their counts: the two replaced and their successors.
    expect(logLines(serve, 'stats: handed the counts to the cluster primary')).to.have.length(4)
    const [primary] = logLines(serve, "stats: the primary wrote the workers' summed counts")
    expect([primary.rowsWritten, primary.statements]).to.deep.equal([9, 1])
  })
})
