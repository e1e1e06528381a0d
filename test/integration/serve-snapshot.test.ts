import {expect} from 'chai'
import {sql} from 'kysely'
import pg from 'pg'
import {loadSnapshot, refreshSnapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {removeMirror} from '../../src/lib/mirrors/registry.js'
import {backend, useTestDatabase} from '../helpers/db.js'
import {expectRecount} from '../helpers/snapshot-counts.js'

describe(`serve snapshot load and incremental refresh (${backend})`, () => {
  const store = useTestDatabase()

  before(async () => {
    await store.database.db
      .insertInto('mirror')
      .values([
        {id: 1, identifier: 'a.example', http_url: 'http://a.example/', country: 'DE'},
        {id: 2, identifier: 'b.example', http_url: 'http://b.example/', country: 'FR'},
      ] as any)
      .execute()
    await store.database.db
      .insertInto('file')
      .values([
        {path: 'keep.iso', size: 10, mtime: 1, mirrors: [1, 2]},
        {path: 'change.iso', size: 20, mtime: 2, mirrors: [1]},
        {path: 'drop.iso', size: 30, mtime: 3, mirrors: []},
      ])
      .execute()
    await sql`UPDATE file SET md5 = 'd41d8cd98f00b204e9800998ecf8427e', hashed_size = size, hashed_mtime = mtime WHERE path = 'keep.iso'`.execute(store.database.db)
  })

  it('loads mirrors and files with sizes, mtimes, mirror sets and fresh hashes', async () => {
    const snap = await loadSnapshot(store.database)
    expect([...snap.mirrors.keys()]).to.deep.equal([1, 2])
    expect(snap.mirrors.get(1)).to.include({identifier: 'a.example', httpUrl: 'http://a.example/', country: 'DE', continent: 'EU', enabled: true})
    expect(snap.files.size).to.equal(3)
    const keep = snap.files.get('keep.iso')!
    expect({size: keep.size, mtime: keep.mtime, mirrors: [...keep.mirrors], md5: keep.md5}).to.deep.equal({size: 10, mtime: 1, mirrors: [1, 2], md5: 'd41d8cd98f00b204e9800998ecf8427e'})
    expect(snap.xmin).to.match(/^\d+:\d+:/)
  })

  it('applies inserts, updates, deletes and mirror changes; a refresh without changes applies nothing', async () => {
    const snap = await loadSnapshot(store.database)
    expect(await refreshSnapshot(store.database, snap)).to.deep.equal({mirrors: 2, updated: 0, deleted: 0})
    await sql`UPDATE file SET mirrors = '{2}', size = 21 WHERE path = 'change.iso'`.execute(store.database.db)
    await sql`DELETE FROM file WHERE path = 'drop.iso'`.execute(store.database.db)
    await sql`INSERT INTO file (path, size, mtime, mirrors) VALUES ('new.iso', 40, 4, '{1,2}')`.execute(store.database.db)
    await sql`UPDATE mirror SET enabled = false WHERE id = 2`.execute(store.database.db)
    expect(await refreshSnapshot(store.database, snap)).to.deep.equal({mirrors: 2, updated: 2, deleted: 1})
    expect([...snap.files.keys()].sort()).to.deep.equal(['change.iso', 'keep.iso', 'new.iso'])
    expect(snap.files.get('change.iso')).to.include({size: 21})
    expect([...snap.files.get('change.iso')!.mirrors]).to.deep.equal([2])
    expect(snap.mirrors.get(2)!.enabled).to.equal(false)
    expect(await refreshSnapshot(store.database, snap)).to.deep.equal({mirrors: 2, updated: 0, deleted: 0})
    // Deleted and re-created between two refreshes: present afterwards.
    await sql`DELETE FROM file WHERE path = 'new.iso'`.execute(store.database.db)
    await sql`INSERT INTO file (path, size, mtime) VALUES ('new.iso', 41, 5)`.execute(store.database.db)
    await refreshSnapshot(store.database, snap)
    expect(snap.files.get('new.iso')).to.include({size: 41})
  })

  if (backend === 'postgres') {
    it('misses no commit of a transaction that was in flight at the previous refresh', async () => {
      const snap = await loadSnapshot(store.database)
      const slow = new pg.Client({connectionString: store.test.url})
      await slow.connect()
      try {
        await slow.query('BEGIN')
        await slow.query(`INSERT INTO file (path, size, mtime) VALUES ('slow.iso', 50, 5)`)
        await sql`INSERT INTO file (path, size, mtime) VALUES ('fast.iso', 60, 6)`.execute(store.database.db)
        await refreshSnapshot(store.database, snap)
        expect(snap.files.has('fast.iso')).to.equal(true)
        expect(snap.files.has('slow.iso')).to.equal(false)
        await slow.query('COMMIT')
        const result = await refreshSnapshot(store.database, snap)
        expect(snap.files.get('slow.iso')).to.include({size: 50})
        expect(result.updated).to.equal(1) // only the late commit, not fast.iso again
      } finally {
        await slow.end()
      }
    })
  }

  /** Commits a new file from another connection; resolves to the number of connections reading the file table. */
  async function lateCommit(): Promise<number> {
    const other = new pg.Client({connectionString: store.test.url})
    await other.connect()
    try {
      await other.query(`INSERT INTO file (path, size, mtime) VALUES ('late.iso', 1, 1)`)
      const {rows} = await other.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%FROM file WHERE id > $1 AND id <= $2%' AND xact_start IS NOT NULL AND pid <> pg_backend_pid()`,
      )
      return rows[0].n
    } finally {
      await other.end()
    }
  }

  it('loads more than 200,000 files in two halves of one consistent view', async function () {
    this.timeout(120_000)
    await sql`INSERT INTO file (path, size, mtime, mirrors) SELECT 'bulk/' || n, n, n, '{1}' FROM generate_series(1, 200000) n`.execute(store.database.db)
    const [{n: total}] = (await sql<{n: number}>`SELECT count(*)::int AS n FROM file`.execute(store.database.db)).rows
    let late: Promise<number> | undefined
    const snap = await loadSnapshot(store.database, () => {
      // On PostgreSQL: a commit during the load, from another connection, stays out of it, and
      // two connections read the file table at once.
      if (backend === 'postgres' && !late) late = lateCommit()
    })
    if (backend === 'postgres') expect(await late).to.equal(2)
    expect(snap.files.size).to.equal(total)
    expect(snap.files.has('late.iso')).to.equal(false)
    expect(snap.files.get('bulk/1')).to.include({size: 1, mtime: 1})
    expect([...snap.files.get('bulk/200000')!.mirrors]).to.deep.equal([1])
    await sql`DELETE FROM file WHERE path LIKE 'bulk/%' OR path = 'late.iso'`.execute(store.database.db)
  })

  it('keeps per-directory counts equal to a recount through a load, refreshes and a mirror removal', async () => {
    await sql`INSERT INTO mirror (id, identifier, http_url, country, base_path) VALUES (3, 'c.example', 'http://c.example/', 'SE', 'tree/a/')`.execute(store.database.db)
    await sql`INSERT INTO file (path, size, mtime, mirrors) VALUES ('tree/a/1.iso', 100, 1, '{1,3}'), ('tree/a/b/2.iso', 200, 1, '{3}'), ('tree/c/3.iso', 300, 1, '{1,2}'), ('tree/4.iso', 400, 1, '{}')`.execute(
      store.database.db,
    )
    const snap = await loadSnapshot(store.database)
    expectRecount(snap)
    // A new version (its set emptied), a new copy, a new file and a deleted one.
    await sql`UPDATE file SET size = 101, mirrors = '{}' WHERE path = 'tree/a/1.iso'`.execute(store.database.db)
    await sql`UPDATE file SET mirrors = '{3,1}' WHERE path = 'tree/a/b/2.iso'`.execute(store.database.db)
    await sql`INSERT INTO file (path, size, mtime, mirrors) VALUES ('tree/a/b/5.iso', 500, 1, '{1,3}')`.execute(store.database.db)
    await sql`DELETE FROM file WHERE path = 'tree/c/3.iso'`.execute(store.database.db)
    await refreshSnapshot(store.database, snap)
    expectRecount(snap)
    expect(snap.files.counts.heldFiles('tree/a/', 3)).to.equal(2)
    await removeMirror(store.database.db, 'c.example')
    await refreshSnapshot(store.database, snap)
    expectRecount(snap)
    expect(snap.files.counts.heldFiles('tree/a/', 3)).to.equal(0)
    await sql`DELETE FROM file WHERE path LIKE 'tree/%'`.execute(store.database.db)
  })
})
