import {expect} from 'chai'
import {sql} from 'kysely'
import {SnapshotKeeper} from '../../src/lib/serve/snapshot/keeper.js'
import {refreshSnapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {backend, useTestDatabase} from '../helpers/db.js'

/** Polls `check` every 20 ms; resolves to the seconds it took to hold, or throws after `seconds`. */
async function within(seconds: number, check: () => boolean): Promise<number> {
  const t0 = performance.now()
  while (!check()) {
    if (performance.now() - t0 > seconds * 1000) throw new Error(`not within ${seconds} s`)
    await new Promise((r) => setTimeout(r, 20))
  }
  return (performance.now() - t0) / 1000
}

describe(`serve snapshot keeper: long polls while LISTEN delivers, every change still prompt (${backend})`, function () {
  this.timeout(60_000)
  const store = useTestDatabase()
  let keeper: SnapshotKeeper | undefined

  before(async () => {
    await sql`INSERT INTO mirror (id, identifier, http_url, country, continent) VALUES (1, 'a.example', 'http://a.example/', 'DE', 'EU')`.execute(store.database.db)
    await sql`INSERT INTO file (path, size, mtime, mirrors) VALUES ('a.iso', 1, 1, '{1}'), ('b.iso', 2, 1, '{1}')`.execute(store.database.db)
  })

  afterEach(async () => {
    await keeper?.close()
    keeper = undefined
  })

  it('a file change, a corrupt copy found and one cleared arrive through NOTIFY, the poll 300 s away', async () => {
    keeper = await SnapshotKeeper.start(store.database, {pollSeconds: 300, listenPollSeconds: 300})
    const k = keeper
    await new Promise((r) => setTimeout(r, 200)) // the first poll after the LISTEN
    await sql`UPDATE file SET size = 5 WHERE path = 'a.iso'`.execute(store.database.db)
    expect(await within(2, () => k.current.files.get('a.iso')?.size === 5)).to.be.below(2)
    // A bad copy alone, the file's mirror set unchanged: mirror_file_bad notifies by itself.
    await sql`INSERT INTO mirror_file_bad (mirror_id, file_id, size, mtime, piece) SELECT 1, id, size, mtime, 0 FROM file WHERE path = 'b.iso'`.execute(store.database.db)
    await within(2, () => k.current.hasBadCopyUnder(1, 'b.iso'))
    await sql`DELETE FROM mirror_file_bad`.execute(store.database.db)
    await within(2, () => !k.current.hasBadCopyUnder(1, 'b.iso'))
  })

  it('a poll finds a bad copy written or removed without a notification (a standby delivers none), by txid and by count', async () => {
    keeper = await SnapshotKeeper.start(store.database, {pollSeconds: 300, listenPollSeconds: 300})
    const snapshot = keeper.current
    await keeper.close() // refreshed by hand below
    keeper = undefined
    await refreshSnapshot(store.database, snapshot)
    await sql`INSERT INTO mirror_file_bad (mirror_id, file_id, size, mtime, piece) SELECT 1, id, size, mtime, 0 FROM file WHERE path = 'b.iso'`.execute(store.database.db)
    expect(snapshot.hasBadCopyUnder(1, 'b.iso')).to.equal(false)
    await refreshSnapshot(store.database, snapshot)
    expect(snapshot.hasBadCopyUnder(1, 'b.iso'), 'a newer row').to.equal(true)
    await sql`UPDATE mirror_file_bad SET piece = 1`.execute(store.database.db)
    await sql`DELETE FROM mirror_file_bad`.execute(store.database.db)
    await refreshSnapshot(store.database, snapshot)
    expect(snapshot.hasBadCopyUnder(1, 'b.iso'), 'a smaller count').to.equal(false)
    await sql`INSERT INTO redirect_rule (name, priority, path_glob, target) VALUES ('local', 1, '*.iso', 'origin')`.execute(store.database.db)
    await refreshSnapshot(store.database, snapshot)
    expect(snapshot.counts.rules).to.equal(1)
    await sql`DELETE FROM redirect_rule`.execute(store.database.db)
    await refreshSnapshot(store.database, snapshot)
    expect(snapshot.counts.rules).to.equal(0)
  })

  // PostgreSQL only (declared, not skipped, elsewhere): the embedded store's LISTEN needs no connection to drop.
  if (backend === 'postgres')
    it('a dropped LISTEN connection is met with a refresh, then polls every poll_seconds until it is back', async () => {
      keeper = await SnapshotKeeper.start(store.database, {pollSeconds: 0.5, listenPollSeconds: 300})
      const k = keeper
      await new Promise((r) => setTimeout(r, 200))
      const killed = await sql<{n: number}>`
      SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`.execute(store.database.db)
      expect(killed.rows[0].n).to.equal(1)
      // Written while no one listens: only a poll can find it.
      await new Promise((r) => setTimeout(r, 100))
      await sql`UPDATE file SET size = 7 WHERE path = 'a.iso'`.execute(store.database.db)
      await within(3, () => k.current.files.get('a.iso')?.size === 7)
      // Back to listening (renewed after a refresh, at most once per 2 s): prompt again.
      await new Promise((r) => setTimeout(r, 3000))
      await sql`UPDATE file SET size = 8 WHERE path = 'a.iso'`.execute(store.database.db)
      await within(2, () => k.current.files.get('a.iso')?.size === 8)
    })
})
