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
 *     <pieces length="262144" type="sha-256"><hash>…</hash>…</pieces>
 *     <url location="de" priority="1">https://mirror/PATH</url>…
 *     <url priority="N">https://host/PATH</url>   (the origin, last)
 *   </file>
 * </metalink>
 * ```
 * Hash type names are the IANA "Hash Function Textual Names" registry's (RFC 5854 §4.2.4).
 */
import {createCB} from 'xmlbuilder2'
import {type MetalinkDocument, rfc3339} from './document.js'

export const META4_MEDIA_TYPE = 'application/metalink4+xml'
export const META4_NAMESPACE = 'urn:ietf:params:xml:ns:metalink'

/** IANA hash names (RFC 5854 §4.2.4) for our piece algorithms. */
const PIECE_TYPE = {sha256: 'sha-256', sha1: 'sha-1'} as const

/**
 * Renders `doc` as an RFC 5854 Metalink 4 document (UTF-8 XML text, pretty-printed).
 * Hashes and pieces appear only when `doc.hashes` is set (fresh).
 */
export function renderMeta4(doc: MetalinkDocument): string {
  let out = ''
  const xml = createCB({data: (text: string) => (out += text), prettyPrint: true})
  xml.dec({version: '1.0', encoding: 'UTF-8'})
  xml.ele(META4_NAMESPACE, 'metalink')
  xml.ele('generator').txt(doc.generator).up()
  xml.ele('origin').att('dynamic', 'true').txt(doc.meta4Url).up()
  xml.ele('published').txt(rfc3339(doc.published)).up()
  xml.ele('file').att('name', doc.name)
  xml.ele('size').txt(String(doc.size)).up()
  const h = doc.hashes
  if (h) {
    xml.ele('hash').att('type', 'md5').txt(h.md5).up()
    xml.ele('hash').att('type', 'sha-1').txt(h.sha1).up()
    xml.ele('hash').att('type', 'sha-256').txt(h.sha256).up()
    if (h.pieces.length > 0 && h.pieceSize > 0) {
      xml.ele('pieces').att('length', String(h.pieceSize)).att('type', PIECE_TYPE[h.pieceHash])
      for (const piece of h.pieces) xml.ele('hash').txt(piece).up()
      xml.up()
    }
  }
  for (const source of doc.sources) {
    const url = xml.ele('url')
    if (source.location) url.att('location', source.location)
    url.att('priority', String(source.priority)).txt(source.url).up()
  }
  xml.up() // file
  xml.up() // metalink
  xml.end()
  return out.endsWith('\n') ? out : `${out}\n`
}
