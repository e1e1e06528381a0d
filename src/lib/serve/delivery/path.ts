/**
 * Request-target parsing and path safety for `mb serve` (RFC 9112 §3.2 origin-form,
 * RFC 3986 §2.1 percent-decoding). Pure; never throws.
 *
 * The path is percent-decoded exactly once, then its dot segments are removed as RFC 3986
 * §5.2.4 does (`/./a` → `a`, `/d/../a` → `a`, also when the dots were percent-encoded), as
 * nginx does. A path whose `..` would climb above the root is refused, and so is anything
 * that could confuse a filesystem call: NUL (raw or `%00`), backslashes, malformed percent
 * escapes and invalid UTF-8. Repeated slashes are collapsed. The result is relative to the
 * root, without a leading slash.
 */

/** Longest decoded path accepted, in characters (PATH_MAX is 4096 on Linux). */
const MAX_PATH_LENGTH = 4096

export type ParsedTarget =
  | {
      ok: true
      /** Decoded origin-relative path without leading or trailing slash ('' = the root). */
      path: string
      /** The request path ended with '/' (or was '/'). */
      slash: boolean
      /** The raw query string without '?', or '' when absent. */
      query: string
    }
  | {ok: false; status: 400 | 404 | 414; reason: string}

/**
 * Splits a request target into a safe, decoded path and the raw query.
 * Accepts origin-form (`/a/b?x`) and absolute-form (`http://host/a/b`); anything else is 400.
 */
export function parseTarget(target: string): ParsedTarget {
  let raw = target
  if (raw.charCodeAt(0) !== 47 /* / */) {
    const m = /^https?:\/\/[^/?#]*/i.exec(raw)
    if (!m) return {ok: false, status: 400, reason: 'request target is not a path'}
    raw = raw.slice(m[0].length) || '/'
    if (raw.charCodeAt(0) !== 47) raw = `/${raw}`
  }
  const q = raw.indexOf('?')
  let pathPart = q >= 0 ? raw.slice(0, q) : raw
  const query = q >= 0 ? raw.slice(q + 1) : ''
  const hash = pathPart.indexOf('#')
  if (hash >= 0) pathPart = pathPart.slice(0, hash)
  if (pathPart.length > MAX_PATH_LENGTH * 3) return {ok: false, status: 414, reason: 'path too long'}

  let decoded = pathPart
  if (pathPart.includes('%')) {
    if (/%00/.test(pathPart)) return {ok: false, status: 400, reason: 'encoded NUL in path'}
    try {
      decoded = decodeURIComponent(pathPart)
    } catch {
      return {ok: false, status: 400, reason: 'malformed percent-encoding in path'}
    }
  }
  if (decoded.length > MAX_PATH_LENGTH) return {ok: false, status: 414, reason: 'path too long'}
  if (decoded.includes('\0')) return {ok: false, status: 400, reason: 'NUL in path'}
  if (decoded.includes('\\')) return {ok: false, status: 400, reason: 'backslash in path'}

  const slash = decoded.endsWith('/')
  // Fast path: a plain path without dot segments or doubled slashes.
  if (!decoded.includes('/.') && !decoded.includes('//')) {
    const path = slash ? decoded.slice(1, -1) : decoded.slice(1)
    return {ok: true, path, slash: slash || path === '', query}
  }
  const segments: string[] = []
  let dotLast = false
  for (const segment of decoded.split('/')) {
    dotLast = segment === '.' || segment === '..'
    if (segment === '' || segment === '.') continue
    if (segment === '..') {
      if (segments.length === 0) return {ok: false, status: 400, reason: "'..' climbs above the root"}
      segments.pop()
      continue
    }
    segments.push(segment)
  }
  const path = segments.join('/')
  // A path ending in a dot segment names a directory (RFC 3986 §5.2.4 keeps its slash).
  return {ok: true, path, slash: slash || dotLast || path === '', query}
}

/**
 * Returns the value of query parameter `name` (percent-decoded, RFC 3986 §2.1; the first
 * occurrence), '' when present without a value, undefined when absent, and null when present
 * but not percent-encoded UTF-8 (`%zz`, `%FC`), which callers refuse rather than take for
 * absent. `+` is not a space here.
 */
export function queryParam(query: string, name: string): string | null | undefined {
  if (query.length === 0) return undefined
  for (const part of query.split('&')) {
    const eq = part.indexOf('=')
    const key = eq >= 0 ? part.slice(0, eq) : part
    if (key !== name) continue
    if (eq < 0) return ''
    try {
      return decodeURIComponent(part.slice(eq + 1))
    } catch {
      return null
    }
  }
  return undefined
}

/** True when the query names `flag` as a bare key or key=value (`?mirrorlist`, `?meta4=1`). */
export function hasQueryFlag(query: string, flag: string): boolean {
  if (query.length === 0) return false
  for (const part of query.split('&')) {
    const eq = part.indexOf('=')
    if ((eq >= 0 ? part.slice(0, eq) : part) === flag) return true
  }
  return false
}
