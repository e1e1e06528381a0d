import {createHash} from 'node:crypto'
import {expect} from 'chai'
import {XMLParser} from 'fast-xml-parser'
import {validateXML} from 'xmllint-wasm'
import {readFileSync} from 'node:fs'
import {buildDocument, type BuildOptions} from '../../src/lib/metalink/document.js'
import {describedByLink, digestHeader, hashFileBody} from '../../src/lib/metalink/headers.js'
import {acceptsJson, contentDisposition, negotiatedMetalink} from '../../src/lib/metalink/http.js'
import {meta4Tail, renderMeta4, xmlEscape} from '../../src/lib/metalink/meta4.js'
import {isoSeconds} from '../../src/lib/time.js'
import {metalink3Tail, preferenceAt, renderMetalink3} from '../../src/lib/metalink/metalink3.js'
import {buildMirrorList, escapeHtml, renderMirrorListHtml} from '../../src/lib/metalink/mirrorlist.js'
import type {Candidate, Exclusion, Selection, SelectMirror} from '../../src/lib/select/types.js'

const SCHEMA = readFileSync(new URL('../fixtures/metalink/metalink4.rng', import.meta.url), 'utf8')
const parser = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '@', isArray: (name) => ['url', 'hash'].includes(name), parseTagValue: false})

function mirror(id: number, country: string | null, extra: Partial<SelectMirror> = {}): SelectMirror {
  return {
    id,
    identifier: `m${id}.example.net`,
    httpUrl: `http://m${id}.example.net/pub/`,
    httpsUrl: null,
    ftpUrl: null,
    rsyncUrl: null,
    country,
    continent: 'EU',
    latitude: null,
    longitude: null,
    asn: null,
    prefixes: [],
    clientPrefixes: [],
    excludeCountries: new Set(),
    otherCountries: new Set(),
    score: 100,
    enabled: true,
    up: true,
    httpUp: null,
    httpsUp: null,
    ipv6: null,
    countryOnly: false,
    regionOnly: false,
    asOnly: false,
    prefixOnly: false,
    fallback: false,
    fileMaxsize: null,
    basePath: '',
    lastScanOkAt: null,
    needsRescan: false,
    maintenanceUntil: null,
    scanRefusedAt: null,
    badCopiesSuspectAt: null,
    familyUp: {},
    rangeOk: null,
    urlChangedAt: null,
    syncedAt: null,
    ...extra,
  }
}

const candidates = (n: number): Candidate[] =>
  Array.from({length: n}, (_, i) => ({mirror: mirror(i + 1, i % 2 ? 'FR' : 'DE'), realm: i < 2 ? 'country' : 'continent', rank: i + 1, url: `http://m${i + 1}.example.net/pub/dir/file.iso`}))

const data = Buffer.from('metalink test data\n')
const hex = (algo: string) => createHash(algo).update(data).digest('hex')
const stored = {
  size: 19,
  mtime: 1_700_000_000,
  md5: hex('md5'),
  sha1: hex('sha1'),
  sha256: hex('sha256'),
  piece_size: 262144,
  piece_hash: 'sha256',
  pieces: hex('sha256'),
  sha1_pieces: hex('sha1'),
  hashed_size: 19,
  hashed_mtime: 1_700_000_000,
}

function options(extra: Partial<BuildOptions> = {}): BuildOptions {
  return {
    path: 'dir/file.iso',
    size: 19,
    mtime: 1_700_000_000,
    stored,
    selection: {realm: 'country', ranked: candidates(3), excluded: []},
    baseUrl: 'https://dl.example.org/',
    now: new Date('2026-11-29T12:00:00.123Z'),
    // The origin listed after any number of mirrors here (the rule is tested on its own).
    originFallbackMirrors: 1000,
    ...extra,
  }
}

async function valid(xml: string): Promise<boolean> {
  const result = await validateXML({xml: {fileName: 'doc.meta4', contents: xml}, schema: {fileName: 'metalink4.rng', contents: SCHEMA}, extension: 'relaxng'})
  return result.valid
}

describe('metalink documents', () => {
  it('lists ranked mirrors with priority and location, capped, then the origin last', () => {
    const doc = buildDocument(options({selection: {realm: 'country', ranked: candidates(30), excluded: []}}))
    expect(doc.sources).to.have.length(21)
    expect(doc.sources[0]).to.deep.equal({url: 'http://m1.example.net/pub/dir/file.iso', priority: 1, location: 'de', mirror: 'm1.example.net'})
    expect(doc.sources[19].priority).to.equal(20)
    expect(doc.sources[20]).to.deep.equal({url: 'https://dl.example.org/dir/file.iso', priority: 21})
    expect(buildDocument(options({maxUrls: 2})).sources.map((s) => s.priority)).to.deep.equal([1, 2, 3])
    expect(doc.meta4Url).to.equal('https://dl.example.org/dir/file.iso.meta4')
  })

  it('lists the origin only below serve.origin_fallback_mirrors mirrors (default 2), and always when none is', () => {
    const urls = (n: number, originFallbackMirrors?: number) =>
      buildDocument(options({selection: {realm: 'country', ranked: candidates(n), excluded: []}, originFallbackMirrors})).sources.map((s) => s.mirror ?? 'origin')
    expect(urls(1, undefined)).to.deep.equal(['m1.example.net', 'origin'])
    expect(urls(2, undefined)).to.deep.equal(['m1.example.net', 'm2.example.net'])
    expect(urls(2, 3)).to.deep.equal(['m1.example.net', 'm2.example.net', 'origin'])
    expect(urls(0, 0)).to.deep.equal(['origin'])
    expect(urls(1, 0)).to.deep.equal(['m1.example.net'])
  })

  it('lists only the origin when the selection leaves the file to the origin', () => {
    const selection: Selection = {realm: null, ranked: candidates(3), excluded: [], origin: {reason: 'origin_only', detail: 'matches *.asc'}}
    expect(buildDocument(options({selection})).sources).to.deep.equal([{url: 'https://dl.example.org/dir/file.iso', priority: 1}])
  })

  it('includes hashes only when fresh', () => {
    expect(buildDocument(options()).hashes?.sha256).to.equal(hex('sha256'))
    expect(buildDocument(options({stored: {...stored, hashed_mtime: 1}})).hashes).to.equal(null)
    expect(buildDocument(options({hashesFresh: false})).hashes).to.equal(null)
  })

  it('renders a schema-valid meta4 with escaped names and URLs, and one without hashes', async () => {
    const doc = buildDocument(options({path: 'dir/a&b <c> "ü".iso'}))
    const xml = renderMeta4(doc)
    expect(await valid(xml)).to.equal(true)
    const parsed = parser.parse(xml).metalink
    expect(xml).to.include('<file name="a&amp;b &lt;c&gt; &quot;ü&quot;.iso">')
    expect(parsed.file['@name']).to.equal('a&b <c> "ü".iso')
    expect(parsed.published).to.equal('2026-11-29T12:00:00Z')
    expect(parsed.file.url.at(-1)['#text']).to.equal('https://dl.example.org/dir/a&b%20%3Cc%3E%20%22%C3%BC%22.iso')
    const bare = renderMeta4(buildDocument(options({hashesFresh: false})))
    expect(await valid(bare)).to.equal(true)
    expect(parser.parse(bare).metalink.file.hash).to.equal(undefined)
    expect(xmlEscape('a<b>&"c"')).to.equal('a&lt;b&gt;&amp;&quot;c&quot;')
  })

  it('keeps a file name with tab, LF, CR or characters XML cannot hold in both formats well-formed and unchanged where XML allows', async () => {
    const doc = buildDocument(options({path: 'dir/new\nline\tx\ry\u0001z\ud800.iso'}))
    const meta4 = renderMeta4(doc)
    expect(await valid(meta4)).to.equal(true)
    expect(meta4).to.include('<file name="new&#10;line&#9;x&#13;y\ufffdz\ufffd.iso">')
    const m3 = renderMetalink3(doc)
    expect(m3).to.include('<file name="new&#10;line&#9;x&#13;y\ufffdz\ufffd.iso">')
    expect(parser.parse(m3).metalink.files.file['@name']).to.be.a('string')
    expect(xmlEscape('a\u0002b\nc')).to.equal('a\ufffdb\nc')
  })

  it('writes the <url> lines of both formats as escaping each URL and location alone would, whether any of them needs it or none', () => {
    // The straightforward rendering, one escape per value: the tail must equal it byte for byte.
    const plainTail = (doc: ReturnType<typeof buildDocument>) =>
      `${doc.sources.map((s) => `    <url ${s.location ? `location="${xmlEscape(s.location)}" ` : ''}priority="${s.priority}">${xmlEscape(s.url)}</url>\n`).join('')}  </file>\n</metalink>\n`
    const type = (url: string) => xmlEscape(url.slice(0, url.indexOf(':')))
    const plainTail3 = (doc: ReturnType<typeof buildDocument>) =>
      `      <resources>\n${doc.sources.map((s, i) => `        <url type="${type(s.url)}"${s.location ? ` location="${xmlEscape(s.location)}"` : ''} preference="${preferenceAt(i)}">${xmlEscape(s.url)}</url>\n`).join('')}      </resources>\n    </file>\n  </files>\n</metalink>\n`
    const odd = (i: number, c: Candidate): Candidate => (i === 7 ? {...c, url: `${c.url}?a=1&b="2"<3>`} : i === 9 ? {...c, mirror: {...c.mirror, country: 'X"Y'}} : c)
    for (const ranked of [candidates(40), candidates(40).map((c, i) => odd(i, c)), candidates(0)]) {
      for (const i of [0, 1, 2]) {
        const doc = buildDocument(
          options({path: `dir/file-${i}.iso`, selection: {realm: 'country', ranked: ranked.map((c) => ({...c, url: c.url.replace('file.iso', `file-${i}.iso`)})), excluded: []}, maxUrls: 100}),
        )
        expect(meta4Tail(doc)).to.equal(plainTail(doc))
        expect(metalink3Tail(doc)).to.equal(plainTail3(doc))
      }
    }
    const times = ['2026-11-29T12:00:00.999Z', '2026-11-29T12:00:01.000Z', '2026-11-29T12:00:00.000Z', '1969-12-31T23:59:59.500Z']
    for (const t of [...times, ...times]) expect(isoSeconds(new Date(t))).to.equal(t.replace(/\.\d{3}Z$/, 'Z'))
  })

  it('names SHA-1 pieces sha-1 (meta4) and sha1 (Metalink 3), one list when the index made SHA-1 pieces', () => {
    const sha1 = {...stored, piece_hash: 'sha1', pieces: hex('sha1') + hex('sha1'), sha1_pieces: hex('sha1') + hex('sha1')}
    const doc = buildDocument(options({stored: sha1}))
    expect(doc.hashes!.pieceCount).to.equal(2)
    const m4 = parser.parse(renderMeta4(doc)).metalink.file.pieces
    expect([m4['@type'], m4.hash]).to.deep.equal(['sha-1', [hex('sha1'), hex('sha1')]])
    const m3 = parser.parse(renderMetalink3(doc)).metalink.files.file.verification.pieces
    expect(m3['@type']).to.equal('sha1')
  })

  it('writes one list of pieces, SHA-1 (what libzypp, aria2c and wget2 all check), in both formats; a row without SHA-1 pieces gives its own', async () => {
    const xml = renderMeta4(buildDocument(options()))
    expect(await valid(xml)).to.equal(true)
    const m4 = parser.parse(xml).metalink.file.pieces
    expect([m4['@type'], m4['@length'], m4.hash]).to.deep.equal(['sha-1', '262144', [hex('sha1')]])
    const m3 = parser.parse(renderMetalink3(buildDocument(options()))).metalink.files.file.verification.pieces
    expect([m3['@type'], m3.hash[0]['#text']]).to.deep.equal(['sha1', hex('sha1')])
    // SHA-1 pieces that do not cover the file (a row hashed before they existed): the row's own pieces.
    const old = parser.parse(renderMeta4(buildDocument(options({stored: {...stored, sha1_pieces: null}})))).metalink.file.pieces
    expect([old['@type'], old.hash]).to.deep.equal(['sha-256', [hex('sha256')]])
  })

  it('renders Metalink 3.0 with preference from 100 down, never below 1', () => {
    const parsed = parser.parse(renderMetalink3(buildDocument(options()))).metalink
    expect(parsed['@xmlns']).to.equal('http://www.metalinker.org/')
    expect(parsed['@pubdate']).to.equal('Sun, 29 Nov 2026 12:00:00 GMT')
    const file = parsed.files.file
    expect(file.verification.pieces.hash[0]).to.deep.equal({'@piece': '0', '#text': hex('sha1')})
    expect(file.resources.url.map((u: any) => [u['@type'], u['@preference'], u['@location']])).to.deep.equal([
      ['http', '100', 'de'],
      ['http', '99', 'fr'],
      ['http', '98', 'de'],
      ['https', '97', undefined],
    ])
    expect(preferenceAt(0)).to.equal(100)
    expect(preferenceAt(150)).to.equal(1)
  })

  it('writes hash files, RFC 3230 Digest and RFC 6249 describedby values', () => {
    const doc = buildDocument(options())
    expect(hashFileBody(doc.hashes!, 'sha256', doc.name)).to.equal(`${hex('sha256')}  file.iso\n`)
    expect(hashFileBody(doc.hashes!, 'md5', doc.name)).to.equal(`${hex('md5')}  file.iso\n`)
    // coreutils' escaped form for a name with a backslash, LF or CR: `sha256sum -c` reads it back.
    expect(hashFileBody(doc.hashes!, 'sha256', 'a\\b\nc\rd.iso')).to.equal(`\\${hex('sha256')}  a\\\\b\\nc\\rd.iso\n`)
    const b64 = (algo: string) => createHash(algo).update(data).digest('base64')
    expect(digestHeader(doc.hashes!)).to.equal(`SHA-256=${b64('sha256')}, MD5=${b64('md5')}, SHA=${b64('sha1')}`)
    expect(describedByLink(doc.meta4Url)).to.equal('<https://dl.example.org/dir/file.iso.meta4>; rel=describedby; type="application/metalink4+xml"')
  })

  it('negotiates by Accept and names the attachment (RFC 6266)', () => {
    expect(negotiatedMetalink('*/*,application/metalink4+xml,application/metalink+xml')).to.equal('meta4') // aria2c
    expect(negotiatedMetalink('*/*, application/metalink+xml, application/metalink4+xml')).to.equal('meta4') // zypper: Metalink 4 wins the tie
    expect(negotiatedMetalink('*/*, application/metalink+xml')).to.equal('metalink') // a Metalink 3 client
    expect(negotiatedMetalink('application/metalink+xml, application/metalink4+xml;q=0.5')).to.equal('metalink')
    expect(negotiatedMetalink('*/*;q=0.9, application/METALINK4+xml;q=0.9')).to.equal('meta4')
    expect(negotiatedMetalink('*/*, application/metalink4+xml;q=0')).to.equal(undefined)
    expect(negotiatedMetalink('application/octet-stream, application/metalink4+xml;q=0.5')).to.equal(undefined)
    expect(negotiatedMetalink('*/*, application/metalink4+xml;q=x')).to.equal(undefined)
    expect(negotiatedMetalink('*/*')).to.equal(undefined)
    expect(negotiatedMetalink(undefined)).to.equal(undefined)
    expect(acceptsJson('application/json')).to.equal(true)
    expect(acceptsJson('text/html,application/json;q=0.9')).to.equal(false)
    expect(acceptsJson(undefined)).to.equal(false)
    expect(contentDisposition('file.iso.meta4')).to.equal('attachment; filename="file.iso.meta4"')
    expect(contentDisposition('grüße "x".meta4')).to.equal(`attachment; filename="gr__e _x_.meta4"; filename*=UTF-8''gr%C3%BC%C3%9Fe%20%22x%22.meta4`)
  })

  it('builds the mirror list from an allow-list: only ranked mirrors and the outdated copies given, no user info, no admin field', () => {
    const ranked = candidates(3)
    ranked[0] = {...ranked[0], url: 'http://user:secret@m1.example.net/pub/dir/file.iso'}
    const excluded: Exclusion[] = [
      {mirror: mirror(9, 'DE', {up: false, httpUrl: 'http://u:pw@m9.example.net/pub/'}), reason: 'down', detail: 'probe failed'},
      {mirror: mirror(10, 'DE'), reason: 'not_held', detail: 'does not hold it'},
      {mirror: mirror(11, 'DE', {httpUrl: 'http://u:pw@m11.example.net/pub/'}), reason: 'stale', detail: 'outdated copy: 60000 bytes, origin 65536'},
    ]
    const doc = buildDocument(options({path: 'dir/<script>.iso'}))
    const selection: Selection = {realm: 'country', ranked, excluded}
    const list = buildMirrorList(doc, selection, {ip: '192.0.2.1', country: 'DE', continent: 'EU', https: false}, [excluded[2]])
    expect(list.realms.map((g) => [g.realm, g.mirrors.map((m) => m.identifier)])).to.deep.equal([
      ['country', ['m1.example.net', 'm2.example.net']],
      ['continent', ['m3.example.net']],
    ])
    expect(list.realms[0].mirrors[0]).to.deep.equal({
      identifier: 'm1.example.net',
      country: 'DE',
      continent: 'EU',
      url: 'http://m1.example.net/pub/dir/file.iso',
      realm: 'country',
      rank: 1,
      distance_km: undefined,
    })
    expect(list.outdated).to.deep.equal([
      {identifier: 'm11.example.net', country: 'DE', continent: 'EU', url: 'http://m11.example.net/pub/dir/%3Cscript%3E.iso', reason: 'stale', detail: 'outdated copy: 60000 bytes, origin 65536'},
    ])
    expect(JSON.stringify(list)).not.to.include('m9.example.net')
    expect(buildMirrorList(doc, selection, {ip: '192.0.2.1', https: false}).outdated).to.deep.equal([])
    const html = renderMirrorListHtml(list)
    expect(html).not.to.include('<script>')
    expect(html).to.include('&lt;script&gt;.iso')
    expect(html).not.to.include('secret')
    expect(html).not.to.include(':pw@')
    expect(escapeHtml(`<a href="x">'`)).to.equal('&lt;a href=&quot;x&quot;&gt;&#39;')
  })
})
