import {createHash} from 'node:crypto'
import {expect} from 'chai'
import {MetalinkRedirectHeaders, type RedirectHeaderOptions} from '../../src/lib/metalink/redirect-headers.js'
import {BaseUrls} from '../../src/lib/serve/delivery/public-url.js'
import type {RequestContext} from '../../src/lib/serve/delivery/route.js'
import {DigestArena, FORMAT_TORRENT, type FileEntry} from '../../src/lib/serve/snapshot/file-entry.js'
import type {ClientInfo, Selection} from '../../src/lib/select/types.js'

const hex = (algo: string, text: string) => createHash(algo).update(text).digest('hex')
const b64 = (algo: string, text: string) => createHash(algo).update(text).digest('base64')

/** A file entry whose hashes are those of `content` (null hashes when `content` is null). */
function entry(content: string | null, extra: Partial<FileEntry> = {}): FileEntry {
  return {
    path: 'dir/file 1.iso',
    size: 19,
    mtime: 1_700_000_000,
    mirrors: new Int16Array([1]),
    md5: content === null ? null : hex('md5', content),
    sha1: content === null ? null : hex('sha1', content),
    sha256: content === null ? null : hex('sha256', content),
    ...extra,
  }
}

const META4 = '<https://dl.example.org/dir/file%201.iso.meta4>; rel=describedby; type="application/metalink4+xml"'
const digestOf = (content: string) => `SHA-256=${b64('sha256', content)}, MD5=${b64('md5', content)}, SHA=${b64('sha1', content)}`

/** Redirect headers under the configured base URL `base` (torrents not served unless asked). */
function headersFor(base?: string, extra: Partial<RedirectHeaderOptions> = {}): MetalinkRedirectHeaders {
  return new MetalinkRedirectHeaders({baseUrls: new BaseUrls(base), torrents: false, cache: {entries: 10_000, bytes: 32 * 1024 * 1024}, ...extra})
}

describe('Metalink/HTTP redirect headers', () => {
  const ctx = {req: {headers: {host: 'ignored.example'}}} as unknown as RequestContext
  const client = {https: true} as ClientInfo
  const selection = {realm: 'country', ranked: [], excluded: []} as Selection
  const redirect = (headers: MetalinkRedirectHeaders, file: FileEntry) => {
    const lines: Array<string | string[]> = ['Location', 'x']
    headers.provider(lines, ctx, file, client, selection)
    return lines.slice(2)
  }

  it('sends Link rel=describedby always, and Digest only with all three hashes', () => {
    const headers = headersFor('https://dl.example.org')
    expect(redirect(headers, entry('one'))).to.deep.equal(['Link', META4, 'Digest', digestOf('one')])
    expect(redirect(headers, entry(null))).to.deep.equal(['Link', META4])
    expect(redirect(headers, entry('one', {sha1: null}))).to.deep.equal(['Link', META4])
  })

  it('adds the torrent Link only with torrent data on a server that serves torrents, and the signature Link last', () => {
    const torrent = '<https://dl.example.org/dir/file%201.iso.torrent>; rel=describedby; type="application/x-bittorrent"'
    const signature = '<https://dl.example.org/dir/file%201.iso.asc>; rel=describedby; type="application/pgp-signature"'
    const headers = headersFor('https://dl.example.org/', {torrents: true})
    expect(redirect(headers, entry('one', {formats: FORMAT_TORRENT, signature: '.asc'}))).to.deep.equal(['Link', META4, 'Link', torrent, 'Digest', digestOf('one'), 'Link', signature])
    expect(redirect(headers, entry('one', {formats: 0, signature: '.asc'}))).to.deep.equal(['Link', META4, 'Digest', digestOf('one'), 'Link', signature])
    const noTorrents = headersFor('https://dl.example.org/')
    expect(redirect(noTorrents, entry('one', {formats: FORMAT_TORRENT}))).to.deep.equal(['Link', META4, 'Digest', digestOf('one')])
  })

  it('builds the lines once per file version and base URL, and anew for a new version', () => {
    const headers = headersFor('https://dl.example.org/')
    const first = headers.lines(entry('one'), 'https://dl.example.org/')
    expect(headers.lines(entry('one'), 'https://dl.example.org/')).to.equal(first)
    // Rehashed after a rewrite: new size, mtime and hashes.
    expect(headers.lines(entry('two', {size: 20, mtime: 1_700_000_100}), 'https://dl.example.org/')).to.deep.equal(['Link', META4, 'Digest', digestOf('two')])
    // Same size and mtime, other hashes (a rehash of a file rewritten within its mtime second).
    expect(headers.lines(entry('three', {size: 20, mtime: 1_700_000_100}), 'https://dl.example.org/')).to.deep.equal(['Link', META4, 'Digest', digestOf('three')])
    // The hashes went stale: no Digest any more.
    expect(headers.lines(entry(null, {size: 20, mtime: 1_700_000_100}), 'https://dl.example.org/')).to.deep.equal(['Link', META4])
    expect(headers.lines(entry(null, {size: 20, mtime: 1_700_000_100}), 'http://other.example:8080/')).to.deep.equal([
      'Link',
      '<http://other.example:8080/dir/file%201.iso.meta4>; rel=describedby; type="application/metalink4+xml"',
    ])
  })

  it('names no origin among the duplicates: a redirect names mirrors only', () => {
    const lines = headersFor('https://dl.example.org/').lines(entry('one'), 'https://dl.example.org/')
    expect(lines.join('\n')).to.not.include('rel=duplicate')
    expect(lines.join('\n')).to.not.include('_origin')
  })

  it('builds the lines of a snapshot entry once per version: a reload with the same digests keeps them, a rehash does not', () => {
    const headers = headersFor('https://dl.example.org/')
    const base = 'https://dl.example.org/'
    const fields = {path: 'dir/file 1.iso', size: 19, mtime: 1_700_000_000, mirrors: new Int16Array([1])}
    const digests = (content: string) => [hex('md5', content), hex('sha1', content), hex('sha256', content)] as const
    const loaded = new DigestArena().entry(fields, ...digests('one'))
    const first = headers.lines(loaded, base)
    expect(first).to.deep.equal(['Link', META4, 'Digest', digestOf('one')])
    expect(headers.lines(loaded, base)).to.equal(first)
    // A full reload: a new arena, new digest ids, the same digests.
    const reloaded = new DigestArena().entry(fields, ...digests('one'))
    expect(reloaded.digestId).not.to.equal(loaded.digestId)
    expect(headers.lines(reloaded, base)).to.equal(first)
    // Rehashed in place (same size and mtime), as a refresh delivers it into the same arena.
    const arena = new DigestArena()
    arena.entry(fields, ...digests('one'))
    const rehashed = arena.entry(fields, ...digests('two'))
    expect(headers.lines(rehashed, base)).to.deep.equal(['Link', META4, 'Digest', digestOf('two')])
    expect(headers.lines(arena.entry(fields, null, null, null), base)).to.deep.equal(['Link', META4])
  })

  it('keeps at most its budget of file versions, the least recently used going first', () => {
    const headers = headersFor(undefined, {cache: {entries: 2, bytes: 32 * 1024 * 1024}})
    const base = 'https://dl.example.org/'
    const a = headers.lines(entry('a', {path: 'a'}), base)
    const b = headers.lines(entry('b', {path: 'b'}), base)
    headers.lines(entry('c', {path: 'c'}), base)
    expect(headers.lines(entry('b', {path: 'b'}), base)).to.equal(b)
    const again = headers.lines(entry('a', {path: 'a'}), base)
    expect(again).not.to.equal(a)
    expect(again).to.deep.equal(a)
  })

  it('takes the base URL from the configuration, a plain Host, or the local address', () => {
    const socket = {localAddress: '::1', localPort: 8080}
    expect(new BaseUrls('https://dl.example.org').of({headers: {host: 'x.example'}, socket} as never, false)).to.equal('https://dl.example.org/')
    const urls = new BaseUrls()
    expect(urls.of({headers: {host: 'dl.example.org:81'}, socket} as never, false)).to.equal('http://dl.example.org:81/')
    expect(urls.of({headers: {host: 'dl.example.org:81'}, socket} as never, true)).to.equal('https://dl.example.org:81/')
    expect(urls.of({headers: {host: 'evil.example/<x>'}, socket} as never, false)).to.equal('http://[::1]:8080/')
    expect(urls.of({headers: {}, socket: {localAddress: '127.0.0.1', localPort: 80}} as never, true)).to.equal('https://127.0.0.1:80/')
    // The origin's direct base: serve.origin_url, else the origin form under the public base URL.
    expect(urls.origin({headers: {host: 'dl.example.org:81'}, socket} as never, false)).to.equal('http://dl.example.org:81/_origin/')
    expect(new BaseUrls('https://dl.example.org/mb', 'http://origin.example.org/pub').origin({headers: {}, socket} as never, true)).to.equal('http://origin.example.org/pub/')
  })
})
