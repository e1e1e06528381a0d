/**
 * The mirror list's outdated copies (`mirror_file_stale`) are read once per file version and
 * snapshot refresh (src/lib/metalink/stale-copies.ts): a second request under the same
 * refresh answers from memory; a refresh, a full reload or another version reads again.
 */
import {expect} from 'chai'
import {StaleCopiesCache} from '../../src/lib/metalink/stale-copies.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`mirror list: outdated copies kept between snapshot refreshes (${backend})`, () => {
  const store = useTestDatabase()
  const file = {path: 'big.iso', size: 10_000, mtime: 1_700_000_000}
  let fileId = 0

  before(async () => {
    await store.database.db.insertInto('mirror').values({id: 2, identifier: 'de.example.org', http_url: 'http://de.example.org/'}).execute()
    await store.database.db.insertInto('mirror').values({id: 3, identifier: 'fr.example.org', http_url: 'http://fr.example.org/'}).execute()
    const row = await store.database.db
      .insertInto('file')
      .values({...file, mirrors: []})
      .returning('id')
      .executeTakeFirstOrThrow()
    fileId = Number(row.id)
    await store.database.db.insertInto('mirror_file_stale').values({mirror_id: 2, file_id: fileId, size: 9000, mtime: file.mtime}).execute()
  })

  it('reads the copies once per refresh and version, and again after a refresh', async () => {
    const cache = new StaleCopiesCache(store.database)
    const snapshot = new Snapshot()
    snapshot.refreshedAt = 1000
    const first = await cache.of(snapshot, file)
    expect([...first]).to.deep.equal([[2, {size: 9000, mtime: file.mtime}]])
    // A scan finds a second outdated copy; until the next refresh the kept answer stands.
    await store.database.db.insertInto('mirror_file_stale').values({mirror_id: 3, file_id: fileId, size: 8000, mtime: null}).execute()
    expect(await cache.of(snapshot, file)).to.equal(first)
    snapshot.refreshedAt = 3000
    const refreshed = await cache.of(snapshot, file)
    expect([...refreshed].sort((a, b) => a[0] - b[0])).to.deep.equal([
      [2, {size: 9000, mtime: file.mtime}],
      [3, {size: 8000, mtime: null}],
    ])
    // Another version of the path (the snapshot holds it before the index row does): read anew, and it has none.
    expect((await cache.of(snapshot, {...file, size: 10_001})).size).to.equal(0)
    // A full reload is a new snapshot object.
    await store.database.db.deleteFrom('mirror_file_stale').where('mirror_id', '=', 3).execute()
    const reloaded = new Snapshot()
    reloaded.refreshedAt = 3000
    expect([...(await cache.of(reloaded, file))]).to.deep.equal([[2, {size: 9000, mtime: file.mtime}]])
  })
})
