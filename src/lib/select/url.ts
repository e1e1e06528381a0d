/**
 * URLs of files on mirrors: base URL + percent-encoded origin-relative path
 * (RFC 3986 §2.1 and §3.3: every path segment is encoded on its own, `/` separates them).
 */
import {MbError} from '../errors.js'
import {wellFormed} from '../text.js'
import type {SelectMirror} from './types.js'

/** Characters that never need encoding in a path segment (RFC 3986 unreserved) plus `/`. */
const SAFE_PATH = /^[A-Za-z0-9._~/-]*$/

/**
 * Percent-encodes an origin-relative path (no leading `/`) segment by segment, UTF-8 for
 * non-ASCII. Spaces, `#`, `?`, `%`, `+`, `:` and every other reserved character are encoded;
 * `/` is kept as the separator. A lone UTF-16 surrogate becomes U+FFFD.
 */
export function encodePath(path: string): string {
  if (SAFE_PATH.test(path)) return path
  const segments = path.split('/')
  for (let i = 0; i < segments.length; i++) {
    const segment = segments[i]
    if (SAFE_PATH.test(segment)) continue
    let encoded: string
    try {
      encoded = encodeURIComponent(segment)
    } catch {
      encoded = encodeURIComponent(wellFormed(segment))
    }
    // encodeURIComponent leaves RFC 3986 sub-delims ! ' ( ) * alone; encode them too, so
    // that no proxy or shell rewrites them.
    segments[i] = encoded.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  }
  return segments.join('/')
}

/**
 * The base URL a client should be sent to: `https_url` for HTTPS clients; for HTTP clients
 * `http_url`, else `https_url` (the redirect keeps the client's scheme where the mirror
 * offers it). Null when the mirror offers no suitable URL.
 */
export function mirrorBase(mirror: SelectMirror, https: boolean): string | null {
  return https ? mirror.httpsUrl : (mirror.httpUrl ?? mirror.httpsUrl)
}

/**
 * The full URL of origin path `path` (relative, no leading `/`, not encoded) on `mirror`.
 * A mirror carrying a subtree (`basePath` such as `distribution/`) gets the path below it.
 * For an HTTPS client without an https_url, the http_url is used (callers that must not
 * downgrade check `mirror.httpsUrl` first; `select()` does).
 *
 * @throws MbError when the mirror has no HTTP(S) URL, or the path lies outside its subtree
 */
export function mirrorUrl(mirror: SelectMirror, path: string, https: boolean): string {
  const base = mirrorBase(mirror, https) ?? mirror.httpUrl
  if (!base) throw new MbError(`Mirror ${mirror.identifier} has no HTTP or HTTPS URL; add one with \`mb mirror edit ${mirror.identifier} --http-url URL\`.`, {code: 'NO_URL'})
  let relative = path.startsWith('/') ? path.slice(1) : path
  if (mirror.basePath) {
    if (!relative.startsWith(mirror.basePath)) throw new MbError(`${path} lies outside the subtree ${mirror.basePath} that mirror ${mirror.identifier} carries.`, {code: 'NOT_IN_SUBTREE'})
    relative = relative.slice(mirror.basePath.length)
  }
  return base + encodePath(relative)
}
