/**
 * Mirror ids (`smallint`): the add path takes the lowest free id, so ids of removed mirrors
 * are reused; the statistics of a removed mirror are never reported under the mirror that
 * reuses its id; concurrent adds never collide; and a full id space gives MIRROR_LIMIT.
 */
import {expect} from 'chai'
import {sql} from 'kysely'
import {MbError} from '../../src/lib/errors.js'
import {addMirror, listRemovedMirrors, MAX_MIRROR_ID, removeMirror} from '../../src/lib/mirrors/registry.js'
import {queryStats} from '../../src/lib/stats/query.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`mirror ids (${backend})`, function () {
  this.timeout(120_000)
  const store = useTestDatabase()

  it('reuses the id of a removed mirror, and moves its statistics to the removed id (-id)', async () => {
    const a = await addMirror(store.database.db, {identifier: 'a.example', http_url: 'http://a.example/'})
    const b = await addMirror(store.database.db, {identifier: 'b.example', http_url: 'http://b.example/'})
    const c = await addMirror(store.database.db, {identifier: 'c.example', http_url: 'http://c.example/'})
    expect([a.id, b.id, c.id]).to.deep.equal([1, 2, 3])
    await sql`INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes) VALUES ('2026-11-30', 'x.iso', 2, 'DE', 7, 700)`.execute(store.database.db)
    await sql`INSERT INTO stats_monthly (month, path, mirror_id, country, downloads, bytes) VALUES ('2026-10-01', 'x.iso', 2, 'DE', 5, 500)`.execute(store.database.db)
    await removeMirror(store.database.db, 'b.example')
    const d = await addMirror(store.database.db, {identifier: 'd.example', http_url: 'http://d.example/'})
    expect(d.id).to.equal(2)
    const daily = await sql<{mirror_id: number; downloads: string}>`SELECT mirror_id, downloads::text FROM stats_daily ORDER BY mirror_id`.execute(store.database.db)
    expect(daily.rows).to.deep.equal([{mirror_id: -2, downloads: '7'}])
    const monthly = await sql<{mirror_id: number; downloads: string}>`SELECT mirror_id, downloads::text FROM stats_monthly ORDER BY mirror_id`.execute(store.database.db)
    expect(monthly.rows).to.deep.equal([{mirror_id: -2, downloads: '5'}])

    // A second removed mirror of the same id adds into the same removed-id rows.
    await sql`INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes) VALUES ('2026-11-30', 'x.iso', 2, 'DE', 3, 300)`.execute(store.database.db)
    await removeMirror(store.database.db, 'd.example')
    expect((await addMirror(store.database.db, {identifier: 'e.example', http_url: 'http://e.example/'})).id).to.equal(2)
    const merged = await sql<{mirror_id: number; downloads: string; bytes: string}>`SELECT mirror_id, downloads::text, bytes::text FROM stats_daily`.execute(store.database.db)
    expect(merged.rows).to.deep.equal([{mirror_id: -2, downloads: '10', bytes: '1000'}])

    // An insert that leaves the id to the column default starts above the ids in use.
    const raw = await store.database.db.insertInto('mirror').values({identifier: 'raw.example', http_url: 'http://raw.example/'}).returning('id').executeTakeFirstOrThrow()
    expect(raw.id).to.equal(4)
  })

  it('gives concurrent adds distinct ids', async () => {
    const added = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => addMirror(store.database.db, {identifier: `par${i}.example`, http_url: `http://par${i}.example/`})))
    const ids = added.map((m) => m.id).sort((x, y) => x - y)
    expect(ids).to.deep.equal([5, 6, 7, 8, 9, 10])
  })

  it('says clearly when every id is taken (MIRROR_LIMIT), and adds again once one is freed', async () => {
    await sql`INSERT INTO mirror (id, identifier, http_url)
      SELECT g, 'bulk' || g || '.example', 'http://bulk' || g || '.example/' FROM generate_series(11, ${MAX_MIRROR_ID}) g`.execute(store.database.db)
    let error: unknown
    try {
      await addMirror(store.database.db, {identifier: 'one-too-many.example', http_url: 'http://one-too-many.example/'})
    } catch (caught) {
      error = caught
    }
    expect(error).to.be.instanceOf(MbError)
    expect((error as MbError).code).to.equal('MIRROR_LIMIT')
    expect((error as MbError).exitCode).to.equal(1)
    expect((error as MbError).message).to.contain('all 32767 mirror ids are in use')
    expect((await sql<{n: number}>`SELECT count(*)::int AS n FROM mirror WHERE identifier = 'one-too-many.example'`.execute(store.database.db)).rows[0].n).to.equal(0)

    await removeMirror(store.database.db, 'bulk20000.example')
    const again = await addMirror(store.database.db, {identifier: 'one-too-many.example', http_url: 'http://one-too-many.example/'})
    expect(again.id).to.equal(20_000)
  })

  it('keeps a record of each removed mirror, and mb stats names its counts "NAME (removed)"', async () => {
    await sql`UPDATE mirror SET rsync_url = 'rsync://scan:secret@bulk11.example/pub/' WHERE identifier = 'bulk11.example'`.execute(store.database.db)
    await sql`INSERT INTO stats_daily (day, path, mirror_id, country, downloads, bytes) VALUES ('2026-11-30', 'x.iso', 3, 'DE', 2, 200), ('2026-11-30', 'x.iso', 11, 'DE', 1, 100)`.execute(
      store.database.db,
    )
    await removeMirror(store.database.db, 'c.example')
    await removeMirror(store.database.db, 'bulk11.example', {removedBy: 'admin'})
    const removed = await listRemovedMirrors(store.database.db)
    expect(removed.slice(0, 5).map((r) => [r.identifier, r.mirror_id])).to.deep.equal([
      ['bulk11.example', 11],
      ['c.example', 3],
      ['bulk20000.example', 20_000],
      ['d.example', 2],
      ['b.example', 2],
    ])
    expect(removed[0]).to.include({removed_by: 'admin', http_url: 'http://bulk11.example/'})
    expect(removed[0].rsync_url).to.not.contain('secret')
    expect(removed[1].removed_by).to.be.a('string').and.not.equal('')
    const stats = await queryStats(store.database, {by: 'mirror'})
    expect(Object.fromEntries(stats.rows.map((r) => [r.key, r.downloads]))).to.deep.equal({
      'b.example, d.example (removed)': 15, // 10 by day and 5 in an older month
      'c.example (removed)': 2,
      'bulk11.example (removed)': 1,
    })
  })
})
