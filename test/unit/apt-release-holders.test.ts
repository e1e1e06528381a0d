import {expect} from 'chai'
import {releaseHolders} from '../../src/lib/apt/routes.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'

/** A snapshot of one archive, `debian/`, whose Release mirrors 1, 2 and 3 hold, with `badCopies` as content checks left them. */
function archive(badCopies: Record<number, string[]>): Snapshot {
  const snapshot = new Snapshot()
  const add = (path: string, mirrors: string) =>
    snapshot.files.set(path, snapshot.digests.entry({path, size: 5000, mtime: 1_764_000_000, mirrors: snapshot.mirrorSets.fromText(mirrors)}, null, null, null))
  add('debian/dists/stable/Release', '1,2,3')
  add('debian/dists/stable/main/binary-amd64/Release', '4')
  add('debian/pool/main/m/mb-hello/mb-hello_1.0_all.deb', '2,3')
  add('other/big.iso', '1,2')
  snapshot.badCopies = new Map(Object.entries(badCopies).map(([id, paths]) => [Number(id), paths]))
  return snapshot
}

describe("apt's mirror list: the archive's mirrors (src/lib/apt/routes.ts releaseHolders)", () => {
  it('are the holders of dists/SUITE/Release, not of a component Release', () => {
    expect([...releaseHolders(archive({}), 'debian/')].sort()).to.deep.equal([1, 2, 3])
  })

  it('leave out a mirror with a copy under the archive that a content check found corrupt, whatever the file', () => {
    // apt stops at the first hash mismatch: mirror 1's bad .deb makes it bad for the whole archive.
    const holders = releaseHolders(archive({1: ['debian/pool/main/m/mb-hello/mb-hello_1.0_all.deb'], 3: ['other/big.iso']}), 'debian/')
    expect([...holders].sort()).to.deep.equal([2, 3])
  })
})
