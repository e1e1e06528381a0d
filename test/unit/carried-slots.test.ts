/**
 * The glob bitset of the mirror pages made in idle time (src/lib/operator/carried-slots.ts
 * `warm`) against the one made when a page asks: equal, while the event loop runs between its
 * turns, with files replaced, deleted and added meanwhile, finished at once when a page asks
 * before its end, and dropped for a newer file map.
 */
import {expect} from 'chai'
import {CarriedSlots} from '../../src/lib/operator/carried-slots.js'
import {fileWith} from '../../src/lib/serve/snapshot/file-entry.js'
import type {FileMap} from '../../src/lib/serve/snapshot/file-map.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'

const FOLDERS = ['', 'a', 'a/b', 'pub', 'pub/\u00e9t\u00e9', 'pub/\u20ac', 'z', 'z/deep/er']
const INCLUDE = [['**/*.iso', '**/*.rpm'], []]
const EXCLUDE = ['z/**', '**/*.src.rpm']

/** A snapshot of `n` files in {@link FOLDERS}, a tenth replaced, a twentieth deleted, a few kept whole. */
function world(n: number): Snapshot {
  const snapshot = new Snapshot()
  const entry = (path: string, i: number) => snapshot.digests.entry({path, size: i, mtime: 1_764_000_000, mirrors: snapshot.mirrorSets.fromArray([1 + (i % 5)])}, null, null, null)
  for (let i = 0; i < n; i++) {
    const path = `${FOLDERS[i % FOLDERS.length]}/f${i}${['.iso', '.rpm', '.src.rpm', '.txt'][i % 4]}`.replace(/^\//, '')
    snapshot.files.set(path, entry(path, i))
  }
  changeSome(snapshot, 0)
  return snapshot
}

/** Replaces every tenth file (starting at `from`), deletes every twentieth, keeps a few whole, adds 100. */
function changeSome(snapshot: Snapshot, from: number): void {
  const paths = [...snapshot.files.keys()]
  for (let i = from; i < paths.length; i += 10) snapshot.files.set(paths[i]!, fileWith(snapshot.files.get(paths[i]!)!, {size: 7}))
  for (let i = from + 3; i < paths.length; i += 20) snapshot.files.delete(paths[i]!)
  for (let i = 0; i < 100; i++) snapshot.files.set(`new/${from}/n${i}.iso`, fileWith(snapshot.files.get(paths[1]!)!, {size: i}))
}

/** The bits of the live slots of `files`, by path. */
function liveBits(files: FileMap, bits: Uint32Array): Map<string, number> {
  return new Map([...files.pathsWhere('', () => true)].map(([path, slot]) => [path, (bits[slot >>> 5] >>> slot) & 1]))
}

/** Counts event loop turns until stopped: how often the loop ran while a warm went on. */
function turns(): {stop: () => number} {
  let count = 0
  let going = true
  const tick = () => {
    count++
    if (going) setImmediate(tick)
  }
  setImmediate(tick)
  return {
    stop: () => {
      going = false
      return count
    },
  }
}

describe('the glob bitset made in idle time (src/lib/operator/carried-slots.ts)', () => {
  it('equals the one made when a page asks, and lets the event loop run between its turns', async () => {
    const snapshot = world(6_000)
    const lazy = Array.from(new CarriedSlots().of(snapshot.files, INCLUDE, EXCLUDE))
    const carried = new CarriedSlots()
    const loop = turns()
    await carried.warm(snapshot.files, INCLUDE, EXCLUDE, 0)
    expect(loop.stop()).to.be.greaterThan(10) // 256 files a turn
    expect(Array.from(carried.of(snapshot.files, INCLUDE, EXCLUDE))).to.deep.equal(lazy)
    expect(lazy.some((word) => word !== 0)).to.equal(true)
    await carried.warm(snapshot.files, INCLUDE, EXCLUDE, 0) // kept: nothing to do
  })

  it('equals it on every live file when files change during the warm', async () => {
    const snapshot = world(6_000)
    const carried = new CarriedSlots()
    const warming = carried.warm(snapshot.files, INCLUDE, EXCLUDE, 0)
    await new Promise((resolve) => setImmediate(resolve))
    changeSome(snapshot, 5)
    await warming
    const files = snapshot.files
    expect(liveBits(files, carried.of(files, INCLUDE, EXCLUDE))).to.deep.equal(liveBits(files, new CarriedSlots().of(files, INCLUDE, EXCLUDE)))
  })

  it('is finished at once when a page asks before its end, and dropped for a newer file map', async () => {
    const snapshot = world(6_000)
    const carried = new CarriedSlots()
    const warming = carried.warm(snapshot.files, INCLUDE, EXCLUDE, 0)
    await new Promise((resolve) => setImmediate(resolve))
    expect(Array.from(carried.of(snapshot.files, INCLUDE, EXCLUDE))).to.deep.equal(Array.from(new CarriedSlots().of(snapshot.files, INCLUDE, EXCLUDE)))
    await warming

    const newer = world(3_000)
    const first = carried.warm(snapshot.files, [['**'], []], [], 0)
    const second = carried.warm(newer.files, [['**'], []], [], 0)
    await Promise.all([first, second])
    const everything = carried.of(newer.files, [['**'], []], [])
    expect(liveBits(newer.files, everything)).to.deep.equal(new Map([...newer.files.keys()].map((path) => [path, 1])))
  })
})
