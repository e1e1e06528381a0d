/**
 * Metalink 4 documents (RFC 5854, `application/metalink4+xml`), written with xmlbuilder2.
 *
 * Shape (RFC 5854 §4):
 * ```xml
 * <metalink xmlns="urn:ietf:params:xml:ns:metalink">
 *   <generator>mb/0.1.0</generator>
 *   <origin dynamic="true">https://host/PATH.meta4</origin>
 *   <published>2026-11-29T16:00:00Z</published>
 *   <file name="NAME">
 *     <size>BYTES</size>
 *     <hash type="md5">…</hash><hash type="sha-1">…</hash><hash type="sha-256">…</hash>
 *     <pieces length="262144" type="sha-1"><hash>…</hash>…</pieces>
 *     <signature mediatype="application/pgp-signature">-----BEGIN PGP SIGNATURE-----…</signature>   (FILE.asc, ./signature.ts)
 *     <url location="de" priority="1">https://mirror/PATH</url>…
 *     <url priority="N">https://host/PATH</url>   (the origin, last)
 *     <metaurl mediatype="torrent" priority="N+1">https://host/PATH.torrent</metaurl>   (only with torrent.meta4_metaurl)
 *   </file>
 * </metalink>
 * ```
 * Hash type names are the IANA "Hash Function Textual Names" registry's (RFC 5854 §4.2.4).
 *
 * Piece hashes: one `<pieces>` element, SHA-1, which every client checks: libzypp (zypper)
 * reads only `sha1`/`sha-1` and `zsync` pieces, and wget2 (1.99) adds up every `<pieces>`
 * element of a file into one list, so a second list (SHA-256 beside SHA-1) puts its pieces
 * past the end of the file and wget2 asks for them forever (416). The index computes the SHA-1
 * pieces in the same read as the others (`sha1_pieces`, src/lib/origin/hash.ts); a row from
 * before it had them falls back to its own piece algorithm.
 */
import {fragment} from 'xmlbuilder2'
import {clientPieces, type MetalinkDocument} from './document.js'
import {isoSeconds} from '../time.js'

export const META4_MEDIA_TYPE = 'application/metalink4+xml'
const META4_NAMESPACE = 'urn:ietf:params:xml:ns:metalink'

/** IANA hash names (RFC 5854 §4.2.4) for our piece algorithms. */
const PIECE_TYPE = {sha256: 'sha-256', sha1: 'sha-1'} as const

const XML_ESCAPES: Record<string, string> = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', '\t': '&#9;', '\n': '&#10;', '\r': '&#13;'}
/** Characters XML 1.0 cannot hold at all (§2.2): C0 controls but tab, LF and CR; U+FFFE, U+FFFF; lone surrogates. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters XML cannot hold are what it finds
const NOT_XML = /[\0-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters XML cannot hold are what it finds
const XML_SPECIAL = /[&<>"\0-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]/
// biome-ignore lint/suspicious/noControlCharactersInRegex: the characters XML cannot hold are what it finds
const ATTRIBUTE_SPECIAL = /[&<>"\0-\x1f\ufffe\uffff\ud800-\udfff]/

/**
 * Escapes text for XML element content and double-quoted attributes; a character XML cannot
 * hold (a control character in a file name) becomes U+FFFD, so the document stays well-formed.
 */
export function xmlEscape(text: string): string {
  return XML_SPECIAL.test(text) ? text.replace(NOT_XML, '\ufffd').replace(/[&<>"]/g, (c) => XML_ESCAPES[c]) : text
}

/**
 * Escapes text for a double-quoted XML attribute whose value must survive as it is (a file
 * name): as {@link xmlEscape}, and tab, LF and CR as character references, which a parser's
 * attribute-value normalization (XML 1.0 §3.3.3) would otherwise turn into spaces.
 */
export function xmlAttribute(text: string): string {
  return ATTRIBUTE_SPECIAL.test(text) ? text.replace(NOT_XML, '\ufffd').replace(/[&<>"\t\n\r]/g, (c) => XML_ESCAPES[c]) : text
}

/**
 * The part of the Metalink 4 `<file>` element that is the same for every client and every
 * request: `<size>`, the `<hash>`es and `<pieces>` (up to 2,048 piece hashes), indented, one
 * element a line. The caller keeps it per file version (./version-cache.ts).
 */
export function meta4FilePart(doc: MetalinkDocument): string {
  const h = doc.hashes
  const xml = fragment()
  xml.ele('size').txt(String(doc.size))
  if (h) {
    xml.ele('hash').att('type', 'md5').txt(h.md5)
    xml.ele('hash').att('type', 'sha-1').txt(h.sha1)
    xml.ele('hash').att('type', 'sha-256').txt(h.sha256)
    const pieces = clientPieces(h)
    if (pieces) {
      const element = xml.ele('pieces').att('length', String(h.pieceSize)).att('type', PIECE_TYPE[pieces.type])
      for (const piece of pieces.digests) element.ele('hash').txt(piece)
    }
  }
  return xml
    .end({prettyPrint: true, indent: '  '})
    .split('\n')
    .map((line) => `    ${line}\n`)
    .join('')
}

/** What comes before {@link meta4FilePart}: the envelope up to `<file name>` (per request: the origin URL and `published`). */
export function meta4Head(doc: MetalinkDocument): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="${META4_NAMESPACE}">
  <generator>${xmlEscape(doc.generator)}</generator>
  <origin dynamic="true">${xmlEscape(doc.meta4Url)}</origin>
  <published>${isoSeconds(doc.published)}</published>
  <file name="${xmlAttribute(doc.name)}">
`
}

/**
 * Whether no URL of `sources` holds a character {@link xmlEscape} replaces, by one test of
 * them all together: most lists need no escape, and a test per URL would flatten and scan
 * each apart (the mirror's base and the path are joined lazily).
 */
export function plainUrls(sources: ReadonlyArray<{url: string}>): boolean {
  let urls = ''
  for (let i = 0; i < sources.length; i++) urls += sources[i].url
  return !XML_SPECIAL.test(urls)
}

/** `    <url location="LOCATION" priority="` by location (the countries of the mirrors: a few hundred at most; cleared past 1,000). */
const URL_OPENINGS = new Map<string, string>()

/** The start of a `<url>` line up to its priority's digits, for a source in `location` (or none). */
function urlOpening(location: string | undefined): string {
  if (!location) return '    <url priority="'
  let opening = URL_OPENINGS.get(location)
  if (opening === undefined) {
    if (URL_OPENINGS.size >= 1000) URL_OPENINGS.clear()
    opening = `    <url location="${xmlEscape(location)}" priority="`
    URL_OPENINGS.set(location, opening)
  }
  return opening
}

/** What comes after {@link meta4FilePart}: the signature, this client's ranked `<url>`s, the `<metaurl>`, the closing tags. */
export function meta4Tail(doc: MetalinkDocument): string {
  let out = doc.signature ? `    <signature mediatype="application/pgp-signature">${xmlEscape(doc.signature)}</signature>\n` : ''
  const sources = doc.sources
  const plain = plainUrls(sources)
  for (let i = 0; i < sources.length; i++) {
    const source = sources[i]
    out += `${urlOpening(source.location)}${source.priority}">${plain ? source.url : xmlEscape(source.url)}</url>\n`
  }
  // RFC 5854 §4.2.8: a metainfo file describing the same file (here the BitTorrent one),
  // ranked after every URL (§4.2.8.3: lower priority numbers go first).
  if (doc.torrentUrl && doc.torrentMetaurl) out += `    <metaurl mediatype="torrent" priority="${doc.sources.length + 1}">${xmlEscape(doc.torrentUrl)}</metaurl>\n`
  return `${out}  </file>\n</metalink>\n`
}

/**
 * Renders `doc` as an RFC 5854 Metalink 4 document (UTF-8 XML text, pretty-printed):
 * {@link meta4Head}, the file part (`filePart`, default {@link meta4FilePart} of `doc`),
 * {@link meta4Tail}. Hashes and pieces appear only when `doc.hashes` is set (fresh).
 */
export function renderMeta4(doc: MetalinkDocument, filePart = meta4FilePart(doc)): string {
  return meta4Head(doc) + filePart + meta4Tail(doc)
}
