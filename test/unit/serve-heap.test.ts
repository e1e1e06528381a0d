import {expect} from 'chai'
import {getHeapSpaceStatistics} from 'node:v8'
import {collectGarbage} from '../../src/lib/serve/snapshot/heap.js'

const oldSpaceBytes = () => getHeapSpaceStatistics().find((space) => space.space_name === 'old_space')!.space_size

describe('collectGarbage (src/lib/serve/heap.ts)', () => {
  it('collects an object that nothing references any more', async () => {
    let held: {rows: string[]} | undefined = {rows: Array.from({length: 1000}, (_, i) => `row ${i}`)}
    const ref = new WeakRef(held)
    held = undefined
    // A WeakRef's target lives until the end of the job that made it.
    await new Promise((resolve) => setImmediate(resolve))
    collectGarbage()
    expect(ref.deref()).to.equal(undefined)
  })

  it('keeps what is still referenced', async () => {
    const held = {rows: ['kept']}
    const ref = new WeakRef(held)
    await new Promise((resolve) => setImmediate(resolve))
    collectGarbage()
    expect(ref.deref()?.rows).to.deep.equal(['kept'])
  })

  it('compacts: survivors scattered among garbage no longer hold the old pages', () => {
    collectGarbage()
    // What the rest of the process holds (other test files' modules in a whole run) is not this test's to free.
    const baseline = oldSpaceBytes()
    // 64 MB of old-space objects (they survive a full collection, so they are promoted),
    // of which one in 16 stays: every page keeps a survivor, so only moving them frees pages.
    let rows: Array<{a: number; b: number; c: string} | undefined> = Array.from({length: 1_000_000}, (_, i) => ({a: i, b: i * 2, c: `row ${i}`}))
    collectGarbage()
    const scattered = rows.filter((_, i) => i % 16 === 0)
    rows = []
    const before = oldSpaceBytes()
    const collection = collectGarbage()
    const after = oldSpaceBytes()
    expect(scattered).to.have.length(62_500)
    expect(after - baseline, `old space ${baseline} (baseline), ${before} -> ${after} bytes`).to.be.below((before - baseline) * 0.5)
    expect(collection.heapBytesAfter).to.be.below(collection.heapBytesBefore)
    expect(collection.pauseSeconds).to.be.a('number').and.at.least(0)
  })
})
