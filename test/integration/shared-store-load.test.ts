/**
 * Scans beside a loaded `mb serve` on the embedded store (issue 14, item 5): ten `mb scan`s of
 * a large HTTP mirror (a generated JSON index, MB_LOAD_FILES files, default 50,000) run while a
 * client keeps downloading through serve. Every scan succeeds, and the downloads the client saw
 * equal those `mb stats` reports after serve's last flush. The test prints serving throughput
 * before and during the scans and the worst gap between two completed requests (printed only:
 * tests check correctness, not wall-clock time). PGlite-specific: skipped when
 * MB_TEST_DATABASE_URL is set.
 */
import {mkdtempSync, rmSync} from 'node:fs'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {upsertOriginFiles} from '../../src/lib/origin/index.js'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const FILES = Number(process.env.MB_LOAD_FILES ?? 50_000)
const SCANS = Number(process.env.MB_LOAD_SCANS ?? 10)
/** Above select.min_size, so that serve redirects. */
const SIZE = 10_000
const MTIME = Date.UTC(2026, 0, 2, 3, 4, 5) / 1000
const name = (i: number) => `f${String(i).padStart(6, '0')}.iso`

/** An nginx-style JSON index of the mirror: all files on odd requests, the first 90 % on even ones (so every scan changes the file sets). */
function listingServer(): Promise<http.Server> {
  const entry = (i: number) => ({name: name(i), type: 'file', mtime: new Date(MTIME * 1000).toUTCString(), size: SIZE})
  const full = JSON.stringify(Array.from({length: FILES}, (_, i) => entry(i)))
  const most = JSON.stringify(Array.from({length: Math.floor(FILES * 0.9)}, (_, i) => entry(i)))
  let n = 0
  const server = http.createServer((_req, res) => res.writeHead(200, {'content-type': 'application/json'}).end(n++ % 2 === 0 ? most : full))
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

/** Keeps `concurrency` GETs of files the mirror always holds in flight until stopped; counts redirects and notes completion times. */
function loadClient(url: string, concurrency: number) {
  const agent = new http.Agent({keepAlive: true, maxSockets: concurrency})
  const done: number[] = []
  let redirects = 0
  let failures = 0
  let running = true
  const one = () =>
    new Promise<void>((resolve) => {
      const path = `/${name(Math.floor(Math.random() * FILES * 0.9))}`
      http
        .get(`${url}${path}`, {agent}, (res) => {
          res.resume()
          res.on('end', () => {
            if (res.statusCode === 302) redirects++
            else {
              failures++
              if (failures <= 3) console.log(`      unexpected ${res.statusCode} for ${path}: ${res.headers.location ?? ''}`)
            }
            done.push(performance.now())
            resolve()
          })
        })
        .on('error', () => {
          failures++
          resolve()
        })
    })
  const workers = Array.from({length: concurrency}, async () => {
    while (running) await one()
  })
  return {
    done,
    get redirects() {
      return redirects
    },
    get failures() {
      return failures
    },
    async stop() {
      running = false
      await Promise.all(workers)
      agent.destroy()
    },
  }
}

/** Requests per second completed in [from, to), and the longest time without a completion in it (ms). */
function window(done: number[], from: number, to: number): {rate: number; worstGapMs: number} {
  const inside = done.filter((t) => t >= from && t < to)
  let worst = 0
  let last = from
  for (const t of inside) {
    worst = Math.max(worst, t - last)
    last = t
  }
  worst = Math.max(worst, to - last)
  return {rate: inside.length / ((to - from) / 1000), worstGapMs: Math.round(worst)}
}

// The embedded store's own behaviour: registered in the PGlite pass only, as db.test.ts does.
const suite = (backend === 'pglite' ? describe : () => undefined) as Mocha.SuiteFunction
suite(`scans beside a loaded mb serve on the embedded store (PGlite pass only; ${FILES} files, ${SCANS} scans)`, function () {
  this.timeout(1_800_000)
  let tdb: TestDatabase
  let root: string
  let listing: http.Server
  let serve: ServeProcess | undefined
  before(async () => {
    tdb = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-load-root-'))
    listing = await listingServer()
    const database = await tdb.open()
    try {
      const url = `http://127.0.0.1:${(listing.address() as AddressInfo).port}/`
      await database.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: url}).execute()
      await upsertOriginFiles(
        database.db,
        Array.from({length: FILES}, (_, i) => ({path: name(i), size: SIZE, mtime: MTIME})),
      )
      await database.db
        .updateTable('file')
        .set({mirrors: [1]})
        .execute()
    } finally {
      await database.close()
    }
  })
  after(async () => {
    await serve?.stop()
    listing?.close()
    await tdb?.drop()
    rmSync(root, {recursive: true, force: true})
  })

  it('all scans succeed, no download count is lost, and serving goes on (throughput and worst gap printed)', async () => {
    serve = await startServe(['--root', root, '--stats-flush-interval', '1'], tdb.env)
    const load = loadClient(serve.url, 4)
    await new Promise((r) => setTimeout(r, 12_000)) // serve's first seconds run cold (JIT): measure after them
    const scansFrom = performance.now()
    const scans: Array<{code: number; seconds: number; err: string}> = []
    for (let i = 0; i < SCANS; i++) {
      const t0 = performance.now()
      const r = await mb(['scan', 'm.example', '--json'], {env: tdb.env, timeoutMs: 600_000})
      scans.push({code: r.code, seconds: Math.round(performance.now() - t0) / 1000, err: r.code === 0 ? '' : r.stderr + r.stdout})
    }
    const scansTo = performance.now()
    await new Promise((r) => setTimeout(r, 3000))
    await load.stop()
    const before = window(load.done, scansFrom - 4000, scansFrom)
    const during = window(load.done, scansFrom, scansTo)
    const after = window(load.done, scansTo, scansTo + 3000)
    console.log(
      `      serving: ${before.rate.toFixed(0)} req/s before the scans (worst gap ${before.worstGapMs} ms), ${during.rate.toFixed(0)} req/s during ${SCANS} scans of ${FILES} files (worst gap ${during.worstGapMs} ms), ${after.rate.toFixed(0)} req/s after them; scans took ${scans.map((s) => s.seconds).join(', ')} s`,
    )
    await serve.stop()
    const output = serve.output()
    serve = undefined
    expect(scans.filter((s) => s.code !== 0).map((s) => s.err)).to.deep.equal([])
    expect(load.failures).to.equal(0)
    expect(load.redirects).to.be.greaterThan(0)
    expect(output).not.to.match(/flush failed|counts are lost/)
    const stats = (await mb(['stats', '--json'], {env: tdb.env})).json()
    expect(stats.total.downloads).to.equal(load.redirects)
  })
})
