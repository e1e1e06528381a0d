/**
 * The database side of scans on demand (src/lib/scan/demand-store.ts, migration 0025): folder
 * claims (cooldown and deduplication across replicas), the per-mirror budget, the candidate
 * mirrors (traces), and the totals `mb stats` reports.
 */
import {expect} from 'chai'
import {sql} from 'kysely'
import {demandTotals, sqlDemandStore} from '../../src/lib/scan/demand-store.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`scans on demand: the store (${backend})`, function () {
  const store = useTestDatabase({each: true})
  const db = () => store.database.db

  async function mirror(identifier: string, extra: Record<string, unknown> = {}): Promise<number> {
    const row = await db()
      .insertInto('mirror')
      .values({identifier, http_url: `http://${identifier}/`, enabled: true, ...extra} as any)
      .returning('id')
      .executeTakeFirstOrThrow()
    return row.id
  }

  it('a folder is claimed once per cooldown, by one replica at a time; a release lets it be claimed after the retry', async () => {
    const demand = sqlDemandStore(db())
    const claims = await Promise.all([demand.claim('pub/a', 300), demand.claim('pub/a', 300), demand.claim('pub/a', 300)])
    expect(claims.filter(Boolean)).to.have.length(1)
    expect(await demand.claim('pub/b', 300)).to.equal(true)
    expect(await demand.claim('pub/a', 300)).to.equal(false)
    await demand.release('pub/a', 300, 0)
    expect(await demand.claim('pub/a', 300)).to.equal(true)
    await sql`UPDATE demand_scan SET claimed_at = now() - interval '301 seconds' WHERE folder = 'pub/b'`.execute(db())
    expect(await demand.claim('pub/b', 300)).to.equal(true)
  })

  it('spends a mirror budget per hour and records the runs and the day totals', async () => {
    const demand = sqlDemandStore(db())
    const m = await mirror('a.test')
    const first = await demand.spend(m, 'pub', 2)
    const second = await demand.spend(m, 'pub', 2)
    expect(first).to.not.equal(undefined)
    expect(second).to.not.equal(undefined)
    expect(await demand.spend(m, 'pub', 2)).to.equal(undefined)
    await demand.finishRun(first!, true, 3)
    await demand.finishRun(second!, false, 0)
    await demand.finishFolder('pub', {mirrors: 2, failed: 1, found: 3})
    await sql`UPDATE demand_scan_run SET started_at = now() - interval '61 minutes'`.execute(db())
    expect(await demand.spend(m, 'pub', 2)).to.not.equal(undefined)
    const runs = await db().selectFrom('demand_scan_run').select(['ok', 'found']).orderBy('id').execute()
    expect(runs.map((r) => [r.ok, Number(r.found)])).to.deep.equal([
      [true, 3],
      [false, 0],
      [null, 0],
    ])
    expect(await demandTotals(db())).to.deep.equal({folder_scans: 1, mirror_scans: 2, failed: 1, files_found: 3})
    expect(await demandTotals(db(), '2000-01-01', '2000-01-02')).to.deep.equal({folder_scans: 0, mirror_scans: 0, failed: 0, files_found: 0})
  })

  it("a refunded slot is the budget's again; changedSince tells a folder of files indexed within the window", async () => {
    const demand = sqlDemandStore(db())
    const m = await mirror('a.test')
    const first = await demand.spend(m, 'pub', 1)
    expect(await demand.spend(m, 'pub', 1)).to.equal(undefined)
    await demand.refund(first!)
    expect(await demand.spend(m, 'pub', 1)).to.not.equal(undefined)
    await db()
      .insertInto('file')
      .values([
        {path: 'pub/new.iso', size: 1, mtime: 1, mirrors: []},
        {path: 'old/old.iso', size: 1, mtime: 1, mirrors: [], indexed_at: new Date(Date.now() - 2 * 86_400_000)},
      ] as any)
      .execute()
    expect(await demand.changedSince(['pub/new.iso'], 86_400)).to.equal(true)
    expect(await demand.changedSince(['old/old.iso', 'old/missing.iso'], 86_400)).to.equal(false)
  })

  it('candidates: enabled mirrors with a scan URL lacking the file; with traces, only those synced after the file appeared', async () => {
    const demand = sqlDemandStore(db())
    const holder = await mirror('holder.test')
    await mirror('disabled.test', {enabled: false})
    await mirror('no-trace.test')
    await mirror('synced.test', {synced_at: new Date(Date.now() - 10_000)})
    await mirror('lagging.test', {synced_at: new Date(Date.now() - 7_200_000)})
    const file = await db()
      .insertInto('file')
      .values({path: 'pub/new.iso', size: 1, mtime: 1, mirrors: [holder]})
      .returning('id')
      .executeTakeFirstOrThrow()
    await sql`UPDATE file SET indexed_at = now() - interval '1 hour' WHERE id = ${file.id}`.execute(db())
    const names = async (useTraces: boolean) => (await demand.candidates('pub', ['pub/new.iso'], useTraces)).map((m) => m.identifier)
    expect(await names(true)).to.deep.equal(['no-trace.test', 'synced.test'])
    expect(await names(false)).to.deep.equal(['no-trace.test', 'synced.test', 'lagging.test'])
    expect(await demand.candidates('pub', ['pub/not-indexed.iso'], false)).to.deep.equal([])
  })
})
