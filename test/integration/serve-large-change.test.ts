/**
 * A large change set (50,000 new files) applied to the serving snapshot while `mb serve`
 * answers requests: the refresh reads and parses the set in slices and yields between them,
 * so requests keep being answered during it; readers never see half of the set; and the new
 * files are served once it is applied. The worst event-loop delay is measured and printed
 * (never asserted: tests check correctness, not time).
 */
import {expect} from 'chai'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {monitorEventLoopDelay} from 'node:perf_hooks'
import {sql} from 'kysely'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {loadSnapshot, refreshSnapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {backend, useTestDatabase} from '../helpers/db.js'

const OLD_FILES = 60_000
const NEW_FILES = 50_000

async function insertFiles(database: Database, dir: string, count: number): Promise<void> {
  await sql`INSERT INTO file (path, size, mtime, mirrors)
    SELECT ${dir} || '/f' || g || '.iso', 1000000, 1700000000, '{1}' FROM generate_series(1, ${count}) g`.execute(database.db)
}

describe(`a large snapshot change under load (${backend})`, function () {
  this.timeout(180_000)
  const store = useTestDatabase()
  let root: string
  let running: RunningServer | undefined

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-large-change-'))
    await store.database.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: 'http://m.example/'}).execute()
    await insertFiles(store.database, 'old', OLD_FILES)
  })
  after(async () => {
    await running?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('applies the set all at once for readers, yielding to the event loop while it is read', async () => {
    const snapshot = await loadSnapshot(store.database)
    await insertFiles(store.database, 'aside', NEW_FILES)
    let ticks = 0
    let torn = 0
    let stop = false
    const watch = () => {
      if (stop) return
      ticks++
      if (snapshot.files.has('aside/f1.iso') !== snapshot.files.has(`aside/f${NEW_FILES}.iso`)) torn++
      setImmediate(watch)
    }
    setImmediate(watch)
    const result = await refreshSnapshot(store.database, snapshot)
    stop = true
    expect(result).to.deep.equal({mirrors: 1, updated: NEW_FILES, deleted: 0})
    expect(snapshot.files.size).to.equal(OLD_FILES + NEW_FILES)
    expect([...snapshot.files.get(`aside/f${NEW_FILES}.iso`)!.mirrors]).to.deep.equal([1])
    expect(torn).to.equal(0)
    // One slice per 2,000 rows at least: the loop ran between slices.
    expect(ticks).to.be.at.least(NEW_FILES / 2_000)
    console.log(`      event-loop turns during the refresh: ${ticks}`)
  })

  it('answers every request during the refresh, and serves the new files after it', async () => {
    const config = ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, log_level: 'silent'})
    running = await startServe(config, {database: store.database})
    const base = running.url
    const before = await fetch(`${base}/new/f1.iso`, {redirect: 'manual'})
    expect(before.status).to.equal(404)

    const histogram = monitorEventLoopDelay({resolution: 1})
    const statuses = new Map<number, number>()
    let worstMs = 0
    let done = false
    const client = async (k: number) => {
      for (let i = 0; !done; i++) {
        const t0 = performance.now()
        const res = await fetch(`${base}/old/f${((k * 7919 + i) % OLD_FILES) + 1}.iso`, {redirect: 'manual'})
        await res.arrayBuffer()
        worstMs = Math.max(worstMs, performance.now() - t0)
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1)
      }
    }
    const clients = [0, 1, 2, 3].map(client)
    await new Promise((r) => setTimeout(r, 300))
    // On the embedded store the insert itself runs on this event loop: measure from its end.
    await insertFiles(store.database, 'new', NEW_FILES)
    histogram.enable()
    let served = false
    for (let i = 0; i < 600 && !served; i++) {
      const res = await fetch(`${base}/new/f${NEW_FILES}.iso`, {redirect: 'manual'})
      served = res.status === 302
      if (served) expect(res.headers.get('location')).to.equal(`http://m.example/new/f${NEW_FILES}.iso`)
      else await new Promise((r) => setTimeout(r, 50))
    }
    histogram.disable()
    done = true
    await Promise.all(clients)
    console.log(
      `      worst event-loop delay during a ${NEW_FILES}-row refresh (${backend}): ${(histogram.max / 1e6).toFixed(1)} ms (p99 ${(histogram.percentile(99) / 1e6).toFixed(1)} ms); slowest request ${worstMs.toFixed(1)} ms`,
    )
    expect(served).to.equal(true)
    const first = await fetch(`${base}/new/f1.iso`, {redirect: 'manual'})
    expect(first.status).to.equal(302)
    expect(first.headers.get('location')).to.equal('http://m.example/new/f1.iso')
    expect([...statuses.keys()]).to.deep.equal([302])
    expect(statuses.get(302)).to.be.greaterThan(0)
  })
})
