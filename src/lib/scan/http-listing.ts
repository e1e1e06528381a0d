/**
 * Parsers for HTTP directory indexes, as web servers render them:
 *
 * - nginx `autoindex` HTML (`<pre>` lines: link, `dd-Mon-yyyy HH:MM` in UTC, size in bytes or `-`)
 *   and `autoindex_format json` (`[{"name","type","mtime" (RFC 1123),"size"}]`) and `xml`;
 * - Apache mod_autoindex (FancyIndexing `<pre>` or HTMLTable rows; `yyyy-mm-dd HH:MM` or
 *   `dd-Mon-yyyy HH:MM`, human sizes such as `1.2K` from apr_strfsize);
 * - lighttpd mod_dirlisting (table rows; `yyyy-Mon-dd HH:MM:SS`, human sizes such as `0.1K`);
 * - any styled index that still uses plain `<a href>` links, with a date and size near the link.
 *
 * Only links to direct children of the directory are entries: parent links, sort links
 * (`?C=N;O=D`), fragments, other hosts or schemes, and deeper paths are ignored.
 * HTML is tokenised by htmlparser2; dates and sizes are read from the text that follows each
 * link up to the end of its row (`<tr>`, `<li>`, a line inside `<pre>`).
 */
import {Parser} from 'htmlparser2'

/** One child of a directory, as an index shows it. */
export interface IndexEntry {
  /** Decoded name (one path segment). */
  name: string
  type: 'file' | 'dir'
  /** Bytes; 0 with `sizeApproximate` when the index shows no size. */
  size: number
  sizeApproximate?: boolean
  sizeMin?: number
  sizeMax?: number
  /** Unix seconds; the index's time zone is unknown and taken as UTC (nginx HTML/JSON are UTC). */
  mtime?: number
  mtimePrecision?: number
}

const MONTHS: Record<string, number> = {jan: 0, feb: 1, mar: 2, apr: 3, may: 4, jun: 5, jul: 6, aug: 7, sep: 8, oct: 9, nov: 10, dec: 11}

/**
 * Finds a date in index text. Recognises (in order) RFC 1123 (`Fri, 02 Jan 2026 03:04:05 GMT`),
 * ISO/Apache 2.4 (`2026-01-02 03:04[:05]`, `2026-01-02T03:04:05Z`), nginx/Apache 2.2
 * (`02-Jan-2026 03:04`), lighttpd (`2026-Jan-02 03:04:05`), `02 Jan 2026 03:04`, and a bare
 * `2026-01-02` (precision 86400). Times without a zone are taken as UTC.
 *
 * @returns mtime (Unix seconds), precision (1, 60 or 86400 s) and the matched text, or undefined.
 */
export function parseIndexDate(text: string): {mtime: number; precision: number; match: string} | undefined {
  const t = text.replace(/\s+/g, ' ')
  const hms = (h: string, mi: string, s: string | undefined) => ({h: Number(h), mi: Number(mi), s: s === undefined ? 0 : Number(s), precision: s === undefined ? 60 : 1})
  let m = /\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{1,2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT\b/.exec(t)
  if (m && MONTHS[m[2].toLowerCase()] !== undefined) {
    return {mtime: Date.UTC(Number(m[3]), MONTHS[m[2].toLowerCase()], Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6])) / 1000, precision: 1, match: m[0]}
  }
  m = /\b(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?(?:\.\d+)?Z?/.exec(t)
  if (m) {
    const x = hms(m[4], m[5], m[6])
    return {mtime: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), x.h, x.mi, x.s) / 1000, precision: x.precision, match: m[0]}
  }
  m = /\b(\d{1,2})[- ]([A-Za-z]{3})[- ](\d{4}) (\d{2}):(\d{2})(?::(\d{2}))?/.exec(t)
  if (m && MONTHS[m[2].toLowerCase()] !== undefined) {
    const x = hms(m[4], m[5], m[6])
    return {mtime: Date.UTC(Number(m[3]), MONTHS[m[2].toLowerCase()], Number(m[1]), x.h, x.mi, x.s) / 1000, precision: x.precision, match: m[0]}
  }
  m = /\b(\d{4})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2})(?::(\d{2}))?/.exec(t)
  if (m && MONTHS[m[2].toLowerCase()] !== undefined) {
    const x = hms(m[4], m[5], m[6])
    return {mtime: Date.UTC(Number(m[1]), MONTHS[m[2].toLowerCase()], Number(m[3]), x.h, x.mi, x.s) / 1000, precision: x.precision, match: m[0]}
  }
  m = /\b(\d{4})-(\d{2})-(\d{2})\b/.exec(t)
  if (m) return {mtime: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])) / 1000, precision: 86_400, match: m[0]}
  return undefined
}

/** Exact or approximate size read from index text. */
export interface IndexSize {
  size: number
  approximate: boolean
  min: number
  max: number
}

const UNIT_POWER: Record<string, number> = {k: 1, m: 2, g: 3, t: 4, p: 5, e: 6}

/**
 * Reads the first size figure in index text (after the date has been removed).
 *
 * - A plain integer, or one followed by `B`/`bytes` (nginx, Apache below 973 bytes): exact.
 * - A figure with a unit (`1.2K`, `12K`, `3.4 MiB`, `1.2 kB`): approximate. Bare letters and
 *   `KiB`-style units are binary (apr_strfsize, lighttpd); `kB`/`KB`/`MB`-style units may be
 *   decimal or binary, so the range covers both. The range allows for rounding (±0.5 of the
 *   last digit shown, ±0.1 when a decimal is shown), lighttpd's truncation of small sizes
 *   (1..99 bytes shown as 0.1K) and the bits dropped below the unit.
 * - `-` (directories) or no figure: undefined.
 */
export function parseIndexSize(text: string): IndexSize | undefined {
  const re = /(?:^|[\s(])(\d{1,3}(?:,\d{3})+|\d+(?:[.,]\d+)?)\s?((?:[kKMGTPE](?:i?B)?)|B|bytes?)?(?=[\s)]|$)/g
  for (const m of text.matchAll(re)) {
    // "1,204" is a thousands separator; "1,2" (with a unit) a decimal comma.
    const number = /^\d{1,3}(,\d{3})+$/.test(m[1]) ? m[1].replace(/,/g, '') : m[1].replace(',', '.')
    const unit = m[2]
    const value = Number(number)
    if (!Number.isFinite(value)) continue
    if (!unit || /^(B|bytes?)$/.test(unit)) {
      if (number.includes('.')) continue // "1.5" without a unit is not a byte count
      return {size: value, approximate: false, min: value, max: value}
    }
    const power = UNIT_POWER[unit[0].toLowerCase()]
    const binaryOnly = unit.length === 1 || unit.includes('i')
    const decimals = number.includes('.') ? number.split('.')[1].length : 0
    const tol = decimals === 0 ? 0.5 : Math.max(0.1, 10 ** -decimals)
    const range = (base: number) => {
      const u = base ** power
      return {min: Math.max(0, Math.floor((value - tol) * u) - 100), max: Math.ceil((value + tol) * u + u / 1024) + 100}
    }
    const bin = range(1024)
    const dec = binaryOnly ? bin : range(1000)
    return {size: Math.round(value * (binaryOnly ? 1024 : 1000) ** power), approximate: true, min: Math.min(bin.min, dec.min), max: Math.max(bin.max, dec.max)}
  }
  return undefined
}

/** Decodes one percent-encoded path segment; invalid UTF-8 falls back to Latin-1 bytes. */
export function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment)
  } catch {
    const bytes: number[] = []
    for (let i = 0; i < segment.length; i++) {
      if (segment[i] === '%' && /^[0-9a-fA-F]{2}$/.test(segment.slice(i + 1, i + 3))) {
        bytes.push(parseInt(segment.slice(i + 1, i + 3), 16))
        i += 2
      } else {
        for (const b of Buffer.from(segment[i], 'utf8')) bytes.push(b)
      }
    }
    return Buffer.from(bytes).toString('latin1')
  }
}

/** A URL path in one canonical encoding (each segment decoded, then encodeURIComponent), for comparing paths. */
export function canonicalPath(pathname: string): string {
  return pathname
    .split('/')
    .map((s) => encodeURIComponent(decodeSegment(s)))
    .join('/')
}

const SCHEMES = new Set(['http:', 'https:', 'ftp:', 'ftps:', 'mailto:', 'javascript:', 'data:', 'file:', 'rsync:', 'tel:'])

/**
 * Resolves a link of a directory index and returns the child it names, or undefined when the
 * link leaves the directory (parent, query, fragment-only, other origin, deeper path).
 * A relative link such as `a:b.txt` that a URL parser would read as scheme `a:` is taken as
 * the file name it is (servers that forget to escape `:`).
 *
 * @param dirUrl the directory's URL, its path ending in '/'.
 */
export function childFromHref(href: string, dirUrl: URL): {name: string; isDir: boolean} | undefined {
  let h = href.trim()
  if (h === '' || h.startsWith('#') || h.startsWith('?')) return undefined
  const scheme = /^([a-zA-Z][a-zA-Z0-9+.-]*:)/.exec(h)
  if (scheme && !SCHEMES.has(scheme[1].toLowerCase())) h = './' + h
  let url: URL
  try {
    url = new URL(h, dirUrl)
  } catch {
    return undefined
  }
  if (url.origin !== dirUrl.origin || url.search !== '') return undefined
  const dirPath = canonicalPath(dirUrl.pathname)
  const path = canonicalPath(url.pathname)
  if (!path.startsWith(dirPath)) return undefined
  let rest = path.slice(dirPath.length)
  const isDir = rest.endsWith('/')
  if (isDir) rest = rest.slice(0, -1)
  if (rest === '' || rest.includes('/')) return undefined
  const name = decodeSegment(rest)
  if (name === '.' || name === '..' || name === '' || name.includes('/')) return undefined
  return {name, isDir}
}

/** Elements that end an index row: the text after a link is read up to one of these. */
const ROW_END = new Set(['tr', 'li', 'dt', 'table', 'tbody', 'ul', 'ol', 'pre', 'hr', 'body', 'html', 'dl'])

/**
 * A streaming HTML index parser: feed chunks with `write()`, call `end()` for the entries.
 * Entries are deduplicated by name (an icon link and a name link to the same file merge).
 */
export class HtmlIndexParser {
  private readonly dirUrl: URL
  private readonly parser: Parser
  private readonly rows: {href: string; after: string}[] = []
  private current: {href: string; after: string} | undefined
  private inAnchor = false
  private preDepth = 0
  private closedDocument = false

  constructor(dirUrl: URL) {
    this.dirUrl = dirUrl
    this.parser = new Parser(
      {
        onopentag: (name, attrs) => {
          if (name === 'a') {
            this.inAnchor = true
            this.current = attrs.href === undefined ? undefined : {href: attrs.href, after: ''}
            if (this.current) this.rows.push(this.current)
            return
          }
          if (name === 'pre') this.preDepth++
          if (ROW_END.has(name)) this.current = undefined
          else if (this.current && !this.inAnchor) this.current.after += ' '
        },
        onclosetag: (name, isImplied) => {
          if (!isImplied && (name === 'html' || name === 'body')) this.closedDocument = true
          if (name === 'a') {
            this.inAnchor = false
            return
          }
          if (name === 'pre') this.preDepth = Math.max(0, this.preDepth - 1)
          if (ROW_END.has(name)) this.current = undefined
          else if (this.current && !this.inAnchor) this.current.after += ' '
        },
        ontext: (text) => {
          if (this.inAnchor || !this.current) return
          if (this.preDepth > 0) {
            const nl = text.indexOf('\n')
            if (nl >= 0) {
              this.current.after += text.slice(0, nl)
              this.current = undefined
              return
            }
          }
          if (this.current.after.length < 2000) this.current.after += text
        },
      },
      {decodeEntities: true, lowerCaseTags: true},
    )
  }

  write(chunk: string): void {
    this.parser.write(chunk)
  }

  /**
   * True once an explicit `</body>` or `</html>` tag was read: every index page nginx,
   * Apache and lighttpd write ends with both, so a page without them was cut short.
   */
  get complete(): boolean {
    return this.closedDocument
  }

  /** Finishes parsing; returns the directory's children in document order. */
  end(): IndexEntry[] {
    this.parser.end()
    const byName = new Map<string, {isDir: boolean; after: string}>()
    for (const row of this.rows) {
      const child = childFromHref(row.href, this.dirUrl)
      if (!child) continue
      const seen = byName.get(child.name)
      if (seen) seen.after += ' ' + row.after
      else byName.set(child.name, {isDir: child.isDir, after: row.after})
    }
    const out: IndexEntry[] = []
    for (const [name, {isDir, after}] of byName) {
      const entry: IndexEntry = {name, type: isDir ? 'dir' : 'file', size: 0}
      let rest = after
      const date = parseIndexDate(after)
      if (date) {
        entry.mtime = date.mtime
        entry.mtimePrecision = date.precision
        rest = after.replace(/\s+/g, ' ').replace(date.match, ' ')
      }
      if (!isDir) {
        const size = parseIndexSize(rest)
        if (size && !size.approximate) entry.size = size.size
        else if (size) Object.assign(entry, {size: size.size, sizeApproximate: true, sizeMin: size.min, sizeMax: size.max})
        else Object.assign(entry, {sizeApproximate: true, sizeMin: 0, sizeMax: Number.MAX_SAFE_INTEGER})
      }
      out.push(entry)
    }
    return out
  }
}

/** Parses a whole HTML index (see {@link HtmlIndexParser}). */
export function parseHtmlIndex(html: string, dirUrl: URL): IndexEntry[] {
  const p = new HtmlIndexParser(dirUrl)
  p.write(html)
  return p.end()
}

/**
 * Parses nginx `autoindex_format json`: an array of `{name, type: "directory"|"file"|"other",
 * mtime: RFC 1123 GMT, size?: bytes}`. Entries of type "other" are skipped. Throws an Error
 * when the text is not such an array.
 */
export function parseJsonIndex(text: string): IndexEntry[] {
  const data: unknown = JSON.parse(text)
  if (!Array.isArray(data)) throw new Error('JSON directory index is not an array')
  const out: IndexEntry[] = []
  for (const item of data as Record<string, unknown>[]) {
    if (!item || typeof item.name !== 'string' || item.name === '' || item.name.includes('/')) continue
    if (item.type !== 'directory' && item.type !== 'file') continue
    const entry: IndexEntry = {name: item.name, type: item.type === 'directory' ? 'dir' : 'file', size: 0}
    if (entry.type === 'file') {
      if (typeof item.size === 'number' && Number.isFinite(item.size)) entry.size = item.size
      else Object.assign(entry, {sizeApproximate: true, sizeMin: 0, sizeMax: Number.MAX_SAFE_INTEGER})
    }
    if (typeof item.mtime === 'string') {
      const date = parseIndexDate(item.mtime)
      if (date) {
        entry.mtime = date.mtime
        entry.mtimePrecision = date.precision
      }
    }
    out.push(entry)
  }
  return out
}

/**
 * Parses nginx `autoindex_format xml`: `<list><directory mtime="ISO">name</directory>
 * <file mtime="ISO" size="bytes">name</file></list>`.
 */
export function parseXmlIndex(text: string): IndexEntry[] {
  const out: IndexEntry[] = []
  let current: {type: 'file' | 'dir'; attrs: Record<string, string>; name: string} | undefined
  const parser = new Parser(
    {
      onopentag(name, attrs) {
        if (name === 'file' || name === 'directory') current = {type: name === 'file' ? 'file' : 'dir', attrs, name: ''}
      },
      ontext(t) {
        if (current) current.name += t
      },
      onclosetag(name) {
        if (!current || (name !== 'file' && name !== 'directory')) return
        const n = current.name
        if (n !== '' && !n.includes('/')) {
          const entry: IndexEntry = {name: n, type: current.type, size: 0}
          const size = Number(current.attrs.size)
          if (current.type === 'file') {
            if (current.attrs.size !== undefined && Number.isFinite(size)) entry.size = size
            else Object.assign(entry, {sizeApproximate: true, sizeMin: 0, sizeMax: Number.MAX_SAFE_INTEGER})
          }
          const date = current.attrs.mtime ? parseIndexDate(current.attrs.mtime) : undefined
          if (date) Object.assign(entry, {mtime: date.mtime, mtimePrecision: date.precision})
          out.push(entry)
        }
        current = undefined
      },
    },
    {xmlMode: true, decodeEntities: true},
  )
  parser.write(text)
  parser.end()
  return out
}
