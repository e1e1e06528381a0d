/**
 * Download statistics end to end: a real `mb serve` answers a known mix of requests (GETs
 * redirected to mirrors and delivered locally, HEADs, Range continuations, 404s), flushes
 * its counts at shutdown (a resumed download through a redirect is not counted again), and `mb stats --json` shows exactly the expected counts per file,
 * mirror and country (metalinks and HEADs as other requests). The access log written on the way parses as Apache combined format,
 * and /metrics on the separate listener parses as Prometheus text.
 * On PostgreSQL, two `mb serve` processes flushing into one database add up.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {sql} from 'kysely'
import {parsePrometheus} from '../helpers/prometheus.js'
import {BIN, hermeticEnv, mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

const GEOIP = fileURLToPath(new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url))
// From the MaxMind test data: GB (EU), SE (EU), US (NA).
const GB = '81.2.69.142'
const SE = '89.160.20.112'
const US = '216.160.83.56'

/** Apache combined format plus two quoted fields (mirror, realm). */
const COMBINED =
  /^(\S+) (\S+) (\S+) \[(\d{2})\/(\w{3})\/(\d{4}):(\d{2}):(\d{2}):(\d{2}) ([+-]\d{4})\] "(\S+) (\S+) (HTTP\/[\d.]+)" (\d{3}) (\d+|-) "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)" "((?:[^"\\]|\\.)*)"$/

interface Serve {
  child: ChildProcess
  url: string
  stdout: () => string
  stop(): Promise<number | null>
}

async function startServe(t: TestDatabase, root: string, extra: string[] = []): Promise<Serve> {
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--root', root, '--listen', '127.0.0.1:0', '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'info', '--retry-window', '0', ...extra],
    {env: hermeticEnv(t.env), stdio: ['ignore', 'pipe', 'pipe']},
  )
  let out = ''
  let err = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (err += d))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mb serve did not start:\n${out}\n${err}`)), 60_000)
    const check = () => {
      const m = /"url":"(http:\/\/[^"]+)".*"msg":"listening"|"msg":"listening".*"url":"(http:\/\/[^"]+)"/.exec(out)
      if (m) {
        clearTimeout(timer)
        resolve(m[1] ?? m[2])
      }
    }
    child.stdout!.on('data', check)
    child.on('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`mb serve exited with ${code}:\n${out}\n${err}`))
    })
  })
  return {
    child,
    url,
    stdout: () => out,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve(child.exitCode)
        child.once('exit', (code) => resolve(code))
        child.kill('SIGTERM')
      }),
  }
}

async function request(
  base: string,
  path: string,
  options: {method?: string; ip: string; headers?: Record<string, string>},
): Promise<{status: number; location: string | null; mirror: string | null}> {
  const res = await fetch(`${base}/${path}`, {
    method: options.method ?? 'GET',
    redirect: 'manual',
    headers: {'X-Forwarded-For': options.ip, 'User-Agent': 'stats-test/1.0 "quoted"', Referer: 'http://example.org/downloads', ...options.headers},
  })
  await res.arrayBuffer()
  return {status: res.status, location: res.headers.get('location'), mirror: res.headers.get('x-mb-mirror')}
}

/** Seeds two mirrors (DE for Europe, US) and three indexed files. */
async function seed(t: TestDatabase, root: string): Promise<void> {
  mkdirSync(join(root, 'iso'), {recursive: true})
  writeFileSync(join(root, 'iso', 'big.iso'), Buffer.alloc(65_536, 1))
  writeFileSync(join(root, 'iso', 'other.iso'), Buffer.alloc(32_768, 2))
  writeFileSync(join(root, 'README.txt'), 'hello mirrors\n'.repeat(10)) // 140 bytes: below min size, local
  const database = await t.open()
  try {
    await database.db
      .insertInto('mirror')
      .values([
        {identifier: 'mirror.example.de', http_url: 'http://mirror.example.de/pub/', country: 'DE', continent: 'EU', latitude: 51, longitude: 9},
        {identifier: 'mirror.example.us', http_url: 'http://mirror.example.us/pub/', country: 'US', continent: 'NA', latitude: 38, longitude: -97},
      ])
      .execute()
    const ids = (await database.db.selectFrom('mirror').select('id').orderBy('id').execute()).map((r) => r.id)
    const now = Math.floor(Date.now() / 1000)
    // The origin's files carry the indexed mtime, or mb serve would see them changed on disk.
    for (const f of ['iso/big.iso', 'iso/other.iso', 'README.txt']) utimesSync(join(root, f), now, now)
    await database.db
      .insertInto('file')
      .values([
        {path: 'iso/big.iso', size: 65_536, mtime: now, mirrors: ids},
        {path: 'iso/other.iso', size: 32_768, mtime: now, mirrors: ids},
        {path: 'README.txt', size: 140, mtime: now, mirrors: ids},
      ])
      .execute()
  } finally {
    await database.close()
  }
}

/** The mix; returns what `mb stats` must show. */
async function drive(base: string, copies = 1): Promise<void> {
  for (let i = 0; i < copies; i++) {
    // downloads redirected: 3 x big (GB, SE -> DE mirror; US -> US mirror), 1 x other (US)
    expect((await request(base, 'iso/big.iso', {ip: GB})).mirror).to.equal('mirror.example.de')
    expect((await request(base, 'iso/big.iso', {ip: SE})).mirror).to.equal('mirror.example.de')
    expect((await request(base, 'iso/big.iso', {ip: US})).mirror).to.equal('mirror.example.us')
    expect((await request(base, 'iso/other.iso', {ip: US})).status).to.equal(302)
    // local delivery: 2 downloads (GB), one Range from 0 (counts), one continuation (does not)
    expect((await request(base, 'README.txt', {ip: GB})).status).to.equal(200)
    expect((await request(base, 'README.txt', {ip: GB, headers: {Range: 'bytes=0-9'}})).status).to.equal(206)
    expect((await request(base, 'README.txt', {ip: GB, headers: {Range: 'bytes=50-'}})).status).to.equal(206)
    // a resumed download through the redirector: a continuation, not a download
    expect((await request(base, 'iso/big.iso', {ip: SE, headers: {Range: 'bytes=1000-'}})).mirror).to.equal('mirror.example.de')
    // HEAD: not a download
    expect((await request(base, 'iso/big.iso', {ip: GB, method: 'HEAD'})).status).to.equal(302)
    expect((await request(base, 'README.txt', {ip: SE, method: 'HEAD'})).status).to.equal(200)
    // a metalink: not a download, counted for the file at the origin
    expect((await request(base, 'iso/big.iso?meta4', {ip: GB})).status).to.equal(200)
    // the network overview: a page about the mirrors, not a file
    expect((await request(base, 'mirrors', {ip: SE})).status).to.equal(200)
    // 404s: not recorded
    expect((await request(base, 'iso/missing.iso', {ip: GB})).status).to.equal(404)
    expect((await request(base, 'nothing/here', {ip: US})).status).to.equal(404)
  }
}

function byKey(rows: Array<{key: string; downloads: number; other_requests: number; bytes: number}>): Record<string, [number, number]> {
  return Object.fromEntries(rows.map((r) => [r.key, [r.downloads, r.other_requests]]))
}

describe(`stats through mb serve (${backend})`, function () {
  let t: TestDatabase
  let dir: string
  let root: string
  const running: Serve[] = []

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mb-stats-serve-'))
    root = join(dir, 'root')
    t = await createTestDatabase()
    await seed(t, root)
  })

  afterEach(async () => {
    for (const s of running.splice(0)) await s.stop()
    await t.drop()
    rmSync(dir, {recursive: true, force: true})
  })

  it('counts the mix exactly per file, mirror and country; writes a combined access log', async () => {
    const accessLog = join(dir, 'access.log')
    const serve = await startServe(t, root, ['--access-log', accessLog, '--metrics-listen', '127.0.0.1:0', '--stats-flush-interval', '60'])
    running.push(serve)
    await drive(serve.url)

    expect(await serve.stop()).to.equal(0)
    running.splice(0)

    const files = (await mb(['stats', '--by', 'file', '--json'], {env: t.env})).json()
    expect(byKey(files.rows)).to.deep.equal({'iso/big.iso': [3, 3], 'README.txt': [2, 2], 'iso/other.iso': [1, 0]})
    expect(files.total).to.deep.equal({downloads: 6, bytes: 65_536 * 3 + 32_768 + 140 + 10 + 90, other_requests: 5})

    const mirrors = (await mb(['stats', '--by', 'mirror', '--json'], {env: t.env})).json()
    expect(byKey(mirrors.rows)).to.deep.equal({'mirror.example.de': [2, 2], 'mirror.example.us': [2, 0], origin: [2, 3]})

    const countries = (await mb(['stats', '--by', 'country', '--json'], {env: t.env})).json()
    expect(byKey(countries.rows)).to.deep.equal({GB: [3, 3], SE: [1, 2], US: [2, 0]})

    const onlyDe = (await mb(['stats', '--by', 'country', '--mirror', 'mirror.example.de', '--json'], {env: t.env})).json()
    expect(byKey(onlyDe.rows)).to.deep.equal({GB: [1, 1], SE: [1, 1]})

    const lines = readFileSync(accessLog, 'utf8').trim().split('\n')
    expect(lines).to.have.length(14)
    for (const line of lines) expect(line).to.match(COMBINED)
    const first = COMBINED.exec(lines[0])!
    expect(first[1]).to.equal(GB)
    expect(first[11]).to.equal('GET')
    expect(first[12]).to.equal('/iso/big.iso')
    expect(first[14]).to.equal('302')
    expect(first[16]).to.equal('http://example.org/downloads')
    expect(first[17]).to.equal('stats-test/1.0 \\"quoted\\"')
    expect(first[18]).to.equal('mirror.example.de')
    expect(first[19]).to.equal('continent')
    const local = lines.map((l) => COMBINED.exec(l)!).find((m) => m[12] === '/README.txt' && m[14] === '200' && m[11] === 'GET')!
    expect(local[15]).to.equal('140')
    expect(local[18]).to.equal('-')
  })

  it('counts a metalink or mirror list by suffix for the file it describes, as by query', async () => {
    const serve = await startServe(t, root, ['--stats-flush-interval', '60'])
    running.push(serve)
    for (const path of ['iso/big.iso.meta4', 'iso/big.iso.metalink', 'iso/big.iso.mirrorlist', 'iso/big.iso?meta4']) {
      expect((await request(serve.url, path, {ip: GB})).status, path).to.equal(200)
    }
    expect(await serve.stop()).to.equal(0)
    running.splice(0)
    const files = (await mb(['stats', '--by', 'file', '--json'], {env: t.env})).json()
    expect(byKey(files.rows)).to.deep.equal({'iso/big.iso': [0, 4]})
  })

  it('exposes Prometheus metrics on the separate listener', async () => {
    const serve = await startServe(t, root, ['--metrics-listen', '127.0.0.1:0'])
    running.push(serve)
    await drive(serve.url)
    const m = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.stdout())
    expect(m, 'mb serve logs the metrics URL').to.not.equal(null)
    const res = await fetch(`${m![1]}/metrics`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/)
    const text = await res.text()
    const families = parsePrometheus(text)
    const requests = families.find((f) => f.name === 'mb_requests_total')!
    const count = (outcome: string, realm: string) => Number(requests.metrics.find((s: any) => s.labels.outcome === outcome && s.labels.realm === realm)?.value ?? 0)
    expect(count('redirect', 'continent')).to.equal(4) // GB, SE -> DE, the resumed download and the HEAD
    expect(count('redirect', 'country')).to.equal(2)
    expect(count('not_found', 'none')).to.equal(2)
    expect(count('meta4', 'continent')).to.equal(1)
    expect(count('local', 'none')).to.equal(4)
    expect(families.find((f) => f.name === 'mb_database_up')!.metrics[0].value).to.equal('1')
    expect(families.find((f) => f.name === 'mb_mirrors')!.metrics.map((s: any) => [s.labels.state, s.value])).to.deep.equal([
      ['up', '2'],
      ['down', '0'],
    ])
    expect(Number(families.find((f) => f.name === 'mb_snapshot_age_seconds')!.metrics[0].value)).to.be.within(0, 60)
    const latency = families.find((f) => f.name === 'mb_request_duration_seconds')!
    expect(latency.type).to.equal('HISTOGRAM')
    expect(families.find((f) => f.name === 'mb_stats_flush_failures_total')!.metrics[0].value).to.equal('0')
  })

  if (backend === 'postgres') {
    it('two mb serve processes flushing into one PostgreSQL add up', async () => {
      const a = await startServe(t, root, ['--stats-flush-interval', '0.2'])
      const b = await startServe(t, root, ['--stats-flush-interval', '0.2'])
      running.push(a, b)
      await Promise.all([drive(a.url, 2), drive(b.url, 3)])
      expect(await a.stop()).to.equal(0)
      expect(await b.stop()).to.equal(0)
      running.splice(0)
      const files = (await mb(['stats', '--by', 'file', '--json'], {env: t.env})).json()
      expect(byKey(files.rows)).to.deep.equal({'iso/big.iso': [15, 15], 'README.txt': [10, 10], 'iso/other.iso': [5, 0]})
      const database = await t.open()
      try {
        const rows = await sql<{n: number}>`SELECT count(*)::int AS n FROM stats_daily`.execute(database.db)
        expect(rows.rows[0].n).to.equal(7) // one row per (day, path, mirror, country), whatever the replicas
      } finally {
        await database.close()
      }
    })
  }
})
