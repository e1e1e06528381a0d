/**
 * Small string helpers for paths, URLs and lists, shared by every module that needs them.
 */

/** The path without leading and trailing slashes (`/pub/iso/` → `pub/iso`). */
export function trimSlashes(path: string): string {
  return path.replace(/^\/+|\/+$/g, '')
}

/** Bytes a folder of the tree named by a client or an operator may have at most. */
const MAX_FOLDER_BYTES = 1024

/**
 * What keeps `value` from naming a folder of the tree (`/mirrors?path=`,
 * `/mirrors/NAME?folder=`, `mb mirror show --folder`), as the end of a sentence naming the
 * parameter; undefined when it may name one. Leading and trailing slashes are ignored.
 */
export function folderProblem(value: string): string | undefined {
  if (Buffer.byteLength(value) > MAX_FOLDER_BYTES) return `is longer than ${MAX_FOLDER_BYTES} bytes`
  if (/[\0\\]/.test(value)) return 'must not contain NUL or backslashes'
  const trimmed = trimSlashes(value)
  if (trimmed !== '' && trimmed.split('/').some((s) => s === '' || s === '.' || s === '..')) return 'must be a directory of the tree, without empty, "." or ".." segments'
  return undefined
}

/** The path without leading slashes (`/pub/a.iso` → `pub/a.iso`), relative to a root. */
export function trimLeadingSlashes(path: string): string {
  return path.replace(/^\/+/, '')
}

/** The URL or path ending in `/`: `text` when it already does, else `text + '/'`. */
export function withTrailingSlash(text: string): string {
  return text.endsWith('/') ? text : `${text}/`
}

/** The items of a comma-separated list, trimmed, without empty ones (`'a, b,,c'` → `['a', 'b', 'c']`). */
export function splitList(text: string): string[] {
  return text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '')
}

const NOT_HEADER_SAFE = /[^\x20-\x7e]/

/**
 * `value` as a safe HTTP header value (RFC 9110 §5.5 field-value, ASCII only): returned as is
 * when it is printable ASCII, else every other character (controls, DEL, anything beyond
 * ASCII, a lone surrogate as U+FFFD) is percent-encoded as its UTF-8 bytes. Node's
 * `writeHead` throws ERR_INVALID_CHAR for some of those; the rest are read differently by
 * different clients. Cheap for the common (clean) value: one regex test.
 */
export function headerSafe(value: string): string {
  if (!NOT_HEADER_SAFE.test(value)) return value
  let out = ''
  for (const char of wellFormed(value)) out += NOT_HEADER_SAFE.test(char) ? encodeURIComponent(char) : char
  return out
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g

/**
 * `text` with every lone surrogate (a UTF-16 half with no UTF-8 form, which makes
 * `encodeURIComponent` throw) replaced by U+FFFD, as `String.prototype.toWellFormed` does.
 */
export function wellFormed(text: string): string {
  return text.replace(LONE_SURROGATE, '\uFFFD')
}

// An RFC 3986 §3.2.2 host (a DNS-like reg-name, an IPv4 address or a bracketed IPv6
// literal) with an optional port: the only Host header values mb writes back.
const HOST_HEADER = /^(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})?|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?$/

/** True when `host` (a request's `Host` header) is a plain `host[:port]` that is safe to put in a URL and a header. */
export function isPlainHost(host: string): boolean {
  return HOST_HEADER.test(host)
}

/** The folder of an origin path, without trailing slash ('' for a file at the top of the tree). */
export function folderOf(path: string): string {
  const slash = path.lastIndexOf('/')
  return slash < 0 ? '' : path.slice(0, slash)
}
