/**
 * A retry reaches another mirror (docs/selection.md, "Retries"): a running `mb serve`, asked
 * for one file again and again by one client address (as curl --retry or dnf would), walks
 * the ranking, then the origin delivers, then it starts over; a continuation range stays
 * where the download is; another address of the same network keeps the sticky mirror; the
 * mirrors retried away from are counted in `mb_mirror_retries_total`. With `--workers 2`
 * (PostgreSQL only), the retries move on whichever worker takes them.
 */
import {expect} from 'chai'
import http from 'node:http'
import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'
const GB_NEIGHBOUR = '81.2.69.143'

/** Origin tree + index rows: big.iso on mirrors gb (country), se (continent), us (world) for a GB client. */
async function seed(database: TestDatabase): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'mb-serve-retry-'))
  writeFileSync(join(root, 'big.iso'), Buffer.alloc(10_000, 'b'))
  const db = await database.open()
  try {
    await db.db
      .insertInto('mirror')
      .values([
        {id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/pub/', country: 'GB', continent: 'EU'},
        {id: 2, identifier: 'se.example.org', http_url: 'http://se.example.org/', country: 'SE', continent: 'EU'},
        {id: 3, identifier: 'us.example.org', http_url: 'http://us.example.org/', country: 'US', continent: 'NA'},
      ] as any)
      .execute()
    const mtime = Math.floor(statSync(join(root, 'big.iso')).mtimeMs / 1000)
    await db.db
      .insertInto('file')
      .values({path: 'big.iso', size: 10_000, mtime, mirrors: [1, 2, 3]})
      .execute()
  } finally {
    await db.close()
  }
  return root
}

/** Where an answer sent the client: the mirror, or `origin` for a local delivery. */
function where(res: {status: number; headers: Record<string, unknown>}): string {
  if (res.status === 302) return String(res.headers['x-mb-mirror'])
  expect(res.headers['x-mb-origin-reason']).to.equal('retry')
  return 'origin'
}

/** GET /big.iso from `ip` (X-Forwarded-For) over `agent`'s one connection: where it was sent, body read. */
function viaAgent(port: number, agent: http.Agent, ip: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({host: '127.0.0.1', port, path: '/big.iso', agent, headers: {'X-Forwarded-For': ip}}, (res) => {
        res.resume()
        res.on('end', () => resolve(res.statusCode === 302 ? String(res.headers['x-mb-mirror']) : `${res.headers['x-mb-origin-reason'] === 'retry' ? 'origin' : res.statusCode}`))
      })
      .on('error', reject)
  })
}

describe(`mb serve: a retry reaches another mirror (${backend})`, function () {
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

  it('repeated requests walk the mirrors, then the origin, then start over; a continuation and another client stay', async () => {
    serve = await startServe([...base(), '--metrics-listen', '127.0.0.1:0'], database.env)
    const first = await get(GB)
    expect(first.status).to.equal(302)
    expect(first.headers['x-mb-mirror']).to.equal('gb.example.org')
    expect(first.headers['x-mb-attempt']).to.equal('1')

    const head = await get(GB, {}, 'HEAD')
    expect(where(head), 'a HEAD does not count as a retry').to.equal('gb.example.org')
    const resumed = await get(GB, {Range: 'bytes=5000-'})
    expect(where(resumed), 'a continuation stays').to.equal('gb.example.org')
    expect((await get(GB_NEIGHBOUR)).headers['x-mb-mirror'], 'another client of the network keeps the sticky mirror').to.equal('gb.example.org')

    const second = await get(GB)
    expect(second.headers['x-mb-mirror']).to.equal('se.example.org')
    expect(second.headers['x-mb-attempt']).to.equal('2')
    expect(second.headers.link, 'the mirror retried away from is no alternative').to.not.include('gb.example.org')
    expect(where(await get(GB, {Range: 'bytes=100-'})), 'a continuation after the retry stays on the new mirror').to.equal('se.example.org')
    expect(where(await get(GB, {Range: 'bytes=0-'})), 'a Range from 0 is a retry').to.equal('us.example.org')
    const origin = await get(GB)
    expect(where(origin)).to.equal('origin')
    expect(origin.status).to.equal(200)
    expect(origin.body.length).to.equal(10_000)
    expect(origin.headers['x-mb-attempt']).to.equal('4')
    expect(where(await get(GB)), 'then over again').to.equal('gb.example.org')
    expect((await get(GB_NEIGHBOUR)).headers['x-mb-mirror'], 'the neighbour’s repeat moves on by itself').to.equal('se.example.org')

    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
    const text = await (await fetch(`${metricsUrl}/metrics`)).text()
    expect(text).to.include('mb_mirror_retries_total{mirror="gb.example.org"} 2')
    expect(text).to.include('mb_mirror_retries_total{mirror="se.example.org"} 1')
    expect(text).to.include('mb_mirror_retries_total{mirror="us.example.org"} 1')
  })

  it('--retry-window 0 keeps every request on the sticky mirror', async () => {
    serve = await startServe(base('0'), database.env)
    for (let i = 0; i < 3; i++) {
      const res = await get(GB)
      expect(res.headers['x-mb-mirror']).to.equal('gb.example.org')
      expect(res.headers['x-mb-attempt']).to.equal(undefined)
    }
  })

  if (backend === 'postgres') {
    it('--workers 2: a retry moves on whichever worker takes it', async () => {
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
        for (let i = 0; i < 8; i++) {
          seen.push(await viaAgent(serve.port, agents[i % 2 === 0 ? a : b], GB))
          // The sibling hears of the answer through the primary within a few ms.
          await new Promise((resolve) => setTimeout(resolve, 50))
        }
        expect(seen).to.deep.equal(['gb.example.org', 'se.example.org', 'us.example.org', 'origin', 'gb.example.org', 'se.example.org', 'us.example.org', 'origin'])
      } finally {
        for (const agent of agents) agent.destroy()
      }
    })
  }
})
