/**
 * Small string helpers for paths, URLs and lists, shared by every module that needs them.
 */

/** The path without leading and trailing slashes (`/pub/iso/` → `pub/iso`). */
export function trimSlashes(path: string): string {
  return path.replace(/^\/+|\/+$/g, '')
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
