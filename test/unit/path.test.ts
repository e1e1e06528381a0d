import {expect} from 'chai'
import {hasQueryFlag, parseTarget, queryParam} from '../../src/lib/serve/delivery/path.js'

describe('request path safety', () => {
  const ok: Array<[string, string, boolean, string]> = [
    ['/', '', true, ''],
    ['/pub/file.iso', 'pub/file.iso', false, ''],
    ['/pub/dir/', 'pub/dir', true, ''],
    ['/pub//x///y', 'pub/x/y', false, ''],
    ['/a%20b/c%23d.txt?x=1', 'a b/c#d.txt', false, 'x=1'],
    ['/%C3%A9t%C3%A9.txt', 'été.txt', false, ''],
    ['/100%25.txt', '100%.txt', false, ''],
    ['/a+b:c', 'a+b:c', false, ''],
    ['/.hidden/.x', '.hidden/.x', false, ''],
    ['/x#frag', 'x', false, ''],
    ['http://example.org/p/q?r', 'p/q', false, 'r'],
    ['/%252e%252e/x', '%2e%2e/x', false, ''], // decoded once only: a literal "%2e%2e" segment
    // Dot segments are removed as RFC 3986 §5.2.4 does, while the result stays in the root.
    ['/./big.iso', 'big.iso', false, ''],
    ['/dir/../big.iso', 'big.iso', false, ''],
    ['/a/./b/../c/./d.iso?meta4', 'a/c/d.iso', false, 'meta4'],
    ['/a/b/..', 'a', true, ''],
    ['/a/.', 'a', true, ''],
    ['/a/..', '', true, ''],
    ['/pub/%2E%2E%2Fsecret', 'secret', false, ''],
    ['/pub/%2e%2e/x', 'x', false, ''],
    ['/..x/.y', '..x/.y', false, ''],
  ]
  for (const [target, path, slash, query] of ok) {
    it(`accepts ${JSON.stringify(target)}`, () => {
      expect(parseTarget(target)).to.deep.equal({ok: true, path, slash, query})
    })
  }

  const bad: Array<[string, number]> = [
    ['/../etc/passwd', 400],
    ['/pub/../../etc/passwd', 400],
    ['/pub/%2e%2e/%2e%2e/etc/passwd', 400],
    ['/pub/..%2f..%2fetc', 400],
    ['/..', 400],
    ['/a/../..', 400],
    ['/a/../../b', 400],
    ['/%2e%2e/etc/passwd', 400],
    ['/./../x', 400],
    ['/a%00b', 400],
    ['/a\0b', 400],
    ['/a%5C..%5Cb', 400],
    ['/a\\b', 400],
    ['/a%zz', 400],
    ['/%C3%28', 400], // invalid UTF-8
    ['*', 400],
    [`/${'a'.repeat(5000)}`, 414],
  ]
  for (const [target, status] of bad) {
    it(`refuses ${JSON.stringify(target.slice(0, 40))} with ${status}`, () => {
      const r = parseTarget(target)
      expect(r.ok).to.equal(false)
      if (!r.ok) expect(r.status).to.equal(status)
    })
  }

  it('reads query parameters', () => {
    expect(queryParam('a=1&country=de&b', 'country')).to.equal('de')
    expect(queryParam('country', 'country')).to.equal('')
    expect(queryParam('x=1', 'country')).to.equal(undefined)
    expect(queryParam('country=%zz', 'country')).to.equal(null)
    expect(queryParam('country=%FC', 'country')).to.equal(null)
    expect(hasQueryFlag('mirrorlist', 'mirrorlist')).to.equal(true)
    expect(hasQueryFlag('meta4=1&x', 'meta4')).to.equal(true)
    expect(hasQueryFlag('mirrorlists', 'mirrorlist')).to.equal(false)
  })
})
