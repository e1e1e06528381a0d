/**
 * Hash files and Metalink/HTTP header values.
 *
 * - Hash files (`PATH.sha256`, `.sha1`, `.md5`): the coreutils `sha256sum` line format,
 *   `"<hex>  <name>\n"` (two spaces: text mode), so `sha256sum -c` accepts them.
 * - `Digest` (RFC 3230 §4.3.2, algorithms from the IANA "HTTP Digest Algorithm Values"
 *   registry: `SHA-256` (RFC 5843), `MD5`, `SHA` = SHA-1), values base64 of the raw digest.
 * - `Link: <…/PATH.meta4>; rel=describedby; type="application/metalink4+xml"` (RFC 6249 §6).
 */
import type {DocumentHashes} from './document.js'
import {META4_MEDIA_TYPE} from './meta4.js'

/** Hash file kinds by their extension. */
export type HashKind = 'sha256' | 'sha1' | 'md5'

const HASH_LINE_ESCAPES: Record<string, string> = {'\\': '\\\\', '\n': '\\n', '\r': '\\r'}

/**
 * The body of a hash file: `"<hex>  <name>\n"` where `name` is the file's basename (so the
 * file checks with `sha256sum -c` in the directory it was downloaded to). A name with a
 * backslash, LF or CR is written as coreutils 9 writes it: the line starts with a backslash
 * and those characters are escaped as `\\`, `\n` and `\r`, so that the name stays on its line.
 */
export function hashFileBody(hashes: DocumentHashes, kind: HashKind, name: string): string {
  if (!/[\\\n\r]/.test(name)) return `${hashes[kind]}  ${name}\n`
  return `\\${hashes[kind]}  ${name.replace(/[\\\n\r]/g, (c) => HASH_LINE_ESCAPES[c])}\n`
}

function hexToBase64(hex: string): string {
  return Buffer.from(hex, 'hex').toString('base64')
}

/**
 * The RFC 3230 `Digest` header value, e.g. `SHA-256=<b64>, MD5=<b64>, SHA=<b64>`.
 * Only call it with fresh hashes.
 */
export function digestHeader(hashes: Pick<DocumentHashes, 'md5' | 'sha1' | 'sha256'>): string {
  return `SHA-256=${hexToBase64(hashes.sha256)}, MD5=${hexToBase64(hashes.md5)}, SHA=${hexToBase64(hashes.sha1)}`
}

/**
 * The RFC 6249 `Link` value pointing at the file's Metalink 4 description. Sent as a header
 * line of its own beside the `rel=duplicate` ones: aria2c 1.36 reads only the first link of
 * a header line.
 */
export function describedByLink(meta4Url: string): string {
  return `<${meta4Url}>; rel=describedby; type="${META4_MEDIA_TYPE}"`
}
