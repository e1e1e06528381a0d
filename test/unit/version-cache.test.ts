import {expect} from 'chai'
import {VersionCache} from '../../src/lib/metalink/version-cache.js'

describe('per-version cache of document parts', () => {
  const v1 = {path: 'pub/a.iso', size: 100, mtime: 1_700_000_000, sha1: 'a'.repeat(40), sha256: 'b'.repeat(64)}

  it('answers only the version an entry was made for: a new size, mtime, MD5, SHA-1, SHA-256 or formats bits (the piece algorithm) of the path misses and drops it', () => {
    for (const change of [{size: 101}, {mtime: 1_700_000_001}, {md5: 'e'.repeat(32)}, {sha1: 'c'.repeat(40)}, {sha256: 'd'.repeat(64)}, {sha256: null}, {formats: 4}]) {
      const cache = new VersionCache<string>({entries: 10, bytes: 1000})
      cache.set(v1, 'one', 1)
      expect(cache.get({...v1})).to.equal('one')
      expect(cache.get({...v1, ...change})).to.equal(undefined)
      expect(cache.get(v1)).to.equal(undefined)
    }
  })

  it('takes an equal digest id for equal hashes, and compares the hashes when the id differs or is absent', () => {
    const cache = new VersionCache<string>({entries: 10, bytes: 1000})
    cache.set({...v1, digestId: 7}, 'one', 1)
    expect(cache.get({...v1, digestId: 7})).to.equal('one')
    // Another id (a reloaded snapshot) with the same hashes: a hit, and the id is learnt.
    expect(cache.get({...v1, digestId: 8})).to.equal('one')
    expect(cache.get({...v1, digestId: 8, sha1: 'not read: the id vouches'})).to.equal('one')
    expect(cache.get({...v1})).to.equal('one')
    expect(cache.get({...v1, digestId: 9, sha256: 'd'.repeat(64)})).to.equal(undefined)
  })

  it('keeps the entries hit since the last half of the cache moved, and evicts the oldest', () => {
    const cache = new VersionCache<string>({entries: 4, bytes: 1000})
    const at = (path: string) => ({...v1, path})
    for (const p of ['a', 'b', 'c', 'd']) cache.set(at(p), p, 1)
    expect(cache.get(at('a'))).to.equal('a') // 3 moves since a: moved to the young end
    expect(cache.get(at('d'))).to.equal('d') // 1 move since d: stays
    cache.set(at('e'), 'e', 1) // b is the oldest now
    cache.set(at('f'), 'f', 1) // then c
    expect(['a', 'b', 'c', 'd', 'e', 'f'].map((p) => cache.get(at(p)))).to.deep.equal(['a', undefined, undefined, 'd', 'e', 'f'])
  })

  it('evicts the least recently used entry by count and by bytes, and keeps nothing larger than its byte bound', () => {
    const cache = new VersionCache<string>({entries: 2, bytes: 100})
    const at = (path: string) => ({...v1, path})
    cache.set(at('a'), 'a', 10)
    cache.set(at('b'), 'b', 10)
    expect(cache.get(at('a'))).to.equal('a') // b is now the oldest
    cache.set(at('c'), 'c', 10)
    expect([cache.get(at('a')), cache.get(at('b')), cache.get(at('c'))]).to.deep.equal(['a', undefined, 'c'])
    cache.set(at('d'), 'd', 95) // 10 + 10 + 95 > 100: a and c go
    expect([cache.get(at('a')), cache.get(at('c')), cache.get(at('d'))]).to.deep.equal([undefined, undefined, 'd'])
    cache.set(at('e'), 'e', 101)
    expect([cache.get(at('d')), cache.get(at('e'))]).to.deep.equal(['d', undefined])
  })
})
