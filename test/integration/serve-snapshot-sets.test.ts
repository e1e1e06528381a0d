import {expect} from 'chai'
import {sql} from 'kysely'
import {loadSnapshot, refreshSnapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {backend, useTestDatabase} from '../helpers/db.js'

const MD5 = 'd41d8cd98f00b204e9800998ecf8427e'
const SHA1 = 'da39a3ee5e6b4b0d3255bfef95601890afd80709'
const SHA256 = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'

describe(`serve snapshot: interned mirror sets and stored digests (${backend})`, () => {
  const store = useTestDatabase()

  before(async () => {
    await store.database.db
      .insertInto('mirror')
      .values([1, 2, 3].map((id) => ({id, identifier: `m${id}.example`, http_url: `http://m${id}.example/`, country: 'DE'})) as any)
      .execute()
    await store.database.db
      .insertInto('file')
      .values([
        {path: 'dir/a.iso', size: 10, mtime: 1, mirrors: [1, 2, 3]},
        {path: 'dir/b.iso', size: 20, mtime: 2, mirrors: [1, 2, 3]},
        {path: 'dir/c.iso', size: 30, mtime: 3, mirrors: [1, 2, 3]},
        {path: 'dir/d.iso', size: 40, mtime: 4, mirrors: [1, 2]},
        {path: 'hashed.iso', size: 50, mtime: 5, mirrors: [1, 2]},
        {path: 'upper.iso', size: 60, mtime: 6, mirrors: []},
      ])
      .execute()
    await sql`UPDATE file SET md5 = ${MD5}, sha1 = ${SHA1}, sha256 = ${SHA256}, hashed_size = size, hashed_mtime = mtime WHERE path = 'hashed.iso'`.execute(store.database.db)
    // Not lowercase hex: kept as the index has it.
    await sql`UPDATE file SET md5 = ${MD5.toUpperCase()}, hashed_size = size, hashed_mtime = mtime WHERE path = 'upper.iso'`.execute(store.database.db)
  })

  it('shares one set among files with the same mirrors; a file whose set changes gets the interned new set, the others keep the old one', async () => {
    const snap = await loadSnapshot(store.database)
    const file = (path: string) => snap.files.get(path)!
    const [a, b, c, d] = ['dir/a.iso', 'dir/b.iso', 'dir/c.iso', 'dir/d.iso'].map(file)
    expect(b.mirrors).to.equal(a.mirrors)
    expect(c.mirrors).to.equal(a.mirrors)
    expect(file('hashed.iso').mirrors).to.equal(d.mirrors)
    expect(d.mirrors).to.not.equal(a.mirrors)
    expect({sets: snap.mirrorSets.sets, slots: snap.mirrorSets.allocated}).to.deep.equal({sets: 2, slots: 5})

    // b moves to the set d already has: it gets that very set, a and c keep {1,2,3}.
    await sql`UPDATE file SET mirrors = '{1,2}' WHERE path = 'dir/b.iso'`.execute(store.database.db)
    expect(await refreshSnapshot(store.database, snap)).to.deep.equal({mirrors: 3, updated: 1, deleted: 0})
    expect(file('dir/b.iso').mirrors).to.equal(d.mirrors)
    expect([...file('dir/b.iso').mirrors]).to.deep.equal([1, 2])
    // The refresh left a and c where they were and replaced b.
    expect(snap.files.isCurrent('dir/a.iso', a)).to.equal(true)
    expect(snap.files.isCurrent('dir/c.iso', c)).to.equal(true)
    expect(snap.files.isCurrent('dir/b.iso', b)).to.equal(false)
    expect(file('dir/a.iso').mirrors).to.equal(a.mirrors)
    expect([...a.mirrors]).to.deep.equal([1, 2, 3])
    expect(c.mirrors).to.equal(a.mirrors)
    expect({sets: snap.mirrorSets.sets, slots: snap.mirrorSets.allocated}).to.deep.equal({sets: 2, slots: 5})

    // c moves to a set no file had: a new set, a keeps its own.
    await sql`UPDATE file SET mirrors = '{3,1}' WHERE path = 'dir/c.iso'`.execute(store.database.db)
    expect(await refreshSnapshot(store.database, snap)).to.deep.equal({mirrors: 3, updated: 1, deleted: 0})
    expect([...file('dir/c.iso').mirrors]).to.deep.equal([3, 1])
    expect(file('dir/c.iso').mirrors).to.not.equal(a.mirrors)
    expect([...file('dir/a.iso').mirrors]).to.deep.equal([1, 2, 3])
    expect({sets: snap.mirrorSets.sets, slots: snap.mirrorSets.allocated}).to.deep.equal({sets: 3, slots: 7})
    expect(snap.churn).to.equal(2)
  })

  it('reads the digests back as the hex the index holds', async () => {
    const snap = await loadSnapshot(store.database)
    const hashed = snap.files.get('hashed.iso')!
    expect({md5: hashed.md5, sha1: hashed.sha1, sha256: hashed.sha256}).to.deep.equal({md5: MD5, sha1: SHA1, sha256: SHA256})
    const upper = snap.files.get('upper.iso')!
    expect({md5: upper.md5, sha1: upper.sha1, sha256: upper.sha256}).to.deep.equal({md5: MD5.toUpperCase(), sha1: null, sha256: null})
    const plain = snap.files.get('dir/a.iso')!
    expect({md5: plain.md5, sha1: plain.sha1, sha256: plain.sha256}).to.deep.equal({md5: null, sha1: null, sha256: null})
    expect(snap.digests.records).to.equal(1)
  })
})
