import {execFileSync} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {hashesFresh} from '../../src/lib/origin/freshness.js'
import {hashIndex, readStoredHashes} from '../../src/lib/origin/hash.js'
import {backend, useTestDatabase} from '../helpers/db.js'

describe(`hashIndex (${backend})`, () => {
  const store = useTestDatabase()
  let root: string

  async function addRow(path: string) {
    const st = statSync(join(root, path))
    await store.database.db
      .insertInto('file')
      .values({path, size: st.size, mtime: Math.floor(st.mtimeMs / 1000)})
      .execute()
  }

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-hashindex-'))
    mkdirSync(join(root, 'sub dir'))
    writeFileSync(join(root, 'a.iso'), randomBytes(600 * 1024))
    writeFileSync(join(root, 'sub dir', 'b.tar'), randomBytes(5000))
    writeFileSync(join(root, 'c.txt'), 'hello\n')
    for (const p of ['a.iso', 'sub dir/b.tar', 'c.txt']) await addRow(p)
  })
  after(async () => {
    rmSync(root, {recursive: true, force: true})
  })

  it('hashes every unhashed file on several threads and stores coreutils-equal digests', async () => {
    const seen: number[] = []
    const result = await hashIndex(store.database, root, {jobs: 2, batchSize: 2, onProgress: (p) => seen.push(p.files)})
    expect(result.hashed).to.equal(3)
    expect(result.failed).to.deep.equal([])
    expect(result.bytes).to.equal(600 * 1024 + 5000 + 6)
    expect(seen).to.deep.equal([1, 2, 3])
    const a = await readStoredHashes(store.database, 'a.iso')
    expect(a!.sha256).to.equal(execFileSync('sha256sum', [join(root, 'a.iso')], {encoding: 'utf8'}).split(' ')[0])
    expect(a!.md5).to.equal(execFileSync('md5sum', [join(root, 'a.iso')], {encoding: 'utf8'}).split(' ')[0])
    expect(a!.sha1).to.equal(execFileSync('sha1sum', [join(root, 'a.iso')], {encoding: 'utf8'}).split(' ')[0])
    expect(a!.piece_size).to.equal(262144)
    expect(a!.piece_hash).to.equal('sha256')
    expect(a!.pieces).to.have.length(3 * 64)
    expect(hashesFresh(a, statSync(join(root, 'a.iso')))).to.equal(true)
    const c = await readStoredHashes(store.database, 'c.txt')
    expect(c!.sha256).to.equal('5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03')
  })

  it('rehashes only files whose size or mtime changed', async () => {
    const again = await hashIndex(store.database, root, {jobs: 2})
    expect(again.hashed).to.equal(0)
    expect(again.current).to.equal(3)

    writeFileSync(join(root, 'c.txt'), 'hello, world\n')
    utimesSync(join(root, 'c.txt'), 2_000_000_000, 2_000_000_000)
    const before = await readStoredHashes(store.database, 'c.txt')
    expect(hashesFresh(before, statSync(join(root, 'c.txt')))).to.equal(false)
    // The walk records the new size/mtime; only then is the file due.
    await store.database.db.updateTable('file').set({size: 13, mtime: 2_000_000_000}).where('path', '=', 'c.txt').execute()
    expect(hashesFresh(await readStoredHashes(store.database, 'c.txt'))).to.equal(false)
    const result = await hashIndex(store.database, root, {jobs: 2})
    expect(result.hashed).to.equal(1)
    expect(result.current).to.equal(2)
    const after = await readStoredHashes(store.database, 'c.txt')
    expect(after!.hashed_mtime).to.equal(2_000_000_000)
    expect(after!.sha256).to.equal(execFileSync('sha256sum', [join(root, 'c.txt')], {encoding: 'utf8'}).split(' ')[0])
    expect(hashesFresh(after, statSync(join(root, 'c.txt')))).to.equal(true)
  })

  it('limits hashing to a subtree', async () => {
    const result = await hashIndex(store.database, root, {jobs: 1, force: true, subdir: 'sub dir'})
    expect(result.hashed).to.equal(1)
  })

  it('pages through due files and rehashes everything with force', async () => {
    const seen: string[] = []
    const result = await hashIndex(store.database, root, {jobs: 2, force: true, pageRows: 1, batchSize: 1, onProgress: (p) => seen.push(p.path!)})
    expect(result.hashed).to.equal(3)
    expect(result.current).to.equal(0)
    expect(seen.sort()).to.deep.equal(['a.iso', 'c.txt', 'sub dir/b.tar'])
    const sha1Pieces = await hashIndex(store.database, root, {jobs: 1, pieceHash: 'sha1'})
    expect(sha1Pieces.hashed).to.equal(3)
    const a = await readStoredHashes(store.database, 'a.iso')
    expect(a!.piece_hash).to.equal('sha1')
    expect(a!.pieces).to.have.length(3 * 40)
    // Switching back to SHA-256 pieces rehashes every file again.
    expect((await hashIndex(store.database, root, {jobs: 2})).hashed).to.equal(3)
  })

  it('reports a vanished file as failed and keeps going; refuses a missing root', async () => {
    await store.database.db.insertInto('file').values({path: 'gone.bin', size: 5, mtime: 1}).execute()
    const result = await hashIndex(store.database, root, {jobs: 1})
    expect(result.hashed).to.equal(0)
    expect(result.failed.map((f) => f.path)).to.deep.equal(['gone.bin'])
    const error = await hashIndex(store.database, join(root, 'nope')).catch((e) => e)
    expect(error.code).to.equal('ROOT_INVALID')
  })
})
