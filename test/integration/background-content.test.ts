/**
 * Background content checks inside `mb serve` (`probe.content_interval_seconds`,
 * src/lib/probe/background-content.ts): rounds of `mb probe --content` on a timer, each within
 * its share of `probe.content_budget_bytes` per mirror and hour. A local HTTP server with
 * Range support plays a mirror whose copy was corrupted in place; a round takes the copy out
 * of the file's mirror set. The first round runs when the last one (`background_round`) is an
 * interval old: at once on a store that never had one, not again after a restart.
 */
import {expect} from 'chai'
import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {roundBudget, startBackgroundContentChecks} from '../../src/lib/probe/background-content.js'
import {secondsUntilDue} from '../../src/lib/probe/rounds.js'
import {backend, seedMirrorHoldingAll, type TestDatabase} from '../helpers/db.js'
import {hashedOrigin} from '../helpers/mirrored-file.js'
import {httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

const KiB = 1024

describe(`mb serve's background content checks (${backend})`, function () {
  this.timeout(60_000)
  let tdb: TestDatabase
  let database: Database
  let root: string
  let server: TestServer
  let mirrorId: number
  /** The requests the mirror received: `METHOD URL RANGE`. */
  const requests = () => server.requests.map((r) => `${r.method} ${r.url} ${r.headers.range ?? ''}`)
  const data = randomBytes(600 * KiB)
  const corrupt = Buffer.from(data)

  before(async () => {
    for (let offset = 100; offset < corrupt.length; offset += 64 * KiB) corrupt[offset] ^= 0xff
    root = mkdtempSync(join(tmpdir(), 'mb-bgcontent-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'a.iso'), data)
    server = await httpServer(staticHandler({'pub/a.iso': corrupt}))
    ;({test: tdb, database} = await hashedOrigin(root))
    mirrorId = await seedMirrorHoldingAll(database, 'bad.test', `http://127.0.0.1:${server.port}/`)
  })

  after(async () => {
    await database?.close()
    await tdb?.drop()
    await server?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const holders = async () => (await sql<{mirrors: number[]}>`SELECT mirrors FROM file WHERE path = 'pub/a.iso'`.execute(database.db)).rows[0].mirrors.map(Number)

  it('gives each round its share of the hourly budget', () => {
    expect(roundBudget(64 * 1024 * KiB, 300)).to.equal(Math.floor((64 * 1024 * KiB) / 12))
    expect(roundBudget(3600, 1)).to.equal(1)
    expect(roundBudget(1000, 7200)).to.equal(1000)
  })

  it('is due at once when no round finished, else an interval after the last one', () => {
    const now = Date.UTC(2026, 11, 6, 12)
    expect(secondsUntilDue(undefined, 3600, now)).to.equal(0)
    expect(secondsUntilDue(new Date(now - 600_000), 3600, now)).to.equal(3000)
    expect(secondsUntilDue(new Date(now - 7200_000), 3600, now)).to.equal(0)
    // A clock that went back never waits more than one interval.
    expect(secondsUntilDue(new Date(now + 7200_000), 3600, now)).to.equal(3600)
  })

  it('finds the corrupt copy on its timer and takes it out of selection', async () => {
    // 1 s rounds within 360 KiB an hour: 102 bytes a round, too few for a piece.
    const starved = startBackgroundContentChecks(database, ConfigSchema.parse({probe: {content_interval_seconds: 1, content_budget_bytes: 360 * KiB}}))
    try {
      expect(starved.roundBudgetBytes).to.equal(102)
      const round = await starved.runOnce()
      expect(round?.mirrors[0].skipped).to.match(/fits the budget/)
    } finally {
      await starved.stop()
    }
    expect(requests()).to.deep.equal([])
    // A round that checked nothing is not the last round: the next start checks at once.
    expect(await database.db.selectFrom('background_round').selectAll().execute()).to.deep.equal([])

    // 1 s rounds within 1 GiB an hour: 291 KiB a round, one piece of 256 KiB.
    const checks = startBackgroundContentChecks(database, ConfigSchema.parse({probe: {content_interval_seconds: 1, content_budget_bytes: 1024 * 1024 * KiB}}))
    try {
      const deadline = Date.now() + 20_000
      while (Date.now() < deadline && (await holders()).includes(mirrorId)) await new Promise((r) => setTimeout(r, 200))
      expect(await holders()).to.deep.equal([])
      expect(requests().length).to.be.at.least(1)
      expect(requests()[0]).to.match(/^GET \/pub\/a\.iso bytes=\d+-\d+$/)
      const bad = await database.db.selectFrom('mirror_file_bad').selectAll().execute()
      expect(bad.map((b) => Number(b.mirror_id))).to.deep.equal([mirrorId])
    } finally {
      await checks.stop()
    }
  })

  it('runs the first round at start on a store that never had one, and a restart adds none', async () => {
    await database.db.deleteFrom('background_round').execute()
    const config = ConfigSchema.parse({probe: {content_interval_seconds: 3600, content_budget_bytes: 1024 * 1024 * KiB}})
    const before = requests().length
    const first = startBackgroundContentChecks(database, config)
    try {
      const deadline = Date.now() + 20_000
      while (Date.now() < deadline && (await database.db.selectFrom('background_round').selectAll().execute()).length === 0) await new Promise((r) => setTimeout(r, 100))
    } finally {
      await first.stop()
    }
    const rounds = await database.db.selectFrom('background_round').selectAll().execute()
    expect(rounds.map((r) => r.name)).to.deep.equal(['content-check'])
    expect(requests().length, 'the round at start read the mirror').to.be.above(before)

    const afterFirst = requests().length
    const restarted = startBackgroundContentChecks(database, config)
    await new Promise((r) => setTimeout(r, 1500))
    await restarted.stop()
    expect(requests().length, 'no round after the restart: the last one is not an hour old').to.equal(afterFirst)
  })

  it('ends a round under way at stop, at once, recording nothing of the checks it cut short', async () => {
    // A mirror that takes each request and never answers: its check would wait for probe.timeout.
    const stalled = await httpServer(() => {})
    try {
      const id = await seedMirrorHoldingAll(database, 'stalled.test', `http://127.0.0.1:${stalled.port}/`)
      const lastRounds = await database.db.selectFrom('background_round').selectAll().execute()
      const checks = startBackgroundContentChecks(database, ConfigSchema.parse({probe: {content_interval_seconds: 3600, content_budget_bytes: 1024 * 1024 * KiB, timeout: 60}}))
      const round = checks.runOnce()
      for (const deadline = Date.now() + 20_000; stalled.requests.length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50))
      const started = performance.now()
      await checks.stop()
      expect(performance.now() - started, 'the stop took the check timeout').to.be.below(2000)
      expect(stalled.requests.length).to.be.above(0)
      expect((await round)?.mirrors.find((m) => m.id === id)?.skipped).to.equal('the round was stopped')
      expect(await database.db.selectFrom('background_round').selectAll().execute(), 'a round cut short is not the last round').to.deep.equal(lastRounds)
    } finally {
      await stalled.close()
    }
  })
})
