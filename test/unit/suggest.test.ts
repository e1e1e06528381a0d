import {expect} from 'chai'
import {loadConfig} from '../../src/lib/config/index.js'
import {closest, editDistance} from '../../src/lib/suggest.js'

describe('did you mean (src/lib/suggest.ts)', () => {
  it('counts a swap of two neighbours as one edit', () => {
    expect(editDistance('listne', 'listen')).to.equal(1)
    expect(editDistance('kitten', 'sitting')).to.equal(3)
    expect(editDistance('', 'abc')).to.equal(3)
  })

  it('suggests the closest candidate only when it is close enough', () => {
    expect(closest('listne', ['watch', 'listen', 'workers'])).to.equal('listen')
    expect(closest('Lsiten', ['listen'])).to.equal('listen')
    expect(closest('frobnicate', ['listen', 'watch'])).to.equal(undefined)
    expect(closest('ab', ['xy'])).to.equal(undefined)
  })

  it('an unknown key in a config section names the key meant, or the keys there are', () => {
    const load = (file: Record<string, unknown>) => () => loadConfig({env: {MB_CONFIG: 'none'}, flags: file})
    expect(load({'serve.listne': '127.0.0.1:80'})).to.throw('unknown key "listne" (did you mean listen?)')
    expect(load({'select.zzzzzzzz': 1})).to.throw(/unknown key "zzzzzzzz"; known keys here: .*min_size/)
  })
})
