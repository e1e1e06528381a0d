import {expect} from 'chai'
import {type FileEntry, fileWith, unindexedVersion} from '../../src/lib/serve/snapshot/file-entry.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'

const MD5 = '0123456789abcdef0123456789abcdef'
const SHA1 = 'ab'.repeat(20)

/** Every FileEntry field of `file`, read out (the digests are getters). */
function fields(file: FileEntry | undefined) {
  if (file === undefined) return undefined
  const {path, size, mtime, md5, sha1, sha256, signature, formats, digestId} = file
  return {path, size, mtime, mirrors: [...file.mirrors], md5, sha1, sha256, signature, formats, digestId}
}

describe('the snapshot file map (src/lib/serve/snapshot.ts FileMap)', () => {
  it('reads back every field of an indexed entry, and keeps other entries as they are', () => {
    const snapshot = new Snapshot()
    const mirrors = snapshot.mirrorSets.fromText('3,1')
    const indexed = snapshot.digests.entry({path: 'big.iso', size: 4_000_000_000, mtime: 1_764_000_000, mirrors, signature: '.sig', formats: 7}, MD5, SHA1, null)
    snapshot.files.set('big.iso', indexed)
    const plain = fileWith(indexed, {path: 'copy.iso', md5: null})
    snapshot.files.set('copy.iso', plain)

    const read = snapshot.files.get('big.iso')!
    expect(fields(read)).to.deep.equal(fields(indexed))
    expect(read.mirrors).to.equal(mirrors)
    expect(read.digestId).to.be.above(0)
    expect(snapshot.files.get('copy.iso')).to.equal(plain)
    // Filed under another path than its own, an entry is kept as it is, its own path and all.
    snapshot.files.set('alias.iso', indexed)
    expect(snapshot.files.get('alias.iso')).to.equal(indexed)
    expect(snapshot.files.get('none.iso')).to.equal(undefined)
    expect(snapshot.files.has('big.iso') && snapshot.files.has('copy.iso') && !snapshot.files.has('none.iso')).to.equal(true)
  })

  it('gives a replaced path a new slot: an entry read before stays what it was and is no longer current', () => {
    const snapshot = new Snapshot()
    const files = snapshot.files
    const v1 = snapshot.digests.entry({path: 'a.iso', size: 10, mtime: 100, mirrors: snapshot.mirrorSets.fromText('1')}, MD5, null, null)
    files.set('a.iso', v1)
    const seen = files.get('a.iso')!
    expect(files.isCurrent('a.iso', seen)).to.equal(true)

    files.set('a.iso', snapshot.digests.entry({path: 'a.iso', size: 20, mtime: 200, mirrors: snapshot.mirrorSets.fromText('2')}, null, SHA1, null))
    expect(fields(seen)).to.include({size: 10, mtime: 100, md5: MD5, sha1: null})
    expect(fields(files.get('a.iso'))).to.include({size: 20, mtime: 200, md5: null, sha1: SHA1})
    expect(files.isCurrent('a.iso', seen)).to.equal(false)

    // The stale reader's replacement is refused; the current one's is taken.
    expect(files.replaceIfCurrent('a.iso', seen, unindexedVersion(seen, {size: 11, mtime: 101}))).to.equal(false)
    expect(files.get('a.iso')!.size).to.equal(20)
    const current = files.get('a.iso')!
    const local = unindexedVersion(current, {size: 21, mtime: 201})
    expect(files.replaceIfCurrent('a.iso', current, local)).to.equal(true)
    expect(files.get('a.iso')).to.deep.include({size: 21, mtime: 201, md5: null})
    expect(files.isCurrent('a.iso', local)).to.equal(false) // it was stored by slot, and is read back as a new entry
    expect(files.isCurrent('a.iso', files.get('a.iso')!)).to.equal(true)
    expect(files.size).to.equal(1)
  })

  it('tells entries of another map apart, even in the same slot', () => {
    const [one, two] = [new Snapshot(), new Snapshot()]
    for (const s of [one, two]) s.files.set('a.iso', s.digests.entry({path: 'a.iso', size: 1, mtime: 1, mirrors: s.mirrorSets.fromText('1')}, null, null, null))
    expect(two.files.isCurrent('a.iso', one.files.get('a.iso')!)).to.equal(false)
    expect(one.files.isCurrent('a.iso', one.files.get('a.iso')!)).to.equal(true)
  })

  it('grows past its first slots, deletes, and iterates the paths it holds', () => {
    const snapshot = new Snapshot()
    const files = snapshot.files
    const mirrors = snapshot.mirrorSets.fromText('5')
    for (let i = 0; i < 5_000; i++) files.set(`f/${i}`, snapshot.digests.entry({path: `f/${i}`, size: i * 1_000_000, mtime: 1_700_000_000 + i, mirrors}, i % 2 === 0 ? MD5 : null, null, null))
    for (let i = 0; i < 5_000; i += 5) expect(files.delete(`f/${i}`)).to.equal(true)
    expect(files.delete('f/0')).to.equal(false)
    expect(files.size).to.equal(4_000)
    expect(fields(files.get('f/4999'))).to.include({size: 4_999_000_000, mtime: 1_700_004_999, md5: null})
    expect(fields(files.get('f/4998'))).to.include({size: 4_998_000_000, mtime: 1_700_004_998, md5: MD5})
    const paths = [...files.keys()]
    expect(paths).to.have.length(4_000)
    expect(paths).to.not.include('f/5')
    let bytes = 0
    for (const entry of files.values()) bytes += entry.size
    let count = 0
    for (const [path, entry] of files) if (entry.path === path) count++
    expect({bytes, count}).to.deep.equal({bytes: [...Array(5_000).keys()].filter((i) => i % 5 !== 0).reduce((sum, i) => sum + i * 1_000_000, 0), count: 4_000})
  })

  it('reads slots without entries: mirror set, size, directory, what lacks a mirror per directory, and the paths under a prefix that pass a test', () => {
    const snapshot = new Snapshot()
    const files = snapshot.files
    const both = snapshot.mirrorSets.fromText('1,2')
    const one = snapshot.mirrorSets.fromText('2')
    files.set('pub/a.iso', snapshot.digests.entry({path: 'pub/a.iso', size: 10, mtime: 1, mirrors: both}, null, null, null))
    files.set('pub/sub/b.iso', snapshot.digests.entry({path: 'pub/sub/b.iso', size: 20, mtime: 1, mirrors: one}, null, null, null))
    files.set('pub/\u00e9\u20ac.iso', fileWith(files.get('pub/a.iso')!, {path: 'pub/\u00e9\u20ac.iso', mirrors: one}))
    files.set('top.iso', snapshot.digests.entry({path: 'top.iso', size: 30, mtime: 1, mirrors: one}, null, null, null))
    const slot = files.slotOf('pub/sub/b.iso')!
    expect([files.mirrorsAt(slot), files.sizeAt(slot), files.counts.nameOf(files.directoryAt(slot))]).to.deep.equal([one, 20, 'pub/sub/'])
    expect(files.counts.indexOf('pub/sub/')).to.equal(files.directoryAt(slot))
    expect(files.counts.nameOf(files.directoryAt(files.slotOf('top.iso')!))).to.equal('')
    const pub = files.counts.indexOf('pub/')!
    const sub = files.counts.indexOf('pub/sub/')!
    const within = new Uint8Array(files.counts.size).fill(1)
    within[files.counts.indexOf('')!] = 0
    const tally = files.tallyLacking(1, within)
    expect([[...tally.files], [...tally.bytes]].map((column) => [column[pub], column[sub], column[0]])).to.deep.equal([
      [1, 1, 0],
      [10, 20, 0],
    ])
    expect(files.filesLacking(pub, 1)).to.deep.equal([['pub/\u00e9\u20ac.iso', files.slotOf('pub/\u00e9\u20ac.iso')]])
    expect(files.filesLacking(0, 1).map(([path]) => path)).to.deep.equal(['top.iso'])
    expect(files.filesLacking(0, 2)).to.deep.equal([])
    expect(['pub/a.iso', 'pub/sub/b.iso', 'top.iso'].map((path) => files.lacking(1)(files.slotOf(path)!))).to.deep.equal([false, true, true])
    const lacking1 = [...files.pathsWhere('pub/', (s) => !files.mirrorsAt(s).includes(1))].map(([path]) => path)
    expect(lacking1.sort()).to.deep.equal(['pub/sub/b.iso', 'pub/\u00e9\u20ac.iso'])
    expect(files.slotOf('none.iso')).to.equal(undefined)
  })
})
