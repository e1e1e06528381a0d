/**
 * dnf's countme counts: the collector keeps them per UTC day x repo x arch x bucket, a flush
 * adds them to `stats_countme` (twice adds up), and `mb stats countme` sums them over days.
 */
import {expect} from 'chai'
import type {Database} from '../../src/lib/db/index.js'
import {StatsCollector} from '../../src/lib/stats/collector.js'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

const DAY1 = Date.UTC(2026, 10, 30, 12)
const DAY2 = Date.UTC(2026, 11, 1, 8)

describe(`countme statistics (${backend})`, function () {
  this.timeout(60_000)
  let t: TestDatabase
  let database: Database

  before(async () => {
    t = await createTestDatabase()
    database = await t.open()
  })

  after(async () => {
    await database?.close()
    await t?.drop()
  })

  it('counts, flushes and reports by repo, arch and bucket', async () => {
    const collector = new StatsCollector()
    const request = (time: number, repo: string, bucket: number) => ({
      time,
      method: 'GET',
      path: `${repo}/repodata/repomd.xml`,
      outcome: 'metalink',
      bytesSent: 10,
      countme: {repo, arch: 'x86_64', bucket},
    })
    for (const o of [request(DAY1, 'f-42', 1), request(DAY1, 'f-42', 1), request(DAY1, 'f-42', 4), request(DAY2, 'f-42', 2), request(DAY2, 'epel-9', 3)]) collector.observer(o)
    expect((await collector.flush(database)).ok).to.equal(true)
    collector.observer(request(DAY2, 'f-42', 2))
    expect((await collector.flush(database)).ok).to.equal(true)
    if (backend === 'pglite') await database.close()
    try {
      const all = await mb(['stats', 'countme', '--json'], {env: t.env})
      expect(all.code, all.stderr).to.equal(0)
      expect(JSON.parse(all.stdout)).to.deep.equal({
        rows: [
          {repo: 'epel-9', arch: 'x86_64', buckets: [0, 0, 1, 0], total: 1},
          {repo: 'f-42', arch: 'x86_64', buckets: [2, 2, 0, 1], total: 5},
        ],
      })
      const day2 = await mb(['stats', 'countme', '--since', '2026-12-01', '--until', '2026-12-01'], {env: t.env})
      expect(day2.code, day2.stderr).to.equal(0)
      expect(day2.stdout).to.equal('repo\tarch\tbucket 1\tbucket 2\tbucket 3\tbucket 4\ttotal\nepel-9\tx86_64\t0\t0\t1\t0\t1\nf-42\tx86_64\t0\t2\t0\t0\t2\n')
    } finally {
      if (backend === 'pglite') database = await t.open()
    }
  })
})
