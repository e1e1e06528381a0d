import {expect} from 'chai'
import {snapshotBounds, unseenCondition} from '../../src/lib/serve/snapshot/unseen.js'

describe('unseen rows of a transaction snapshot', () => {
  it('parses pg_snapshot text, with and without in-flight ids', () => {
    expect(snapshotBounds('732:735:')).to.deep.equal({xmax: '735', xip: []})
    expect(snapshotBounds('732:735:732,734')).to.deep.equal({xmax: '735', xip: ['732', '734']})
    expect(snapshotBounds('4294967300:4294967310:4294967301')).to.deep.equal({xmax: '4294967310', xip: ['4294967301']})
  })

  it('refuses anything else, so nothing but digits reaches the SQL text', () => {
    for (const bad of ['', '1:2', "1:2:3'", '1:2:3,', 'a:b:', '1:2:3;DROP']) expect(() => snapshotBounds(bad), bad).to.throw(/not a pg_snapshot/)
  })

  it('writes the bounds as literals', () => {
    expect(unseenCondition({xmax: '735', xip: []})).to.equal(`(txid >= '735'::xid8)`)
    expect(unseenCondition({xmax: '735', xip: ['732', '734']})).to.equal(`(txid >= '735'::xid8 OR txid = ANY('{732,734}'::xid8[]))`)
  })
})
