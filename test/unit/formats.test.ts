/**
 * The BitTorrent and zsync documents against other tools: the info hash of a known file as
 * libtorrent 2.0.8 (`create_torrent(..., flags=v1_only)`, python3-libtorrent) and
 * transmission-create 4 (without its `private` key) compute it, and the zsync header fields
 * and block sums as zsyncmake 0.6.2 writes them for the same file.
 */
import {execFileSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import bencode from 'bencode'
import {expect} from 'chai'
import {hashFile} from '../../src/lib/origin/hash.js'
import {zsyncParams} from '../../src/lib/origin/zsync.js'
import {magnetLink, renderTorrent, torrentInfo} from '../../src/lib/metalink/torrent.js'
import {renderZsync, zsyncMtime} from '../../src/lib/metalink/zsync-control.js'

/** 3 MiB + 17 bytes: SHA-256 of `mb-known-0`, `mb-known-1`, … concatenated. */
function knownFile(): Buffer {
  const size = 3 * 1024 * 1024 + 17
  const out = Buffer.alloc(size)
  for (let i = 0, at = 0; at < size; i++, at += 32) createHash('sha256').update(`mb-known-${i}`).digest().copy(out, at)
  return out
}

// Computed for knownFile() by libtorrent 2.0.8 and by transmission-create (see above).
const KNOWN_INFO_HASH = '1b44255f2f0b18f16dd60a245b75e71b8c653446'
const KNOWN_SHA256 = 'b1d51962623a7c86a87dea7604352565d247bba70335a0b3d2fe9f6f5a087e9f'
const KNOWN_SHA1 = 'cf6f8983e9ec5e7cac13f9a0fbe04e59990528fa'

describe('BitTorrent and zsync documents', () => {
  let dir: string
  let path: string
  const data = knownFile()
  const mtime = Date.UTC(2026, 11, 2, 2, 6, 46) / 1000

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-formats-'))
    path = join(dir, 'known3.bin')
    writeFileSync(path, data)
    utimesSync(path, mtime, mtime)
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  it('gives the known file the info hash libtorrent and transmission-create compute', async () => {
    expect(createHash('sha256').update(data).digest('hex')).to.equal(KNOWN_SHA256)
    const h = await hashFile(path)
    expect(h.pieceSize).to.equal(262144)
    expect(h.sha1Pieces).to.have.length(13)
    const info = torrentInfo({name: 'known3.bin', size: h.size, pieceSize: h.pieceSize, sha1PiecesHex: h.sha1Pieces.join('')})
    expect(info.infoHash).to.equal(KNOWN_INFO_HASH)
    const decoded = bencode.decode(info.info)
    expect(Object.keys(decoded)).to.deep.equal(['length', 'name', 'piece length', 'pieces'])
    expect(decoded.length).to.equal(3145745)
    expect(Buffer.from(decoded.name).toString()).to.equal('known3.bin')
    expect(Buffer.from(decoded.pieces).subarray(0, 20).toString('hex')).to.equal(createHash('sha1').update(data.subarray(0, 262144)).digest('hex'))
  })

  it('writes a .torrent with url-list in the given order and no announce without trackers', async () => {
    const h = await hashFile(path)
    const info = torrentInfo({name: 'known3.bin', size: h.size, pieceSize: h.pieceSize, sha1PiecesHex: h.sha1Pieces.join('')})
    const seeds = ['http://a.example/pub/known3.bin', 'https://b.example/x/known3.bin', 'http://origin.example/pub/known3.bin']
    const body = renderTorrent(info, {webSeeds: seeds, trackers: [], creationDate: mtime, createdBy: 'mb/0.1.0'})
    const decoded = bencode.decode(body)
    expect(Object.keys(decoded)).to.deep.equal(['created by', 'creation date', 'info', 'url-list'])
    expect(decoded['url-list'].map((u: Uint8Array) => Buffer.from(u).toString())).to.deep.equal(seeds)
    expect(decoded['creation date']).to.equal(mtime)
    // The spliced info bytes are the canonical ones: re-encoding the whole gives the same bytes.
    expect(Buffer.from(bencode.encode(decoded)).equals(body)).to.equal(true)
    expect(createHash('sha1').update(bencode.encode(decoded.info)).digest('hex')).to.equal(KNOWN_INFO_HASH)
    const tracked = bencode.decode(renderTorrent(info, {webSeeds: seeds, trackers: ['udp://t1.example:6969/announce', 'http://t2.example/announce'], creationDate: mtime, createdBy: 'mb'}))
    expect(Buffer.from(tracked.announce).toString()).to.equal('udp://t1.example:6969/announce')
    expect(tracked['announce-list'].map((tier: Uint8Array[]) => tier.map((t) => Buffer.from(t).toString()))).to.deep.equal([['udp://t1.example:6969/announce'], ['http://t2.example/announce']])
  })

  it('percent-encodes every magnet value as a URI component, never as XML', () => {
    const info = {info: new Uint8Array(), infoHash: KNOWN_INFO_HASH, name: 'a b&c.iso', size: 42}
    const link = magnetLink(info, {webSeeds: ['http://m.example/p/a%20b%26c.iso?x=1&y=2'], torrentUrl: 'http://o.example/p/a%20b%26c.iso.torrent', trackers: ['udp://t.example:1/announce']})
    expect(link).to.equal(
      `magnet:?xt=urn:btih:${KNOWN_INFO_HASH}&dn=a%20b%26c.iso&xl=42&tr=udp%3A%2F%2Ft.example%3A1%2Fannounce&ws=http%3A%2F%2Fm.example%2Fp%2Fa%2520b%2526c.iso%3Fx%3D1%26y%3D2&xs=http%3A%2F%2Fo.example%2Fp%2Fa%2520b%2526c.iso.torrent`,
    )
    expect(link).to.not.include('&amp;')
  })

  it('chooses the zsync block size and hash lengths as zsyncmake does', () => {
    // What zsyncmake 0.6.2 writes for files of these sizes (Blocksize, Hash-Lengths).
    expect(zsyncParams(3145745)).to.deep.include({blockSize: 2048, seqMatches: 2, rsumLen: 2, checksumLen: 4})
    expect(zsyncParams(99999999)).to.deep.include({blockSize: 2048, rsumLen: 2, checksumLen: 5})
    expect(zsyncParams(100000000)).to.deep.include({blockSize: 4096, rsumLen: 2, checksumLen: 5})
    expect(zsyncParams(734003200)).to.deep.include({blockSize: 4096, rsumLen: 3, checksumLen: 5})
  })

  it('writes the header fields and block sums zsyncmake writes for the same file', async () => {
    const h = await hashFile(path, 'sha256', 1)
    expect(h.sha1).to.equal(KNOWN_SHA1)
    expect(h.zsync).to.not.equal(null)
    expect(h.zsync!.blockSize).to.equal(2048)
    expect(h.zsync!.hashLengths).to.equal('2,2,4')
    expect(h.zsync!.sums.length).to.equal(1537 * 6)
    const ours = renderZsync({name: 'known3.bin', size: h.size, mtime, sha1: h.sha1, blockSize: h.zsync!.blockSize, hashLengths: h.zsync!.hashLengths, sums: h.zsync!.sums}, [
      'http://m.example/pub/known3.bin',
    ])
    execFileSync('zsyncmake', ['-Z', '-u', 'http://m.example/pub/known3.bin', '-o', join(dir, 'known3.bin.zsync'), path], {stdio: 'ignore'})
    const theirs = readFileSync(join(dir, 'known3.bin.zsync'))
    expect(ours.equals(theirs)).to.equal(true)
    const end = theirs.indexOf('\n\n')
    expect(theirs.subarray(0, end).toString()).to.equal(
      [
        'zsync: 0.6.2',
        'Filename: known3.bin',
        'MTime: Wed, 02 Dec 2026 02:06:46 +0000',
        'Blocksize: 2048',
        'Length: 3145745',
        'Hash-Lengths: 2,2,4',
        'URL: http://m.example/pub/known3.bin',
        `SHA-1: ${KNOWN_SHA1}`,
      ].join('\n'),
    )
    expect(Buffer.from(h.zsync!.sums).equals(theirs.subarray(end + 2))).to.equal(true)
    expect(zsyncMtime(0)).to.equal('Thu, 01 Jan 1970 00:00:00 +0000')
  })

  it('computes the same zsync sums on a worker thread, and none for smaller files', async () => {
    const {HashPool} = await import('../../src/lib/origin/hash.js')
    const pool = new HashPool(1, 'sha256', 1024 * 1024)
    try {
      const onWorker = await pool.hash(path, data.length)
      const onMain = await hashFile(path, 'sha256', 1024 * 1024)
      expect(Buffer.from(onWorker.zsync!.sums).equals(Buffer.from(onMain.zsync!.sums))).to.equal(true)
      expect(onWorker.sha1Pieces).to.deep.equal(onMain.sha1Pieces)
      // Expected at another size (changed since it was indexed): no sums for a size it does not have.
      expect((await pool.hash(path, data.length + 1)).zsync).to.equal(null)
      const strict = new HashPool(1, 'sha256', data.length + 1)
      expect((await strict.hash(path, data.length)).zsync).to.equal(null)
      await strict.close()
    } finally {
      await pool.close()
    }
  })
})
