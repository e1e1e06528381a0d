import {expect} from 'chai'
import {TurnBatch} from '../../src/lib/serve/delivery/turn-batch.js'

const nextTurn = () => new Promise((resolve) => setImmediate(resolve))

describe('TurnBatch (src/lib/serve/turn-batch.ts)', () => {
  it('writes nothing while the turn runs, then every item in the order added', async () => {
    const written: number[] = []
    const batch = new TurnBatch<number>(
      (n) => written.push(n),
      () => expect.fail('no item fails'),
    )
    for (let i = 0; i < 5; i++) batch.add(i)
    expect(written).to.deep.equal([])
    expect(batch.size).to.equal(5)
    await nextTurn()
    expect(written).to.deep.equal([0, 1, 2, 3, 4])
    expect(batch.size).to.equal(0)
  })

  it('an item whose write throws goes to `failed` with its error; the items after it are still written', async () => {
    const written: string[] = []
    const failed: Array<[string, string]> = []
    const batch = new TurnBatch<string>(
      (s) => {
        if (s === 'bad') throw new Error('refused header')
        written.push(s)
      },
      (s, error) => failed.push([s, (error as Error).message]),
    )
    for (const s of ['a', 'bad', 'b']) batch.add(s)
    await nextTurn()
    expect(written).to.deep.equal(['a', 'b'])
    expect(failed).to.deep.equal([['bad', 'refused header']])
  })

  it('the item that fills the batch writes it at once; the rest of the turn waits for its end', async () => {
    const written: number[] = []
    const batch = new TurnBatch<number>(
      (n) => written.push(n),
      () => expect.fail('no item fails'),
      3,
    )
    for (let i = 0; i < 2; i++) batch.add(i)
    expect(written).to.deep.equal([])
    batch.add(2)
    expect(written).to.deep.equal([0, 1, 2])
    batch.add(3)
    expect(written).to.deep.equal([0, 1, 2])
    await nextTurn()
    expect(written).to.deep.equal([0, 1, 2, 3])
  })

  it('an item added while the batch is written waits for the next turn', async () => {
    const written: string[] = []
    const batch: TurnBatch<string> = new TurnBatch<string>(
      (s) => {
        written.push(s)
        if (s === 'first') batch.add('later')
      },
      () => expect.fail('no item fails'),
    )
    batch.add('first')
    await nextTurn()
    expect(written).to.deep.equal(['first'])
    await nextTurn()
    expect(written).to.deep.equal(['first', 'later'])
  })
})
