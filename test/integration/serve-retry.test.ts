/**
 * Retries and repeats keep their locality (docs/selection.md, "Retries keep their locality"):
 * a running `mb serve`, asked for one file again and again by one client address (a retry
 * as curl --retry or dnf would send, or the repeats of a NAT), sends each new attempt to the
 * next mirror of the client's tier (its country's five mirrors here, with 35 elsewhere),
 * cycling, and never to the origin; a continuation range, a HEAD and a conditional request
 * are answered for what they ask; another address of the same network keeps the sticky
 * mirror; the retry signal (`mb_mirror_retries_total`) counts an address once per path and
 * window. One address's 1,000 GETs over ten minutes of test clock: no origin delivery, all
 * in its country; six addresses hammering it with wrk: none from the origin. With
 * `--workers 2` (PostgreSQL only), the attempts move on whichever worker takes them.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import http from 'node:http'
import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {fastClockEnv, headerLines, type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'
const GB_NEIGHBOUR = '81.2.69.143'
/** The countries of the 35 mirrors outside the client's country. */
const ELSEWHERE = ['SE', 'DE', 'FR', 'NL', 'US', 'BR', 'JP']
const GB_MIRRORS = ['gb1', 'gb2', 'gb3', 'gb4', 'gb5'].map((m) => `${m}.example.org`)
const SIZE = 10_000

/** Origin tree + index rows: big.iso on 5 mirrors in GB and 35 elsewhere (5 in each of {@link ELSEWHERE}). */
async function seed(database: TestDatabase): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'mb-serve-retry-'))
  writeFileSync(join(root, 'big.iso'), Buffer.alloc(SIZE, 'b'))
  const rows = GB_MIRRORS.map((identifier, i) => ({id: i + 1, identifier, http_url: `http://${identifier}/pub/`, country: 'GB', continent: 'EU'}))
  for (const [c, country] of ELSEWHERE.entries()) {
    for (let i = 0; i < 5; i++) {
      const identifier = `${country.toLowerCase()}${i + 1}.example.org`
      rows.push({id: rows.length + 1, identifier, http_url: `http://${identifier}/`, country, continent: ['US', 'BR'].includes(country) ? (country === 'US' ? 'NA' : 'SA') : c === 6 ? 'AS' : 'EU'})
    }
  }
  const db = await database.open()
  try {
    await db.db
      .insertInto('mirror')
      .values(rows as any)
      .execute()
    const mtime = Math.floor(statSync(join(root, 'big.iso')).mtimeMs / 1000)
    await db.db
      .insertInto('file')
      .values({path: 'big.iso', size: SIZE, mtime, mirrors: rows.map((r) => r.id)})
      .execute()
  } finally {
    await db.close()
  }
  return root
}

/** Where an answer sent the client: the mirror of a `302`, else `STATUS REASON` (an origin delivery says its reason). */
function where(res: {status: number; headers: Record<string, unknown>}): string {
  if (res.status === 302) return String(res.headers['x-mb-mirror'])
  return `${res.status} ${res.headers['x-mb-origin-reason'] ?? ''}`
}

/** GET /big.iso from `ip` (X-Forwarded-For) over `agent`'s one connection: where it was sent, body read. */
function viaAgent(port: number, agent: http.Agent, ip: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({host: '127.0.0.1', port, path: '/big.iso', agent, headers: {'X-Forwarded-For': ip}}, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode === 302 ? String(res.headers['x-mb-mirror']) : `${res.statusCode} ${res.headers['x-mb-origin-reason']}`))
      })
      .on('error', reject)
  })
}

/** The sum of `mb_mirror_retries_total` over every mirror at the metrics endpoint `serve` printed. */
async function retriesCounted(serve: ServeProcess): Promise<number> {
  const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
  const text = await (await fetch(`${metricsUrl}/metrics`)).text()
  let sum = 0
  for (const m of text.matchAll(/^mb_mirror_retries_total\{[^}]*\} (\d+)$/gm)) sum += Number(m[1])
  return sum
}

describe(`mb serve: retries and repeats keep their locality (${backend})`, function () {
  let database: TestDatabase
  let root: string
  let serve: ServeProcess | undefined

  before(async () => {
    database = await createTestDatabase()
    root = await seed(database)
  })

  afterEach(async () => {
    await serve?.stop()
    serve = undefined
  })

  after(async () => {
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const base = (window = '600') => ['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--retry-window', window]
  const get = (ip: string, headers: Record<string, string> = {}, method = 'GET') => request(serve!.port, '/big.iso', {headers: {'X-Forwarded-For': ip, ...headers}, method})

  it('repeats cycle through the tier, never reaching the origin; continuations, HEADs and conditional requests get what they ask', async () => {
    serve = await startServe([...base(), '--metrics-listen', '127.0.0.1:0'], database.env)
    const first = await get(GB)
    expect(first.status).to.equal(302)
    const sticky = String(first.headers['x-mb-mirror'])
    expect(GB_MIRRORS).to.include(sticky)
    expect(first.headers['x-mb-attempt']).to.equal('1')
    expect(where(await get(GB, {}, 'HEAD')), 'a HEAD does not move').to.equal(sticky)
    expect(where(await get(GB, {Range: 'bytes=5000-'})), 'a continuation stays').to.equal(sticky)
    expect(where(await get(GB_NEIGHBOUR)), 'another client of the network keeps the sticky mirror').to.equal(sticky)

    const second = await get(GB)
    const next = where(second)
    expect(GB_MIRRORS, 'a repeat stays in the country').to.include(next)
    expect(next).to.not.equal(sticky)
    expect(second.headers['x-mb-attempt']).to.equal('2')
    expect(String(second.headers.link), 'the mirror just tried ends the alternatives').to.not.match(new RegExp(`^[^,]*${sticky}`))
    // No request shape pins the address anywhere: each is answered for what it asks.
    expect(where(await get(GB, {Range: 'bytes=100-'})), 'a continuation after the repeat stays on its mirror').to.equal(next)
    expect(where(await get(GB, {Range: 'bytes=1-'})), 'a junk range: a redirect, not the whole file').to.equal(next)
    expect(where(await get(GB, {'If-None-Match': '"junk"'})), 'a junk If-None-Match: a redirect').to.equal(next)
    // A date not in the future (a later one is ignored, RFC 9110 §13.1.3) and not before the indexed mtime.
    const conditional = await get(GB, {'If-Modified-Since': new Date().toUTCString()})
    expect(conditional.status, 'a copy as new as the origin’s: 304').to.equal(304)
    expect(conditional.body.length).to.equal(0)

    const seen = new Set([sticky, next])
    for (let i = 0; i < 12; i++) {
      const res = await get(GB, i % 2 === 0 ? {} : {Range: 'bytes=0-'})
      expect(res.status, `repeat ${i + 3}: ${where(res)}`).to.equal(302)
      expect(GB_MIRRORS).to.include(where(res))
      seen.add(where(res))
    }
    expect([...seen].sort(), 'every mirror of the tier takes a share').to.deep.equal(GB_MIRRORS)
    expect(await retriesCounted(serve), 'one retry signal: the address, the path and the window').to.equal(1)

    // An IPv6 host's temporary addresses (one /64) are one client: its second address goes on.
    const v6 = await get('2a02:d3c0::1')
    expect(v6.headers['x-mb-attempt']).to.equal('1')
    const other = await get('2a02:d3c0::2:1')
    expect([other.headers['x-mb-attempt'], where(other) !== where(v6)], 'another address of the /64').to.deep.equal(['2', true])
    expect((await get('2a02:d3c0:0:1::1')).headers['x-mb-attempt'], 'another /64').to.equal('1')
  })

  it('one address, 1,000 GETs over ten minutes of test clock: no origin delivery, every one in its country', async function () {
    this.timeout(120_000)
    // The server's clock runs 60 times as fast: a request every 10 ms is one every 0.6 s.
    serve = await startServe([...base(), '--metrics-listen', '127.0.0.1:0'], {...database.env, ...fastClockEnv(60)})
    const counts = new Map<string, number>()
    const agent = new http.Agent({keepAlive: true, maxSockets: 1})
    const started = Date.now()
    try {
      for (let i = 0; i < 1000; i++) {
        const wait = started + i * 10 - Date.now()
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait))
        const to = await viaAgent(serve.port, agent, GB)
        counts.set(to, (counts.get(to) ?? 0) + 1)
      }
    } finally {
      agent.destroy()
    }
    const inCountry = GB_MIRRORS.reduce((n, m) => n + (counts.get(m) ?? 0), 0)
    expect(inCountry, `where 1,000 GETs went: ${JSON.stringify([...counts])}`).to.equal(1000)
    for (const m of GB_MIRRORS) expect(counts.get(m), `${m}'s share`).to.equal(200)
    expect(await retriesCounted(serve), 'at most one retry signal per window').to.be.at.most(2)
  })

  it('6 addresses hammering one file with wrk: none from the origin, a retry counted once per address', async function () {
    requireBinary(this, 'wrk', 'wrk')
    serve = await startServe([...base(), '--metrics-listen', '127.0.0.1:0'], database.env)
    const six = [GB, '89.160.20.112', '216.160.83.56', '10.1.2.3', '10.4.5.6', '192.168.7.8']
    const script = join(root, '..', `${root.split('/').pop()}-six.lua`)
    writeFileSync(
      script,
      `local ips = {${six.map((ip) => `"${ip}"`).join(', ')}}\nlocal n = 0\nfunction request()\n  n = n + 1\n  return wrk.format("GET", "/big.iso", {["X-Forwarded-For"] = ips[n % #ips + 1]})\nend\n`,
    )
    try {
      const r = spawnSync('wrk', ['-t1', '-c8', '-d2s', '-s', script, serve.url], {encoding: 'utf8', timeout: 60_000})
      expect(r.status, r.stderr).to.equal(0)
      expect(Number(/(\d+) requests in/.exec(r.stdout)?.[1]), r.stdout).to.be.above(100)
      expect(r.stdout, 'no error answers').to.not.match(/Non-2xx or 3xx responses/)
      const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
      const text = await (await fetch(`${metricsUrl}/metrics`)).text()
      const origin = [...text.matchAll(/^mb_origin_requests_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0)
      expect(origin, 'origin deliveries').to.equal(0)
      expect(await retriesCounted(serve), 'at most one retry signal per address').to.be.at.most(six.length)
    } finally {
      rmSync(script, {force: true})
    }
  })

  it('a server that names no alternatives (select.max_alternatives: 0) still moves a retry on, within the tier', async () => {
    const config = join(root, '..', `${root.split('/').pop()}-noalt.yaml`)
    writeFileSync(config, 'select:\n  max_alternatives: 0\n')
    try {
      serve = await startServe([...base(), '--config', config], database.env)
      const first = await get(GB)
      expect(
        headerLines(first, 'link').filter((l) => l.includes('rel=duplicate')),
        'the Location alone',
      ).to.have.length.at.most(1)
      const second = await get(GB)
      expect(GB_MIRRORS).to.include(where(second))
      expect(where(second)).to.not.equal(where(first))
    } finally {
      rmSync(config, {force: true})
    }
  })

  it('--retry-window 0 keeps every request on the sticky mirror', async () => {
    serve = await startServe(base('0'), database.env)
    const first = where(await get(GB))
    for (let i = 0; i < 3; i++) {
      const res = await get(GB)
      expect(where(res)).to.equal(first)
      expect(res.headers['x-mb-attempt']).to.equal(undefined)
    }
  })

  if (backend === 'postgres') {
    it('--workers 2: the attempts move on whichever worker takes them', async () => {
      serve = await startServe([...base(), '--workers', '2', '--log-level', 'debug'], database.env)
      // Keep-alive connections stay on the worker that accepted them; the debug line of each
      // connection's first request (its client address is the connection's number) names that worker's pid.
      const agents = Array.from({length: 16}, () => new http.Agent({keepAlive: true, maxSockets: 1}))
      try {
        // startServe returns at the first worker's "listening": wait for the second one's.
        for (let t = 0; t < 600 && (serve.output().match(/"msg":"listening"/g) ?? []).length < 2; t++) await new Promise((resolve) => setTimeout(resolve, 100))
        // Opened together, so that both workers are busy accepting.
        await Promise.all(agents.map((agent, i) => viaAgent(serve!.port, agent, `10.9.0.${i}`)))
        await new Promise((resolve) => setTimeout(resolve, 200))
        const pids = agents.map((_, i) => new RegExp(`"pid":(\\d+)[^\\n]*"ip":"10\\.9\\.0\\.${i}"`).exec(serve!.output())?.[1])
        const a = 0
        const b = pids.findIndex((pid) => pid !== pids[a])
        expect(b, `the kernel spread ${agents.length} connections over the workers (pids ${pids.join(', ')})`).to.be.greaterThan(0)
        const seen: string[] = []
        for (let i = 0; i < 6; i++) {
          seen.push(await viaAgent(serve.port, agents[i % 2 === 0 ? a : b], GB))
          // The sibling hears of the answer through the primary within a few ms.
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        expect([...new Set(seen.slice(0, 5))].sort(), `the tier in turn: ${seen.join(', ')}`).to.deep.equal(GB_MIRRORS)
        expect(seen[5], 'then over again').to.equal(seen[0])
      } finally {
        for (const agent of agents) agent.destroy()
      }
    })
  }
})
