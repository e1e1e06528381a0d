/**
 * Metalink 3.0 documents (`application/metalink+xml`, namespace `http://www.metalinker.org/`),
 * for clients that predate RFC 5854. Follows the Metalink 3.0 specification (metalinker.org,
 * 2007) as MirrorBrain writes it: `type="dynamic"`, `origin`, `pubdate` (RFC 822),
 * `verification` with md5/sha1/sha256 and SHA-1 `pieces`, and `resources` whose `url`s carry
 * `preference` from 100 down (the origin lowest).
 */
import {clientPieces, type MetalinkDocument} from './document.js'
import {plainUrls, xmlAttribute, xmlEscape} from './meta4.js'

export const METALINK3_MEDIA_TYPE = 'application/metalink+xml'
const METALINK3_NAMESPACE = 'http://www.metalinker.org/'

/** `preference` for the source at `index` (0-based): 100, 99, …, never below 1. */
export function preferenceAt(index: number): number {
  return Math.max(1, 100 - index)
}

function urlType(url: string): string {
  const colon = url.indexOf(':')
  return colon > 0 ? url.slice(0, colon).toLowerCase() : 'http'
}

/**
 * The part of the Metalink 3.0 `<file>` element that is the same for every client and every
 * request: `<size>` and `<verification>` (hashes, pieces), indented, one element a line. The
 * caller keeps it per file version (./version-cache.ts).
 */
export function metalink3FilePart(doc: MetalinkDocument): string {
  let out = `      <size>${doc.size}</size>\n`
  const h = doc.hashes
  if (!h) return out
  out += `      <verification>
        <hash type="md5">${xmlEscape(h.md5)}</hash>
        <hash type="sha1">${xmlEscape(h.sha1)}</hash>
        <hash type="sha256">${xmlEscape(h.sha256)}</hash>
`
  // One list, SHA-1, as in the meta4 (./meta4.ts has why).
  const pieces = clientPieces(h)
  if (pieces) {
    const lines = pieces.digests.map((piece, i) => `          <hash piece="${i}">${xmlEscape(piece)}</hash>\n`)
    out += `        <pieces length="${h.pieceSize}" type="${pieces.type}">\n${lines.join('')}        </pieces>\n`
  }
  return `${out}      </verification>\n`
}

/** What comes before {@link metalink3FilePart}: the envelope up to `<file name>` (per request: the origin URL and `pubdate`, RFC 822). */
export function metalink3Head(doc: MetalinkDocument): string {
  return `<?xml version="1.0" encoding="UTF-8"?>
<metalink xmlns="${METALINK3_NAMESPACE}" version="3.0" type="dynamic" origin="${xmlEscape(doc.metalinkUrl)}" generator="${xmlEscape(doc.generator)}" pubdate="${doc.published.toUTCString()}">
  <files>
    <file name="${xmlAttribute(doc.name)}">
`
}

/** What comes after {@link metalink3FilePart}: this client's `<resources>` (`preference` 100 down, the origin last) and the closing tags. */
export function metalink3Tail(doc: MetalinkDocument): string {
  let out = '      <resources>\n'
  // A URL free of escapes has a type (its scheme) free of them too.
  const plain = plainUrls(doc.sources)
  doc.sources.forEach((source, i) => {
    const location = source.location ? ` location="${xmlEscape(source.location)}"` : ''
    const type = urlType(source.url)
    out += `        <url type="${plain ? type : xmlEscape(type)}"${location} preference="${preferenceAt(i)}">${plain ? source.url : xmlEscape(source.url)}</url>\n`
  })
  return `${out}      </resources>\n    </file>\n  </files>\n</metalink>\n`
}

/**
 * Renders `doc` as a Metalink 3.0 document (UTF-8 XML text, pretty-printed):
 * {@link metalink3Head}, the file part (`filePart`, default {@link metalink3FilePart} of
 * `doc`), {@link metalink3Tail}.
 */
export function renderMetalink3(doc: MetalinkDocument, filePart = metalink3FilePart(doc)): string {
  return metalink3Head(doc) + filePart + metalink3Tail(doc)
}
