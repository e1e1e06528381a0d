import {execFileSync} from 'node:child_process'
import {randomBytes, createHash} from 'node:crypto'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {hashesFresh} from '../../src/lib/origin/freshness.js'
import {HashPool, hashFile, MAX_PIECE_SIZE, MIN_PIECE_SIZE, pieceSizeFor, splitPieces} from '../../src/lib/origin/hash.js'

describe('origin hashes', () => {
  let dir: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-hash-'))
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  it('grows the piece size with the file size, 256 KiB to 16 MiB, at most 2048 pieces', () => {
    expect(pieceSizeFor(0)).to.equal(MIN_PIECE_SIZE)
    expect(pieceSizeFor(16 * 1024 * 1024)).to.equal(256 * 1024)
    expect(pieceSizeFor(512 * 1024 * 1024)).to.equal(256 * 1024)
    expect(pieceSizeFor(512 * 1024 * 1024 + 1)).to.equal(512 * 1024)
    expect(pieceSizeFor(4 * 1024 ** 3)).to.equal(2 * 1024 * 1024)
    expect(pieceSizeFor(1024 ** 4)).to.equal(MAX_PIECE_SIZE)
  })

  it('computes md5/sha1/sha256 equal to coreutils and sha-256 pieces of each piece', async () => {
    const path = join(dir, 'data.bin')
    const data = randomBytes(700 * 1024 + 17)
    writeFileSync(path, data)
    const h = await hashFile(path)
    expect(h.md5).to.equal(execFileSync('md5sum', [path], {encoding: 'utf8'}).split(' ')[0])
    expect(h.sha1).to.equal(execFileSync('sha1sum', [path], {encoding: 'utf8'}).split(' ')[0])
    expect(h.sha256).to.equal(execFileSync('sha256sum', [path], {encoding: 'utf8'}).split(' ')[0])
    expect(h.pieceSize).to.equal(256 * 1024)
    expect(h.pieces).to.have.length(3)
    for (let i = 0; i < 3; i++) {
      const slice = data.subarray(i * h.pieceSize, (i + 1) * h.pieceSize)
      expect(h.pieces[i]).to.equal(createHash('sha256').update(slice).digest('hex'))
    }
    expect(h.size).to.equal(data.length)
    expect(splitPieces(h.pieces.join(''), 'sha256')).to.deep.equal(h.pieces)
  })

  it('hashes an empty file as one empty piece, and with SHA-1 pieces on request', async () => {
    const path = join(dir, 'empty')
    writeFileSync(path, '')
    const h = await hashFile(path, 'sha1')
    expect(h.md5).to.equal('d41d8cd98f00b204e9800998ecf8427e')
    expect(h.pieces).to.deep.equal(['da39a3ee5e6b4b0d3255bfef95601890afd80709'])
  })

  it('gives the same result on a worker thread as on the main thread', async () => {
    const path = join(dir, 'w.bin')
    writeFileSync(path, randomBytes(300 * 1024))
    const pool = new HashPool(2)
    try {
      const [a, b] = await Promise.all([pool.hash(path), hashFile(path)])
      expect(a).to.deep.equal(b)
      const missing = await pool.hash(join(dir, 'nope')).catch((error: NodeJS.ErrnoException) => error.code)
      expect(missing).to.equal('ENOENT')
    } finally {
      await pool.close()
    }
  })

  it('treats hashes as fresh only while size and mtime match the row and the disk', () => {
    const row = {size: 10, mtime: 1000, md5: 'a', sha1: 'b', sha256: 'c', piece_size: 262144, piece_hash: 'sha256', pieces: 'x', hashed_size: 10, hashed_mtime: 1000}
    expect(hashesFresh(row)).to.equal(true)
    expect(hashesFresh(row, {size: 10, mtimeMs: 1000_500})).to.equal(true)
    expect(hashesFresh(row, {size: 10, mtimeMs: 1001_000})).to.equal(false)
    expect(hashesFresh(row, {size: 11, mtimeMs: 1000_000})).to.equal(false)
    expect(hashesFresh({...row, hashed_mtime: 999})).to.equal(false)
    expect(hashesFresh({...row, sha256: null})).to.equal(false)
    expect(hashesFresh(null)).to.equal(false)
  })
})
