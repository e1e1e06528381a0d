/**
 * `select.trust_trace` (src/lib/probe/trust.ts) on a real store: which new files a mirror's
 * sync trace vouches for, and which it does not.
 */
import {expect} from 'chai'
import {sql} from 'kysely'
import {trustTrace} from '../../src/lib/probe/trust.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`trusting sync traces for new files (${backend})`, function () {
  const store = useTestDatabase()
  const NOW = Date.now()
  const at = (secondsAgo: number) => new Date(NOW - secondsAgo * 1000)

  async function file(path: string, indexedSecondsAgo: number, mirrors: number[] = []): Promise<number> {
    const row = await store.database.db.insertInto('file').values({path, size: 1000, mtime: 1_700_000_000, mirrors}).returning('id').executeTakeFirstOrThrow()
    await sql`UPDATE file SET indexed_at = ${at(indexedSecondsAgo)} WHERE id = ${row.id}`.execute(store.database.db)
    return row.id
  }

  it('vouches for files indexed after the last scan and at least the margin before the trace, in folders the mirror holds by scan', async () => {
    const m = await store.database.db
      .insertInto('mirror')
      .values({identifier: 'm.test', http_url: 'http://m.test/', last_scan_ok_at: at(3600), synced_at: at(60), base_path: 'pub', exclude_patterns: ['**/*.tmp']})
      .returning('id')
      .executeTakeFirstOrThrow()
    const M = m.id
    await file('pub/a/held.iso', 7200, [M])
    const fresh = await file('pub/a/new.iso', 600)
    await file('pub/a/too-new.iso', 90) // indexed 90 s ago, the trace says 60 s ago: within the margin (60 s)
    await file('pub/a/seen-by-scan.iso', 7200) // older than the last scan, which did not list it
    await file('pub/a/skip.tmp', 600) // the mirror's exclude glob
    await file('pub/b/new.iso', 600) // a folder the mirror holds nothing of
    await file('other/new.iso', 600) // outside its base path
    const bad = await file('pub/a/bad.iso', 600)
    await store.database.db.insertInto('mirror_file_bad').values({mirror_id: M, file_id: bad, size: 1000, mtime: 1_700_000_000, piece: 0}).execute()
    expect(await trustTrace(store.database.db, M, 60)).to.deep.equal(['pub/a/new.iso'])
    const row = await store.database.db.selectFrom('file').select('mirrors').where('id', '=', fresh).executeTakeFirstOrThrow()
    expect(row.mirrors.map(Number)).to.deep.equal([M])
    const traced = await store.database.db.selectFrom('mirror_file_trace').select(['file_id', 'trace_at']).execute()
    expect(traced.map((t) => [Number(t.file_id), new Date(t.trace_at).getTime()])).to.deep.equal([[fresh, at(60).getTime()]])
    // A copy vouched for by trace does not vouch for its folder in turn, and a second call adds nothing.
    await file('pub/c/first.iso', 600)
    expect(await trustTrace(store.database.db, M, 60)).to.deep.equal([])
  })

  it('does nothing for a mirror without a trace or without a successful scan', async () => {
    const m = await store.database.db
      .insertInto('mirror')
      .values({identifier: 'n.test', http_url: 'http://n.test/', synced_at: at(60)})
      .returning('id')
      .executeTakeFirstOrThrow()
    expect(await trustTrace(store.database.db, m.id, 0)).to.deep.equal([])
  })
})
