import {expect} from 'chai'
import {PathTable} from '../../src/lib/serve/snapshot/path-table.js'

/** A deterministic pseudo-random sequence in [0, 1) (mulberry32). */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

describe('PathTable (src/lib/serve/path-table.ts)', () => {
  it('agrees with a Map over 200,000 random sets, deletes and lookups, Latin-1 and other paths alike', () => {
    const table = new PathTable()
    const reference = new Map<string, number>()
    const next = random(7)
    const names = ['pub/dir', 'dïr/sübdir', 'ünicode/€uro', 'x', '日本/ファイル', '']
    const pathOf = (n: number) => `${names[n % names.length]}/${n}${n % 11 === 0 ? '.iso' : ''}`
    for (let i = 0; i < 200_000; i++) {
      const path = pathOf(Math.floor(next() * 20_000))
      const op = next()
      if (op < 0.5) {
        const value = Math.floor(next() * 2 ** 31)
        expect(table.set(path, value)).to.equal(reference.get(path))
        reference.set(path, value)
      } else if (op < 0.7) {
        expect(table.delete(path)).to.equal(reference.delete(path))
      } else {
        expect(table.get(path)).to.equal(reference.get(path))
        expect(table.has(path)).to.equal(reference.has(path))
      }
    }
    expect(table.size).to.equal(reference.size)
    expect(new Map(table)).to.deep.equal(reference)
    expect([...table.keys()].sort()).to.deep.equal([...reference.keys()].sort())
  })

  it('tells apart paths of one prefix and one length, and the empty path', () => {
    const table = new PathTable()
    for (let i = 0; i < 5_000; i++) table.set(`a/${String(i).padStart(5, '0')}`, i)
    table.set('', 99_999)
    for (let i = 0; i < 5_000; i++) expect(table.get(`a/${String(i).padStart(5, '0')}`)).to.equal(i)
    expect(table.get('')).to.equal(99_999)
    expect(table.get('a/0000')).to.equal(undefined)
    expect(table.get('a/000000')).to.equal(undefined)
    expect(table.get('b/00000')).to.equal(undefined)
  })

  it('stores paths across chunks, keeps very long ones aside, and reads every one back', () => {
    const table = new PathTable()
    table.reserve(50_000)
    const long = `deep/${'d/'.repeat(40_000)}file`
    // 50,000 paths of about 120 bytes: 6 MB, more than one 4 MiB chunk.
    const paths = Array.from({length: 50_000}, (_, i) => `${'p'.repeat(100)}/${i}.rpm`)
    for (const [i, path] of paths.entries()) table.set(path, i)
    table.set(long, 7)
    expect(table.size).to.equal(50_001)
    for (const [i, path] of paths.entries()) expect(table.get(path)).to.equal(i)
    expect(table.get(long)).to.equal(7)
    expect([...table.keys()].slice(0, 2)).to.deep.equal(paths.slice(0, 2))
    expect([...table.keys()].at(-1)).to.equal(long)
  })

  it('keeps finding paths after many deletes and re-adds (tombstones, rebuilds)', () => {
    const table = new PathTable()
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 3_000; i++) table.set(`r/${i}`, round * 10_000 + i)
      for (let i = 0; i < 3_000; i += 2) expect(table.delete(`r/${i}`)).to.equal(true)
    }
    expect(table.size).to.equal(1_500)
    expect(table.get('r/1')).to.equal(19 * 10_000 + 1)
    expect(table.get('r/2')).to.equal(undefined)
    expect(table.delete('r/2')).to.equal(false)
  })

  it('lists the paths under a prefix, stored and kept aside alike', () => {
    const table = new PathTable()
    for (const [i, path] of ['debian/dists/stable/Release', 'debian/pool/a.deb', 'debian/dists/€/Release', 'debiann/x', 'ubuntu/dists/x', 'debian/dists/testing/InRelease'].entries())
      table.set(path, i)
    table.delete('debian/pool/a.deb')
    expect([...table.keys('debian/dists/')]).to.deep.equal(['debian/dists/stable/Release', 'debian/dists/testing/InRelease', 'debian/dists/€/Release'])
    expect([...table.keys('debian/')]).to.have.length(3)
    expect([...table.keys('debian/pool/')]).to.deep.equal([])
    expect([...table.keys('debian/dists/€')]).to.deep.equal(['debian/dists/€/Release'])
    expect([...table.keys()]).to.have.length(5)
  })
})
