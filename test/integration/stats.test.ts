/**
 * Download statistics in-process against the test database (PGlite or PostgreSQL):
 * the collector's counting rules, batched flushes that add up, `mb stats` (spawned CLI)
 * output and totals, retention rollups, the memory bound, and a flush while PostgreSQL is
 * down (a private cluster started in a temp dir, never the shared server).
 */
import {execFileSync} from 'node:child_process'
import {chmodSync, existsSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import {openDatabase, type Database} from '../../src/lib/db/index.js'
import {StatsCollector} from '../../src/lib/stats/collector.js'
import {reportLastFlush, startStatsFlusher} from '../../src/lib/stats/flusher.js'
import {startStatsForwarder} from '../../src/lib/stats/cluster.js'
import type {PathCounts} from '../../src/lib/stats/pending.js'
import {pruneStats} from '../../src/lib/stats/prune.js'
import {queryStats} from '../../src/lib/stats/query.js'
import type {RequestOutcome} from '../../src/lib/serve/delivery/outcome.js'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {freePort} from '../helpers/servers.js'

const DAY = 86_400_000
const T0 = Date.UTC(2026, 10, 20, 12, 0, 0) // 2026-11-20 12:00 UTC

function req(over: Partial<RequestOutcome>): RequestOutcome {
  return {time: T0, method: 'GET', target: `/${over.path ?? 'x'}`, path: 'x', httpVersion: '1.1', status: 200, outcome: 'local', clientIp: '192.0.2.1', bytesSent: 0, durationSeconds: 0.0001, ...over}
}

/** The known mix: returns the requests. Mirror ids: 1 = de, 2 = us. */
function mix(): RequestOutcome[] {
  const out: RequestOutcome[] = []
  const big = {path: 'iso/big.iso', fileSize: 1000}
  for (let i = 0; i < 3; i++) out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 1, mirrorIdentifier: 'mirror.de', realm: 'country', country: 'DE'}))
  out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 2, mirrorIdentifier: 'mirror.us', realm: 'country', country: 'US'}))
  out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 2, mirrorIdentifier: 'mirror.us', realm: 'world', country: 'us'})) // lower case is normalised
  out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 1, method: 'HEAD', country: 'DE'})) // HEAD: other
  out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 1, country: 'DE', rangeStart: 500})) // continuation: other
  out.push(req({...big, status: 302, outcome: 'redirect', mirrorId: 1, country: 'DE', rangeStart: 0})) // Range from 0: a download
  out.push(req({...big, status: 200, outcome: 'meta4', country: 'FR', bytesSent: 2000}))
  out.push(req({...big, status: 200, outcome: 'hash', country: 'FR', bytesSent: 64}))
  out.push(req({...big, status: 200, outcome: 'mirrorlist', country: 'FR', bytesSent: 3000}))
  const small = {path: 'README.txt', fileSize: 100}
  out.push(req({...small, bytesSent: 100, country: 'FR'}))
  out.push(req({...small, bytesSent: 100})) // unknown country: '--'
  out.push(req({...small, status: 206, bytesSent: 40, rangeStart: 60, country: 'FR'})) // continuation: bytes, no download
  out.push(req({...small, status: 304, outcome: 'not_modified', country: 'FR'}))
  out.push(req({...small, method: 'HEAD', country: 'FR'}))
  // never recorded: 404s, errors, directories, bad requests, no path
  out.push(req({path: 'nope.iso', status: 404, outcome: 'not_found', country: 'DE'}))
  out.push(req({path: 'x', status: 500, outcome: 'error'}))
  out.push(req({path: 'dir', status: 200, outcome: 'directory', bytesSent: 500}))
  out.push(req({path: undefined, status: 400, outcome: 'bad_request'}))
  // the next day
  out.push(req({...big, time: T0 + DAY, status: 302, outcome: 'redirect', mirrorId: 1, country: 'DE'}))
  return out
}

async function seedMirrors(database: Database): Promise<void> {
  await database.db
    .insertInto('mirror')
    .values([
      {id: 1, identifier: 'mirror.de', http_url: 'http://mirror.de/', country: 'DE', continent: 'EU'},
      {id: 2, identifier: 'mirror.us', http_url: 'http://mirror.us/', country: 'US', continent: 'NA'},
    ] as any)
    .execute()
}

const by = (rows: Array<{key: string; downloads: number; other_requests: number}>) => Object.fromEntries(rows.map((r) => [r.key, [r.downloads, r.other_requests]]))

describe(`stats collector and mb stats (${backend})`, function () {
  let t: TestDatabase
  /** Open at the start of every test; closed after a {@link cli} call on PGlite. */
  let database: Database
  let closed = false

  // One database for the file, its mirrors seeded once: the tests write only the stats
  // tables, which are emptied after each test (TRUNCATE: a fresh, empty heap, as the
  // row-order test needs).
  before(async () => {
    t = await createTestDatabase()
    database = await t.open()
    await seedMirrors(database)
  })

  afterEach(async () => {
    if (closed) database = await t.open()
    closed = false
    await sql`TRUNCATE stats_daily, stats_monthly`.execute(database.db)
  })

  after(async () => {
    await database?.close()
    await t?.drop()
  })

  /**
   * Runs the CLI; the embedded store admits one process at a time, so ours steps aside until
   * the test ends (no test uses its connection after the CLI).
   */
  async function cli(args: string[]) {
    if (backend === 'pglite' && !closed) {
      await database.close()
      closed = true
    }
    return mb(args, {env: t.env})
  }

  it('counts the mix exactly: downloads, other requests, bytes, per file, mirror, country, day', async () => {
    const c = new StatsCollector()
    for (const o of mix()) c.observer(o)
    expect(c.pendingTotals()).to.deep.equal({downloads: 9, otherRequests: 8, bytes: 7 * 1000 + 100 + 100 + 40})
    const flushed = await c.flush(database)
    expect(flushed).to.deep.include({ok: true, retained: 0})
    expect(c.pendingKeys).to.equal(0)

    const rows = await database.db
      .selectFrom('stats_daily')
      .select([sql<string>`to_char(day, 'YYYY-MM-DD')`.as('day'), 'path', 'mirror_id', 'country', 'downloads', 'bytes', 'other_requests'])
      .orderBy('day')
      .orderBy('path')
      .orderBy('mirror_id')
      .orderBy('country')
      .execute()
    expect(rows).to.deep.equal([
      {day: '2026-11-20', path: 'README.txt', mirror_id: 0, country: '--', downloads: 1, bytes: 100, other_requests: 0},
      {day: '2026-11-20', path: 'README.txt', mirror_id: 0, country: 'FR', downloads: 1, bytes: 140, other_requests: 3},
      {day: '2026-11-20', path: 'iso/big.iso', mirror_id: 0, country: 'FR', downloads: 0, bytes: 0, other_requests: 3},
      {day: '2026-11-20', path: 'iso/big.iso', mirror_id: 1, country: 'DE', downloads: 4, bytes: 4000, other_requests: 2},
      {day: '2026-11-20', path: 'iso/big.iso', mirror_id: 2, country: 'US', downloads: 2, bytes: 2000, other_requests: 0},
      {day: '2026-11-21', path: 'iso/big.iso', mirror_id: 1, country: 'DE', downloads: 1, bytes: 1000, other_requests: 0},
    ])

    const files = (await cli(['stats', '--by', 'file', '--json'])).json()
    expect(by(files.rows)).to.deep.equal({'iso/big.iso': [7, 5], 'README.txt': [2, 3]})
    expect(files.total).to.deep.equal({downloads: 9, bytes: 7240, other_requests: 8})
    const mirrors = (await cli(['stats', '--by', 'mirror', '--json'])).json()
    expect(by(mirrors.rows)).to.deep.equal({'mirror.de': [5, 2], 'mirror.us': [2, 0], origin: [2, 6]})
    const countries = (await cli(['stats', '--by', 'country', '--json'])).json()
    expect(by(countries.rows)).to.deep.equal({DE: [5, 2], US: [2, 0], FR: [1, 6], '--': [1, 0]})
    const days = (await cli(['stats', '--by', 'day', '--since', '2026-11-20', '--until', '2026-11-21', '--json'])).json()
    expect(days.rows.map((r: any) => [r.key, r.downloads])).to.deep.equal([
      ['2026-11-20', 8],
      ['2026-11-21', 1],
    ])
    const oneDay = (await cli(['stats', '--by', 'mirror', '--since', '2026-11-21', '--until', '2026-11-21', '--mirror', 'mirror.de', '--json'])).json()
    expect(by(oneDay.rows)).to.deep.equal({'mirror.de': [1, 0]})
    const dirs = (await cli(['stats', '--by', 'dir', '--path', 'iso/', '--json'])).json()
    expect(by(dirs.rows)).to.deep.equal({iso: [7, 5]})
  })

  it('--limit: rows plus the (other) remainder equal the total; CSV and plain output agree', async () => {
    const c = new StatsCollector()
    for (let i = 0; i < 6; i++) for (let k = 0; k <= i; k++) c.observer(req({path: `f${i}.iso`, bytesSent: 10, country: 'DE'}))
    await c.flush(database)
    const res = (await cli(['stats', '--by', 'file', '--limit', '2', '--json'])).json()
    expect(res.rows.map((r: any) => [r.key, r.downloads])).to.deep.equal([
      ['f5.iso', 6],
      ['f4.iso', 5],
    ])
    expect(res.other).to.deep.equal({key: '(other)', downloads: 10, bytes: 100, other_requests: 0, groups: 4})
    expect(res.total.downloads).to.equal(21)
    expect(res.rows.reduce((a: number, r: any) => a + r.downloads, 0) + res.other.downloads).to.equal(res.total.downloads)

    const csv = await cli(['stats', '--by', 'file', '--limit', '2', '--csv'])
    expect(csv.code).to.equal(0)
    expect(csv.stdout).to.equal('file,downloads,bytes,other_requests\nf5.iso,6,60,0\nf4.iso,5,50,0\n(other),10,100,0\n')

    const plain = await cli(['stats', '--by', 'file', '--limit', '2'])
    expect(plain.stdout.trim().split('\n')).to.deep.equal(['file\tdownloads\tbytes\tother requests', 'f5.iso\t6\t60\t0', 'f4.iso\t5\t50\t0', '(other)\t10\t100\t0', 'total\t21\t210\t0'])
  })

  it('refuses bad dates and spans with a usage error (exit 2), an unknown mirror with exit 1', async () => {
    for (const args of [
      ['--since', '2026-02-30'],
      ['--since', 'last week'],
      ['--until', '7x'],
      ['--since', '2026-11-21', '--until', '2026-11-20'],
    ]) {
      const res = await cli(['stats', ...args, '--json'])
      expect(res.code, args.join(' ')).to.equal(2)
      expect(res.json().error.code).to.equal('BAD_DATE')
    }
    const unknown = await cli(['stats', '--mirror', 'no.such.mirror', '--json'])
    expect(unknown.code).to.equal(1)
    expect(unknown.json().error.code).to.equal('MIRROR_NOT_FOUND')
    const ok = await cli(['stats', '--since', '7d', '--until', '0d', '--json'])
    expect(ok.code).to.equal(0)
  })

  it('stores awkward paths verbatim (quotes, commas, braces, backslashes, control characters, UTF-8)', async () => {
    const paths = ['a "quoted", {braced} name.iso', 'back\\slash.iso', 'ünïcödé/ファイル.iso', "it's.iso", 'tab\there\nnewline\u0001.iso', 'emoji 🐧 \u2028.iso']
    const c = new StatsCollector()
    for (const path of paths) c.observer(req({path, bytesSent: 1}))
    await c.flush(database)
    const result = await queryStats(database, {by: 'file'})
    expect(result.rows.map((r) => r.key).sort()).to.deep.equal([...paths].sort())
  })

  it('flushes in batches that add up, and concurrent collectors add up', async () => {
    const a = new StatsCollector({batchSize: 7})
    const b = new StatsCollector({batchSize: 3})
    for (let i = 0; i < 40; i++) {
      a.observer(req({path: `p${i % 20}`, bytesSent: 1, country: 'DE'}))
      b.observer(req({path: `p${i % 20}`, bytesSent: 2, country: 'DE'}))
    }
    // a paced (interval) flush and a plain one side by side
    const [ra, rb] = await Promise.all([a.flush(database, {paced: true}), b.flush(database)])
    expect(ra.rows).to.equal(20)
    expect(rb.rows).to.equal(20)
    // counts recorded while a paced flush runs, then a shutdown flush that joins it
    for (let i = 0; i < 10; i++) a.observer(req({path: `p${i}`, bytesSent: 4, country: 'DE'}))
    const paced = a.flush(database, {paced: true})
    for (let i = 10; i < 20; i++) a.observer(req({path: `p${i}`, bytesSent: 4, country: 'DE'}))
    const last = await a.flush(database)
    expect((await paced).rows).to.equal(10)
    expect(last.rows).to.equal(10)
    expect(a.pendingKeys).to.equal(0)
    const result = await queryStats(database, {by: 'file'})
    expect(result.groups).to.equal(20)
    for (const row of result.rows) expect([row.downloads, row.bytes]).to.deep.equal([5, 2 * 1 + 2 * 2 + 4])
    expect(result.total).to.deep.equal({downloads: 100, bytes: 200, other_requests: 0})
  })

  it('writes the rows path by path in path order, across batches (neighbouring index pages one after another)', async () => {
    const c = new StatsCollector({batchSize: 2})
    for (const path of ['order/c', 'order/a', 'order/d', 'order/b']) for (const country of ['FR', 'DE']) c.observer(req({path, bytesSent: 1, country}))
    expect(await c.flush(database)).to.deep.equal({rows: 8, retained: 0, ok: true})
    expect(c.status.statements).to.equal(4)
    // Written into an empty table, the rows lie in the order they were written.
    const stored = await sql<{path: string; country: string}>`SELECT path, country FROM stats_daily ORDER BY ctid`.execute(database.db)
    expect(stored.rows.map((r) => `${r.path} ${r.country}`)).to.deep.equal(['order/a DE', 'order/a FR', 'order/b DE', 'order/b FR', 'order/c DE', 'order/c FR', 'order/d DE', 'order/d FR'])
  })

  it('--workers: hand-offs summed in the primary write each key once; a failed hand-off keeps its counts', async () => {
    const primary = new StatsCollector({batchSize: 500})
    // What the cluster IPC channel does to a message: a JSON round trip.
    const viaIpc = async (groups: PathCounts[]) => primary.merge(JSON.parse(JSON.stringify(groups)))
    const workers = [new StatsCollector(), new StatsCollector()]
    const forwarders = workers.map((w) => startStatsForwarder(w, 3600, {send: viaIpc}))
    // The same 30 keys (15 paths x 2 countries) counted by both workers, 3 + 2 times each.
    for (let i = 0; i < 30; i++) {
      const key = {path: `w${i % 15}`, country: i < 15 ? 'DE' : 'FR'}
      for (let n = 0; n < 3; n++) workers[0].observer(req({...key, bytesSent: 1}))
      for (let n = 0; n < 2; n++) workers[1].observer(req({...key, bytesSent: 10}))
    }
    let fail = true
    const flaky = async (groups: PathCounts[]) => {
      if (fail) throw new Error('channel closed')
      await viaIpc(groups)
    }
    const refused = await workers[1].handOff(flaky)
    expect(refused).to.deep.include({rows: 0, retained: 30, ok: false})
    expect(workers[1].pendingKeys).to.equal(30)
    fail = false
    expect((await workers[1].handOff(flaky)).rows).to.equal(30)
    expect((await forwarders[0].stop()).rows).to.equal(30)
    expect((await forwarders[1].stop()).rows).to.equal(0)
    expect(workers.map((w) => w.status.keysHandedOff)).to.deep.equal([30, 30])
    expect(primary.pendingKeys).to.equal(30)
    expect(primary.pendingTotals()).to.deep.equal({downloads: 150, bytes: 30 * (3 + 20), otherRequests: 0})
    // The database out of reach: the primary keeps the sum and writes it once it is back.
    if (backend === 'postgres') {
      const gone = await t.open()
      await gone.close()
      expect(await primary.flush(gone)).to.deep.include({rows: 0, retained: 30, ok: false})
      expect(primary.pendingTotals()).to.deep.equal({downloads: 150, bytes: 690, otherRequests: 0})
    }
    const written = await primary.flush(database)
    expect(written).to.deep.equal({rows: 30, retained: 0, ok: true})
    // One statement for the 30 summed keys, where each worker writing its own would take 2 x 30 rows.
    expect([primary.status.rowsWritten, primary.status.statements]).to.deep.equal([30, 1])
    const result = await queryStats(database, {by: 'file'})
    expect(result.total).to.deep.equal({downloads: 150, bytes: 690, other_requests: 0})
    for (const row of result.rows) expect([row.downloads, row.bytes]).to.deep.equal([10, 46])
  })

  it('flushes by age: olderThanSeconds writes only the paths first counted that long ago, oldest first', async () => {
    const c = new StatsCollector()
    const now = Date.now()
    c.observer(req({path: 'age/old.iso', bytesSent: 1, time: now - 20_000}))
    c.observer(req({path: 'age/young.iso', bytesSent: 1, time: now}))
    c.observer(req({path: 'age/old.iso', bytesSent: 1, time: now})) // a later count of an old path goes with it
    const due = await c.flush(database, {paced: true, olderThanSeconds: 10})
    expect(due.rows).to.equal(new Date(now - 20_000).getUTCDate() === new Date(now).getUTCDate() ? 1 : 2) // one key, or two across midnight
    expect(c.pendingKeys).to.equal(1)
    let result = await queryStats(database, {pathPrefix: 'age/', by: 'file'})
    expect(result.rows.map((r) => [r.key, r.downloads])).to.deep.equal([['age/old.iso', 2]])
    expect((await c.flush(database, {paced: true, olderThanSeconds: 10})).rows).to.equal(0)
    expect((await c.flush(database)).rows).to.equal(1)
    result = await queryStats(database, {pathPrefix: 'age/', by: 'file'})
    expect(result.total.downloads).to.equal(3)
  })

  it('jitterSeconds: paths first counted together fall due at different ages (a share fixed per path)', async () => {
    const c = new StatsCollector()
    const time = Date.now() - 13_000
    for (let i = 0; i < 200; i++) c.observer(req({path: `jitter/f${i}.iso`, bytesSent: 1, time}))
    // 13 s old; due from 8 s plus a share of 10 s: about half of the paths are due
    const first = await c.flush(database, {paced: true, olderThanSeconds: 8, jitterSeconds: 10})
    expect(first.rows).to.be.within(40, 160)
    expect(c.pendingKeys).to.equal(200 - first.rows)
    // the same call again: only the few paths whose share passed meanwhile (0.02 paths per ms)
    const again = await c.flush(database, {paced: true, olderThanSeconds: 8, jitterSeconds: 10})
    expect(again.rows).to.be.below(40)
    expect((await c.flush(database, {paced: true, olderThanSeconds: 8})).rows).to.equal(200 - first.rows - again.rows)
    const result = await queryStats(database, {pathPrefix: 'jitter/', by: 'file', limit: 1000})
    expect(result.groups).to.equal(200)
  })

  it('the interval flusher writes a count within about one interval, not at once', async () => {
    const c = new StatsCollector()
    const flusher = startStatsFlusher(c, database, 0.5) // ticks every 50 ms, writes paths older than 0.4 s
    try {
      c.observer(req({path: 'tick/a.iso', bytesSent: 1, time: Date.now()}))
      await new Promise((resolve) => setTimeout(resolve, 150))
      expect(c.pendingKeys).to.equal(1) // not due yet
      const deadline = Date.now() + 5000
      while (c.pendingKeys > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50))
      expect(c.pendingKeys).to.equal(0)
      while (c.flushInProgress) await new Promise((resolve) => setTimeout(resolve, 20))
      const result = await queryStats(database, {pathPrefix: 'tick/', by: 'file'})
      expect(result.total.downloads).to.equal(1)
    } finally {
      await flusher.stop()
    }
  })

  it('a failed last flush at shutdown is logged with the downloads it loses, not only the keys', async () => {
    const c = new StatsCollector()
    for (let i = 0; i < 52; i++) c.observer(req({path: 'lost.iso', status: 302, outcome: 'redirect', mirrorId: 1, country: 'DE', fileSize: 10}))
    c.observer(req({path: 'lost.iso', status: 302, outcome: 'redirect', mirrorId: 1, method: 'HEAD', country: 'DE'}))
    // A store that went away (its server stopped): every statement fails.
    const gone = {
      db: {
        getExecutor: () => {
          throw new Error('connection terminated')
        },
      },
    } as unknown as Database
    const last = await startStatsFlusher(c, gone, 3600).stop()
    const logged: Array<{obj: Record<string, unknown>; msg?: string}> = []
    reportLastFlush(last, c, {warn: () => {}, error: (obj, msg) => logged.push({obj: obj as Record<string, unknown>, msg})})
    expect(logged).to.have.length(1)
    expect(logged[0].msg).to.match(/last flush at shutdown failed; these counts are lost/)
    expect(logged[0].obj).to.deep.include({downloads: 52, otherRequests: 1, keys: 1})
    reportLastFlush(await startStatsFlusher(c, database, 3600).stop(), c, {warn: () => {}, error: (obj, msg) => logged.push({obj: obj as Record<string, unknown>, msg})})
    expect(logged, 'a last flush that succeeds logs nothing').to.have.length(1)
  })

  it('bounds memory: beyond max_pending_keys the oldest keys are dropped and counted as lost', () => {
    const lost: number[] = []
    const warnings: string[] = []
    const c = new StatsCollector({maxPendingKeys: 1000, logger: {warn: (_o, m) => warnings.push(m ?? ''), error: () => {}}, onLoss: (l) => lost.push(l.downloads)})
    for (let i = 0; i < 1001; i++) c.observer(req({path: `k${i}`, bytesSent: 1}))
    expect(c.pendingKeys).to.equal(900)
    expect(lost).to.deep.equal([101])
    expect(c.status.lostDownloads).to.equal(101)
    expect(warnings).to.have.length(1)
    expect(c.pendingTotals().downloads).to.equal(900)
  })

  it('a row PostgreSQL refuses is dropped and reported; the rest of its batch is written', async () => {
    const errors: Array<{obj: any; msg: string}> = []
    const lost: number[] = []
    const c = new StatsCollector({batchSize: 8, logger: {warn: () => {}, error: (obj, msg) => errors.push({obj, msg: msg ?? ''})}, onLoss: (l) => lost.push(l.downloads)})
    const time = Date.UTC(2025, 0, 10, 12)
    // A lone UTF-16 surrogate cannot travel as JSON text to PostgreSQL (SQLSTATE 22P02);
    // parseTarget keeps such paths out of mb serve, the collector must not depend on it.
    const bad = 'poison-\ud800.iso'
    for (let i = 0; i < 20; i++) c.observer(req({time, path: i === 5 ? bad : `good-${i}.iso`, bytesSent: 10, country: 'DE'}))
    const result = await c.flush(database)
    expect(result).to.deep.include({ok: true, rows: 19, retained: 0})
    expect(c.pendingKeys).to.equal(0)
    expect(lost).to.deep.equal([1])
    expect(c.status.lostKeys).to.equal(1)
    expect(errors).to.have.length(1)
    expect(errors[0].msg).to.include('refused these rows')
    expect(errors[0].obj.paths).to.deep.equal([JSON.stringify(bad)])
    const stored = await sql<{n: number; downloads: number}>`SELECT count(*)::int AS n, sum(downloads)::int AS downloads FROM stats_daily WHERE day = '2025-01-10'`.execute(database.db)
    expect(stored.rows[0]).to.deep.equal({n: 19, downloads: 19})
    // nothing is retried at the next flush
    expect(await c.flush(database)).to.deep.include({ok: true, rows: 0})
    expect(errors).to.have.length(1)
    await sql`DELETE FROM stats_daily WHERE day = '2025-01-10'`.execute(database.db)
  })

  it('retention: daily rows older than the policy roll up into monthly rows with the same totals', async () => {
    const c = new StatsCollector()
    const start = Date.UTC(2026, 6, 25, 10) // 2026-07-25 .. 2026-09-22 (60 days)
    for (let d = 0; d < 60; d++) {
      for (let k = 0; k <= d % 4; k++)
        c.observer(req({time: start + d * DAY, path: d % 2 ? 'a.iso' : 'dir/b.iso', status: 302, outcome: 'redirect', mirrorId: 1 + (d % 2), fileSize: 10, country: d % 3 ? 'DE' : 'US'}))
      c.observer(req({time: start + d * DAY, path: 'a.iso', method: 'HEAD'}))
    }
    await c.flush(database)
    // an existing monthly row for July (from an earlier prune) must be added to, not replaced
    await database.db.insertInto('stats_monthly').values({month: '2026-07-01', path: 'a.iso', mirror_id: 2, country: 'DE', downloads: 1000, bytes: 10_000, other_requests: 0}).execute()
    const before = await Promise.all((['file', 'mirror', 'country', 'month'] as const).map((g) => queryStats(database, {by: g})))
    const dailyBefore = await sql<{
      month: string
      downloads: number
    }>`SELECT to_char(day, 'YYYY-MM') AS month, sum(downloads)::bigint AS downloads FROM stats_daily WHERE day < '2026-09-01' GROUP BY 1 ORDER BY 1`.execute(database.db)

    const now = new Date(Date.UTC(2026, 9, 1, 3)) // 2026-10-01: keep 30 days -> daily rows before 2026-09-01 roll up
    const result = await pruneStats(database, {dailyRetentionDays: 30, monthlyRetentionMonths: 120}, now)
    expect(result.daily_cutoff).to.equal('2026-09-01')
    expect(result.monthly_rows_deleted).to.equal(0)
    const left = await sql<{first: string}>`SELECT to_char(min(day), 'YYYY-MM-DD') AS first FROM stats_daily`.execute(database.db)
    expect(left.rows[0].first).to.equal('2026-09-01')
    const monthly = await sql<{month: string; downloads: number}>`SELECT to_char(month, 'YYYY-MM') AS month, sum(downloads)::bigint AS downloads FROM stats_monthly GROUP BY 1 ORDER BY 1`.execute(
      database.db,
    )
    const expected = dailyBefore.rows.map((r) => ({month: r.month, downloads: Number(r.downloads) + (r.month === '2026-07' ? 1000 : 0)}))
    expect(monthly.rows.map((r) => ({month: r.month, downloads: Number(r.downloads)}))).to.deep.equal(expected)
    expect(result.downloads_rolled_up).to.equal(dailyBefore.rows.reduce((a, r) => a + Number(r.downloads), 0))

    // every grouping reports the same totals across the retention boundary
    const after = await Promise.all((['file', 'mirror', 'country', 'month'] as const).map((g) => queryStats(database, {by: g})))
    for (let i = 0; i < before.length; i++) expect(after[i].rows, before[i].by).to.deep.equal(before[i].rows)
    // a second prune changes nothing; a short monthly retention deletes old months
    expect((await pruneStats(database, {dailyRetentionDays: 30, monthlyRetentionMonths: 120}, now)).daily_rows_rolled_up).to.equal(0)
    const cut = await pruneStats(database, {dailyRetentionDays: 30, monthlyRetentionMonths: 2}, now)
    expect(cut.monthly_cutoff).to.equal('2026-08-01')
    expect(cut.monthly_rows_deleted).to.be.greaterThan(0)
    const months = await sql<{month: string}>`SELECT DISTINCT to_char(month, 'YYYY-MM') AS month FROM stats_monthly ORDER BY 1`.execute(database.db)
    expect(months.rows.map((r) => r.month)).to.deep.equal(['2026-08'])

    // the CLI applies the configured policy
    const pruned = await cli(['stats', 'prune', '--daily-retention-days', '1', '--json'])
    expect(pruned.code).to.equal(0)
    expect(pruned.json().daily_rows_rolled_up).to.be.greaterThan(0)
  })
})

const PG_BIN = '/usr/lib/postgresql/15/bin'

describe('stats flush while PostgreSQL is down (private cluster)', function () {
  let dir: string
  let port: number
  let started = false
  const pgctl = (...args: string[]) =>
    execFileSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/pg_ctl`, '-D', join(dir, 'data'), '-l', join(dir, 'log'), '-w', '-t', '60', ...args], {stdio: 'pipe'})

  before(function () {
    if (!existsSync(`${PG_BIN}/initdb`)) {
      if (process.env.CI === 'true') throw new Error(`${PG_BIN}/initdb is missing under CI: .ci/run must install postgresql-15`)
      this.skip()
    }
  })

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mb-stats-pg-'))
    chmodSync(dir, 0o777)
    port = await freePort()
    execFileSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/initdb`, '-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync'], {stdio: 'pipe'})
    pgctl('-o', `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off`, 'start')
    started = true
  })

  afterEach(() => {
    if (started) {
      try {
        pgctl('-m', 'immediate', 'stop')
      } catch {
        /* already stopped */
      }
    }
    started = false
    rmSync(dir, {recursive: true, force: true})
  })

  it('keeps the counts when a flush fails, reports the failure, and loses nothing after the restart', async () => {
    const url = `postgres://postgres@127.0.0.1:${port}/postgres`
    const database = await openDatabase({url, schema: 'auto', poolSize: 2})
    try {
      const failures: unknown[] = []
      const errors: string[] = []
      const c = new StatsCollector({onFlushFailure: (e) => failures.push(e), logger: {warn: () => {}, error: (_o, m) => errors.push(m ?? '')}})
      for (let i = 0; i < 10; i++) c.observer(req({path: `f${i % 3}`, bytesSent: 5, country: 'DE'}))
      expect((await c.flush(database)).ok).to.equal(true)

      for (let i = 0; i < 7; i++) c.observer(req({path: `f${i % 3}`, bytesSent: 5, country: 'DE'}))
      pgctl('-m', 'fast', 'stop')
      const failed = await c.flush(database)
      expect(failed.ok).to.equal(false)
      expect(failed.retained).to.equal(3)
      expect(failures).to.have.length(1)
      expect(errors).to.have.length(1)
      expect(c.status.flushFailures).to.equal(1)
      expect(c.pendingTotals().downloads).to.equal(7)
      // requests keep arriving while the database is down
      for (let i = 0; i < 5; i++) c.observer(req({path: `f${i % 3}`, bytesSent: 5, country: 'DE'}))
      expect((await c.flush(database)).ok).to.equal(false)
      expect(c.pendingTotals().downloads).to.equal(12)

      pgctl('-o', `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off`, 'start')
      const ok = await c.flush(database)
      expect(ok).to.deep.include({ok: true, retained: 0, rows: 3})
      const result = await queryStats(database, {by: 'file'})
      expect(result.total).to.deep.equal({downloads: 22, bytes: 110, other_requests: 0})
      expect(result.rows.map((r) => [r.key, r.downloads])).to.deep.equal([
        ['f0', 9],
        ['f1', 7],
        ['f2', 6],
      ])
      expect(readFileSync(join(dir, 'log'), 'utf8')).to.match(/database system is ready/)
    } finally {
      await database.close()
    }
  })
})
