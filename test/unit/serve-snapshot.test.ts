import {expect} from 'chai'
import {escapeHtml, renderIndex} from '../../src/lib/serve/delivery/autoindex.js'
import {inheritedSocket, parseListen} from '../../src/lib/serve/delivery/listen.js'
import {DigestArena, fileWith, unindexedVersion} from '../../src/lib/serve/snapshot/file-entry.js'
import {MirrorSetPool} from '../../src/lib/serve/snapshot/mirror-sets.js'

describe('serve helpers', () => {
  it('parses array_to_string mirror sets into compact Int16Array views', () => {
    const pool = new MirrorSetPool()
    expect([...pool.fromText('3,17,42')]).to.deep.equal([3, 17, 42])
    expect([...pool.fromText('32000')]).to.deep.equal([32_000])
    expect(pool.fromText('').length).to.equal(0)
    expect(pool.fromText(null).length).to.equal(0)
    const a = pool.fromText('1,2')
    const b = pool.fromArray([7, 8, 9])
    expect(a.buffer).to.equal(b.buffer) // one shared chunk, no per-file ArrayBuffer
    expect([...a]).to.deep.equal([1, 2])
    expect([...b]).to.deep.equal([7, 8, 9])
    expect(pool.allocated).to.equal(3 + 1 + 2 + 3)
  })

  it('interns mirror sets: the same ids in the same order are one view, parsed or copied', () => {
    const pool = new MirrorSetPool()
    const a = pool.fromText('4,5,6')
    expect(pool.fromText('4,5,6')).to.equal(a)
    expect(pool.fromArray([4, 5, 6])).to.equal(a)
    expect(pool.fromArray(Int16Array.of(4, 5))).to.not.equal(a)
    expect([...pool.fromText('6,5,4')]).to.deep.equal([6, 5, 4])
    expect({sets: pool.sets, allocated: pool.allocated}).to.deep.equal({sets: 3, allocated: 8})
  })

  it('keeps digests as bytes that read back as hex; copies keep them, an unindexed version drops them', () => {
    const arena = new DigestArena()
    const md5 = '0123456789abcdef0123456789abcdef'
    const sha256 = 'ff'.repeat(32)
    const file = arena.entry({path: 'a.iso', size: 3_000_000_000, mtime: 5, mirrors: Int16Array.of(1), signature: '.asc', formats: 1}, md5, null, sha256)
    expect({md5: file.md5, sha1: file.sha1, sha256: file.sha256, records: arena.records}).to.deep.equal({md5, sha1: null, sha256, records: 1})
    const copy = fileWith(file, {path: 'b.iso'})
    expect(copy).to.deep.equal({path: 'b.iso', size: 3_000_000_000, mtime: 5, mirrors: Int16Array.of(1), md5, sha1: null, sha256, signature: '.asc', formats: 1})
    const other = unindexedVersion(file, {size: 7, mtime: 8})
    expect({
      path: other.path,
      size: other.size,
      mtime: other.mtime,
      mirrors: other.mirrors.length,
      md5: other.md5,
      sha1: other.sha1,
      sha256: other.sha256,
      signature: other.signature,
      formats: other.formats,
    }).to.deep.equal({
      path: 'a.iso',
      size: 7,
      mtime: 8,
      mirrors: 0,
      md5: null,
      sha1: null,
      sha256: null,
      signature: '.asc',
      formats: 0,
    })
  })

  it('names each digest record by an id no other record has, across arenas and chunks, and no digests by 0', () => {
    const fields = {path: 'a.iso', size: 1, mtime: 2, mirrors: Int16Array.of(1)}
    const md5 = '0123456789abcdef0123456789abcdef'
    const arenas = [new DigestArena(), new DigestArena()]
    const ids = new Set<number>()
    // 20,000 records fill the first chunk of the first arena (2^14 records) and start a second.
    for (let i = 0; i < 20_000; i++) ids.add(arenas[i % 2 === 0 || i > 10_000 ? 0 : 1].entry(fields, md5, null, null).digestId!)
    expect(ids.size).to.equal(20_000)
    expect(ids.has(0)).to.equal(false)
    expect(arenas[0].entry(fields, null, null, null).digestId).to.equal(0)
    expect(unindexedVersion(arenas[0].entry(fields, md5, null, null), {size: 3, mtime: 4}).digestId).to.equal(0)
    // A copy may be given other digests: it names none, so caches compare the digests.
    expect(fileWith(arenas[1].entry(fields, md5, null, null), {md5: null}).digestId).to.equal(undefined)
  })

  it('starts a new chunk when one fills up', () => {
    const pool = new MirrorSetPool()
    const big = Array.from({length: 1 << 20}, (_, i) => i % 30_000)
    const first = pool.fromArray(big)
    const second = pool.fromText('5,6')
    expect(first.buffer).to.not.equal(second.buffer)
    expect(first[12_345]).to.equal(12_345)
    expect([...second]).to.deep.equal([5, 6])
  })

  it('parses listen addresses', () => {
    expect(parseListen('127.0.0.1:8080')).to.deep.equal({host: '127.0.0.1', port: 8080})
    expect(parseListen('[::1]:80')).to.deep.equal({host: '::1', port: 80})
    expect(parseListen(':8080')).to.deep.equal({host: '0.0.0.0', port: 8080})
    expect(() => parseListen('localhost')).to.throw(/HOST:PORT/)
    expect(() => parseListen('1.2.3.4:70000')).to.throw(/HOST:PORT/)
  })

  it("takes systemd's socket only when LISTEN_PID is this process, one socket, and clears LISTEN_* either way", () => {
    const other = {LISTEN_PID: String(process.pid + 1), LISTEN_FDS: '1', LISTEN_FDNAMES: 'mb-serve.socket', KEEP: 'x'}
    expect(inheritedSocket(other)).to.equal(undefined)
    expect(other).to.deep.equal({KEEP: 'x'})
    expect(inheritedSocket({})).to.equal(undefined)
    const two = {LISTEN_PID: String(process.pid), LISTEN_FDS: '2'}
    expect(() => inheritedSocket(two)).to.throw(/systemd passed 2 sockets/)
    expect(two).to.deep.equal({})
  })

  it('escapes names and encodes links in directory indexes', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).to.equal('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;')
    const html = renderIndex('sub dir', [
      {name: 'inner', directory: true, size: null, mtime: new Date(Date.UTC(2026, 0, 2, 3, 4))},
      {name: 'a "b" <c>?.iso', directory: false, size: 1234, mtime: new Date(Date.UTC(2026, 0, 2, 3, 4))},
    ])
    expect(html).to.include('<title>Index of /sub dir/</title>')
    expect(html).to.include('<a href="../">../</a>')
    expect(html).to.include('<a href="inner/">inner/</a></td><td align="right">-</td><td>2026-01-02 03:04</td>')
    expect(html).to.include('<a href="a%20%22b%22%20%3Cc%3E%3F.iso">a &quot;b&quot; &lt;c&gt;?.iso</a></td><td align="right">1234</td>')
    expect(html).to.include('<td>2026-01-02 03:04</td><td></td></tr>')
  })

  it('links each indexed file of a directory index to its mirror list ("details")', () => {
    const mtime = new Date(Date.UTC(2026, 0, 2, 3, 4))
    const html = renderIndex(
      'iso',
      [
        {name: 'inner', directory: true, size: null, mtime},
        {name: 'a b.iso', directory: false, size: 1234, mtime},
        {name: 'notes.txt', directory: false, size: 5, mtime},
      ],
      (name) => name !== 'notes.txt',
    )
    expect(html).to.include(
      '<a href="a%20b.iso">a b.iso</a></td><td align="right">1234</td><td>2026-01-02 03:04</td><td><form class="details" method="get" action="a%20b.iso.mirrorlist" rel="nofollow"><button type="submit">details</button></form></td></tr>',
    )
    expect(html).to.include('<a href="notes.txt">notes.txt</a></td><td align="right">5</td><td>2026-01-02 03:04</td><td></td></tr>')
    expect(html).to.include('<a href="inner/">inner/</a></td><td align="right">-</td><td>2026-01-02 03:04</td><td></td></tr>')
  })

  it('gives a file whose name holds a colon a "details" link that cannot read as a URL scheme', () => {
    const mtime = new Date(Date.UTC(2026, 0, 2, 3, 4))
    const html = renderIndex('repo', [{name: 'opensuse:leap.repo', directory: false, size: 7, mtime}], () => true)
    expect(html).to.include('<a href="./opensuse:leap.repo">opensuse:leap.repo</a>')
    expect(html).to.include('action="./opensuse:leap.repo.mirrorlist" rel="nofollow">')
    for (const [, href] of html.matchAll(/href="(\.\/[^"]+)"/g)) expect(new URL(href, 'http://mb.example/repo/').pathname).to.match(/^\/repo\//)
  })
})
