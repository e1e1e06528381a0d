import {expect} from 'chai'
import {collectGarbage} from '../../src/lib/serve/heap.js'

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
})
