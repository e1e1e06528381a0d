/**
 * URLs of files on mirrors: base URL + percent-encoded origin-relative path
 * (RFC 3986 §2.1 and §3.3: every path segment is encoded on its own, `/` separates them).
 */
import {MbError} from '../errors.js'
import {wellFormed} from '../text.js'
import type {SelectMirror} from './types.js'

/**
 * Characters a path segment may carry literally (RFC 3986 §3.3 `pchar`: unreserved,
 * sub-delims `!$&'()*+,;=`, `:` and `@`) plus `/`, the separator.
 */
const SAFE_PATH = /^[A-Za-z0-9._~!$&'()*+,;=:@/-]*$/

/** The escapes `encodeURIComponent` writes for `pchar`s that may stay literal (RFC 3986 §3.3). */
const LITERAL_PCHAR_ESCAPES = /%(?:24|26|2B|2C|3B|3D|3A|40)/g

/**
 * Percent-encodes an origin-relative path (no leading `/`) segment by segment, UTF-8 for
 * non-ASCII, the one encoding every URL mb writes uses (Location, Link, metalinks, mirror
 * lists, directory redirects, autoindex links). Every `pchar` of RFC 3986 §3.3 stays literal
 * (`A-Z a-z 0-9 - . _ ~ ! $ & ' ( ) * + , ; = : @`), so `openSUSE:Backports` is written as
 * such; everything else is encoded: `%`, space, `?`, `#`, `[`, `]`, `"`, `<`, `>`, `\`,
 * `^`, `` ` ``, `{`, `|`, `}`, controls and non-ASCII. `/` is kept as the separator. A lone
 * UTF-16 surrogate becomes U+FFFD.
 *
 * A relative reference whose first segment holds `:` reads as a scheme (RFC 3986 §4.2):
 * callers writing relative links use {@link relativeReference}.
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
    // encodeURIComponent also encodes `$&+,;=:@`, which a path segment may carry literally.
    segments[i] = encoded.replace(LITERAL_PCHAR_ESCAPES, (pct) => String.fromCharCode(Number.parseInt(pct.slice(1), 16)))
  }
  return segments.join('/')
}

/**
 * `encodePath(path)` as a relative reference (RFC 3986 §4.2): prefixed with `./` when its
 * first segment holds a `:`, which would otherwise read as a scheme (`a:b` → `./a:b`).
 */
export function relativeReference(path: string): string {
  const encoded = encodePath(path)
  const colon = encoded.indexOf(':')
  if (colon < 0) return encoded
  const slash = encoded.indexOf('/')
  return slash >= 0 && slash < colon ? encoded : `./${encoded}`
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
 * `mirror`'s public base URL for URL scheme `protocol` (`https`, `http`, `ftp`, `rsync`,
 * ending in `/`), or null when it has none for it (an FTP or rsync URL with credentials is a
 * scan address and counts as none, see `SelectMirror.ftpUrl`).
 */
export function publicBase(mirror: SelectMirror, protocol: string): string | null {
  switch (protocol) {
    case 'https':
      return mirror.httpsUrl
    case 'http':
      return mirror.httpUrl
    case 'ftp':
      return mirror.ftpUrl
    case 'rsync':
      return mirror.rsyncUrl
    default:
      return null
  }
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
  return mirrorUrlOn(mirror, base, path)
}

/**
 * The full URL of origin path `path` under `base`, one of `mirror`'s base URLs (any scheme,
 * ending in `/`), with the mirror's subtree applied as {@link mirrorUrl} does, signed when
 * the mirror signs its URLs (../sign.ts).
 *
 * @throws MbError when the path lies outside the mirror's subtree
 */
export function mirrorUrlOn(mirror: SelectMirror, base: string, path: string): string {
  let relative = path.startsWith('/') ? path.slice(1) : path
  if (mirror.basePath) {
    if (!relative.startsWith(mirror.basePath)) throw new MbError(`${path} lies outside the subtree ${mirror.basePath} that mirror ${mirror.identifier} carries.`, {code: 'NOT_IN_SUBTREE'})
    relative = relative.slice(mirror.basePath.length)
  }
  const url = base + encodePath(relative)
  return mirror.sign ? mirror.sign(url) : url
}
