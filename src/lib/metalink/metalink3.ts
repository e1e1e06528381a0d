/**
 * Metalink 3.0 documents (`application/metalink+xml`, namespace `http://www.metalinker.org/`),
 * for clients that predate RFC 5854. Follows the Metalink 3.0 specification (metalinker.org,
 * 2007) as MirrorBrain writes it: `type="dynamic"`, `origin`, `pubdate` (RFC 822),
 * `verification` with md5/sha1/sha256 and `pieces`, and `resources` whose `url`s carry
 * `preference` from 100 down (the origin lowest).
 */
import {createCB} from 'xmlbuilder2'
import {type MetalinkDocument, pieceList} from './document.js'

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

/** Renders `doc` as a Metalink 3.0 document (UTF-8 XML text, pretty-printed). */
export function renderMetalink3(doc: MetalinkDocument): string {
  let out = ''
  const xml = createCB({data: (text: string) => (out += text), prettyPrint: true})
  xml.dec({version: '1.0', encoding: 'UTF-8'})
  xml.ele(METALINK3_NAMESPACE, 'metalink').att('version', '3.0').att('type', 'dynamic').att('origin', doc.metalinkUrl).att('generator', doc.generator).att('pubdate', doc.published.toUTCString())
  xml.ele('files')
  xml.ele('file').att('name', doc.name)
  xml.ele('size').txt(String(doc.size)).up()
  const h = doc.hashes
  if (h) {
    xml.ele('verification')
    xml.ele('hash').att('type', 'md5').txt(h.md5).up()
    xml.ele('hash').att('type', 'sha1').txt(h.sha1).up()
    xml.ele('hash').att('type', 'sha256').txt(h.sha256).up()
    if (h.pieceCount > 0 && h.pieceSize > 0) {
      xml.ele('pieces').att('length', String(h.pieceSize)).att('type', h.pieceHash)
      for (const [i, piece] of pieceList(h).entries()) xml.ele('hash').att('piece', String(i)).txt(piece).up()
      xml.up()
    }
    xml.up() // verification
  }
  xml.ele('resources')
  doc.sources.forEach((source, i) => {
    const url = xml.ele('url').att('type', urlType(source.url))
    if (source.location) url.att('location', source.location)
    url
      .att('preference', String(preferenceAt(i)))
      .txt(source.url)
      .up()
  })
  xml.up() // resources
  xml.up() // file
  xml.up() // files
  xml.up() // metalink
  xml.end()
  return out.endsWith('\n') ? out : `${out}\n`
}
