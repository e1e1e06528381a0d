import {expect} from 'chai'
import {compileMirror, MirrorTable} from '../../src/lib/select/mirror.js'
import {holdingsOf} from '../../src/lib/operator/network.js'
import {fileWith} from '../../src/lib/serve/snapshot/file-entry.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {rng} from '../../bench/lib.js'
import {mirrorRow} from '../helpers/mirror-row.js'
import {expectRecount, recount} from '../helpers/snapshot-counts.js'

const PATHS = ['root.txt', 'a/1.iso', 'a/2.iso', 'a/b/3.iso', 'a/b/4.iso', 'a/b/c/5.iso', 'd/6.iso', 'd/7.iso', 'd/e/8.iso', 'f/9.iso']

describe('per-directory counts of the snapshot (src/lib/serve/snapshot/directory-counts.ts)', () => {
  it('equal a recount of every directory after inserts, updates, deletes, change sets and a mirror removal', async () => {
    const random = rng(35)
    const snapshot = new Snapshot()
    snapshot.mirrors = new MirrorTable([1, 2, 3, 4, 5].map((id) => compileMirror(mirrorRow(id, {base_path: id === 4 ? 'a/' : id === 5 ? 'a/b/c/' : ''}))))
    const pick = () => PATHS[Math.floor(random() * PATHS.length)]
    const ids = () => [1, 2, 3, 4, 5, 9].filter(() => random() < 0.5)
    const entry = (path: string) => snapshot.digests.entry({path, size: 1 + Math.floor(random() * 1000), mtime: 1, mirrors: snapshot.mirrorSets.fromArray(ids())}, null, null, null)
    for (const path of PATHS) snapshot.files.set(path, entry(path))
    expectRecount(snapshot)
    for (let round = 0; round < 30; round++) {
      const path = pick()
      if (round % 3 === 0) snapshot.files.delete(path)
      else if (round % 3 === 1)
        snapshot.files.set(path, entry(path)) // a new version or new copies
      else snapshot.files.set(path, fileWith(entry(path), {md5: null})) // an entry kept whole
      expectRecount(snapshot)
    }
    const deleted = [pick(), pick()]
    await snapshot.files.applyChangeSet(deleted, [entry(pick()), entry(pick()), entry(deleted[0])], () => {})
    expectRecount(snapshot)
    // Mirror 2 removed: its id leaves every file's set (as the registry does), and the table.
    const changed = [...snapshot.files.values()].filter((f) => f.mirrors.includes(2))
    await snapshot.files.applyChangeSet(
      [],
      changed.map((f) => snapshot.digests.entry({path: f.path, size: f.size, mtime: f.mtime, mirrors: snapshot.mirrorSets.fromArray([...f.mirrors].filter((id) => id !== 2))}, null, null, null)),
      () => {
        snapshot.mirrors = new MirrorTable([...snapshot.mirrors.values()].filter((m) => m.id !== 2))
      },
    )
    expectRecount(snapshot)
    expect(holdingsOf(snapshot, '').has(2)).to.equal(false)
    for (const path of PATHS) snapshot.files.delete(path)
    expectRecount(snapshot)
    expect(holdingsOf(snapshot, 'a/').get(1)).to.deep.equal({files: 0, bytes: null, originFiles: 0, originBytes: 0})
  })

  it('count a large load by groups and stay equal to a recount', () => {
    const random = rng(7)
    const snapshot = new Snapshot()
    snapshot.mirrors = new MirrorTable(Array.from({length: 40}, (_, i) => compileMirror(mirrorRow(i + 1))))
    const sets = Array.from({length: 30}, () => snapshot.mirrorSets.fromArray(Array.from({length: 40}, (_, i) => i + 1).filter(() => random() < 0.4)))
    for (let i = 0; i < 5000; i++) {
      const path = `pub/d${i % 7}/s${i % 13}/f${i}`
      snapshot.files.set(path, snapshot.digests.entry({path, size: i, mtime: 1, mirrors: sets[i % sets.length]}, null, null, null))
    }
    for (let i = 0; i < 5000; i += 3) snapshot.files.delete(`pub/d${i % 7}/s${i % 13}/f${i}`)
    expect(snapshot.files.counts.size).to.equal(1 + 1 + 7 + 7 * 13)
    for (const dir of ['', 'pub/', 'pub/d3/', 'pub/d3/s5/']) expect(holdingsOf(snapshot, dir)).to.deep.equal(recount(snapshot, dir))
  })
})
