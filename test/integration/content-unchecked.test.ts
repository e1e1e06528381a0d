/**
 * Content checks that cannot judge a copy, and the checks client retries ask for
 * (src/lib/probe/content-check.ts, content-demand.ts). A node http server plays a lying mirror:
 * a redirect loop, a short body, a body longer than the range, a 5xx; each copy is recorded
 * as unchecked with the reason (`mirror_file_check`), never as bad or good, and stays in its
 * file's mirror set. A budget or interval out of range is refused with the key and the range.
 * The queue of checks on demand checks a copy once however many retries name it, once across
 * two replicas (the claim in the database), and within the mirror's hourly budget.
 */
import {expect} from 'chai'
import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {loadConfig} from '../../src/lib/config/index.js'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {checkCopy, checkMirrorContents} from '../../src/lib/probe/content-check.js'
import {ContentDemandQueue} from '../../src/lib/probe/content-demand.js'
import {sqlContentDemandStore} from '../../src/lib/probe/content-demand-store.js'
import {backend, seedMirrorHoldingAll, type TestDatabase} from '../helpers/db.js'
import {hashedOrigin} from '../helpers/mirrored-file.js'
import {type Handler, httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

const KiB = 1024
const NAMES = ['good', 'loop', 'short', 'long', 'error5xx', 'bad']

describe(`content checks: unchecked answers, config ranges, checks on demand (${backend})`, function () {
  this.timeout(60_000)
  let tdb: TestDatabase
  let database: Database
  let root: string
  let server: TestServer
  let mirrorId: number
  const files: Record<string, Buffer> = {}

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-unchecked-'))
    mkdirSync(join(root, 'pub'))
    for (const name of NAMES) {
      files[`pub/${name}.iso`] = randomBytes(300 * KiB)
      writeFileSync(join(root, 'pub', `${name}.iso`), files[`pub/${name}.iso`])
    }
    const served = {...files, 'pub/bad.iso': Buffer.from(files['pub/bad.iso'])}
    served['pub/bad.iso'][280 * KiB] ^= 0xff
    const honest = staticHandler(served)
    const lying: Handler = (req, res) => {
      const url = new URL(req.url ?? '/', 'http://x')
      const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '')
      const name = url.pathname.replace(/^\/pub\/|\.iso$/g, '')
      const body = files[`pub/${name}.iso`]
      if (name === 'loop') return void res.writeHead(302, {location: url.pathname}).end()
      if (name === 'error5xx') return void res.writeHead(503).end('busy')
      if ((name === 'short' || name === 'long') && range) {
        const [start, end] = [Number(range[1]), Number(range[2])]
        res.writeHead(206, {'content-range': `bytes ${start}-${end}/${body.length}`})
        const part = body.subarray(start, end + 1)
        return void res.end(name === 'short' ? part.subarray(0, part.length - 1000) : Buffer.concat([part, randomBytes(1000)]))
      }
      honest(req, res)
    }
    server = await httpServer(lying)
    ;({test: tdb, database} = await hashedOrigin(root))
    mirrorId = await seedMirrorHoldingAll(database, 'liar.test', `http://127.0.0.1:${server.port}/`)
  })

  after(async () => {
    await database?.close()
    await tdb?.drop()
    await server?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const checkRows = async () => {
    const rows = await sql<{path: string; whole: boolean; checked: boolean; reason: string | null}>`
      SELECT f.path, c.whole_at IS NOT NULL AS whole, c.checked_at IS NOT NULL AS checked, c.unchecked_reason AS reason
      FROM mirror_file_check c JOIN file f ON f.id = c.file_id ORDER BY f.path`.execute(database.db)
    return Object.fromEntries(rows.rows.map((r) => [r.path.slice(4, -4), r]))
  }

  it('records a redirect loop, a short body, a body longer than the range and a 5xx as unchecked with the reason, never as bad or good', async () => {
    const round = await checkMirrorContents(database, ConfigSchema.parse({}).probe)
    const verdicts = Object.fromEntries(round.mirrors[0].checks.map((c) => [c.path.slice(4, -4), c.verdict]))
    expect(verdicts).to.deep.equal({good: 'ok', loop: 'error', short: 'error', long: 'error', error5xx: 'error', bad: 'corrupt'})
    expect(round).to.include({checked: 2, corrupt: 1, unchecked: 4, marked_bad: 1})
    const rows = await checkRows()
    expect(rows.good).to.include({whole: true, checked: true, reason: null})
    expect(rows.bad).to.include({whole: false, checked: true, reason: null})
    expect(rows.loop.reason).to.equal('redirect_loop')
    expect(rows.short.reason).to.match(/^short body: \d+ bytes for a range of \d+; not checked$/)
    expect(rows.long.reason).to.match(/^a body longer than the range of \d+ bytes; not checked$/)
    expect(rows.error5xx.reason).to.equal('HTTP 503; not checked')
    for (const name of ['loop', 'short', 'long', 'error5xx']) expect(rows[name], name).to.include({whole: false, checked: false})
    const bad = await database.db.selectFrom('mirror_file_bad').innerJoin('file', 'file.id', 'mirror_file_bad.file_id').select('file.path').execute()
    expect(bad.map((b) => b.path)).to.deep.equal(['pub/bad.iso'])
    const held = await sql<{path: string}>`SELECT path FROM file WHERE ${mirrorId}::smallint = ANY(mirrors) ORDER BY path`.execute(database.db)
    expect(held.rows.map((r) => r.path)).to.deep.equal(['pub/error5xx.iso', 'pub/good.iso', 'pub/long.iso', 'pub/loop.iso', 'pub/short.iso'])
  })

  it('refuses a budget or an interval out of range with the key and the accepted range', () => {
    const fails = (probe: Record<string, unknown>) => {
      try {
        loadConfig({flags: Object.fromEntries(Object.entries(probe).map(([k, v]) => [`probe.${k}`, v])), env: {}, systemFile: '/nonexistent'})
      } catch (error) {
        return (error as Error).message
      }
      return 'accepted'
    }
    const budget = 'expected an integer from 262144 to 1099511627776'
    expect(fails({content_budget_bytes: 1000}))
      .to.contain('probe.content_budget_bytes')
      .and.to.contain(budget)
    expect(fails({content_budget_bytes: 2 * 1024 ** 4})).to.contain(budget)
    expect(fails({content_interval_seconds: 90_000}))
      .to.contain('probe.content_interval_seconds')
      .and.to.contain('expected a number from 0 to 86400')
    expect(fails({content_interval_seconds: -1})).to.contain('expected a number from 0 to 86400')
    expect(fails({content_interval_seconds: 0.5})).to.contain('expected 0 (off) or seconds from 1 to 86400')
    expect(fails({content_budget_bytes: 1024 ** 3, content_interval_seconds: 0})).to.equal('accepted')
  })

  it('checks a copy once for many retries and once across two replicas, within the mirror hourly budget', async () => {
    await database.db.deleteFrom('mirror_file_check').execute()
    const probe = ConfigSchema.parse({}).probe
    const checked: string[] = []
    const checker = async (id: number, path: string) => {
      checked.push(path)
      return checkCopy(database, probe, id, path)
    }
    const one = new ContentDemandQueue(sqlContentDemandStore(database.db), checker, {mirrorBudget: 2})
    const two = new ContentDemandQueue(sqlContentDemandStore(database.db), checker, {mirrorBudget: 2})
    for (let i = 0; i < 5; i++) one.request('pub/good.iso', mirrorId)
    two.request('pub/good.iso', mirrorId)
    await Promise.all([one.idle(), two.idle()])
    expect(checked).to.deep.equal(['pub/good.iso'])
    expect(one.counters.requests + two.counters.requests).to.equal(6)
    expect(one.counters.deduplicated + two.counters.deduplicated).to.equal(1)
    expect((await checkRows()).good).to.include({whole: true})
    // The bad copy's check re-reads the piece that failed; a third copy is over the budget of 2 an hour.
    one.request('pub/bad.iso', mirrorId)
    await one.idle()
    one.request('pub/short.iso', mirrorId)
    await one.idle()
    expect(checked).to.deep.equal(['pub/good.iso', 'pub/bad.iso'])
    expect(one.counters.overBudget).to.equal(1)
    await Promise.all([one.stop(), two.stop()])
  })

  it('ends a check on demand under way at stop, counting and logging nothing of it', async () => {
    await database.db.deleteFrom('content_check_demand').execute()
    await database.db.deleteFrom('content_check_demand_run').execute()
    let started = false
    // A check that reads until it is stopped, as a whole copy from a slow mirror would.
    const checker = (_id: number, _path: string, signal: AbortSignal) =>
      new Promise<{marked_bad: number; cleared: number; checks: {verdict: string}[]}>((resolve) => {
        started = true
        signal.addEventListener('abort', () => resolve({marked_bad: 0, cleared: 0, checks: [{verdict: 'error'}]}))
      })
    const lines: string[] = []
    const logger = {info: (_: object, msg: string) => lines.push(msg), warn: (_: object, msg: string) => lines.push(msg)}
    const queue = new ContentDemandQueue(sqlContentDemandStore(database.db), checker, {mirrorBudget: 2}, {logger})
    queue.request('pub/good.iso', mirrorId)
    for (const deadline = Date.now() + 10_000; !started && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20))
    expect(started).to.equal(true)
    await queue.stop()
    expect(queue.counters.checks).to.equal(0)
    expect(lines).to.deep.equal([])
  })
})
