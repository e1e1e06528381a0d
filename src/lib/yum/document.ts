/**
 * The answers dnf and yum read, in MirrorManager's shapes (mirrormanager2's mirrorlist
 * server, `metalink_header`/`do_metalink` in adrianreber/mirrorlist-server, which
 * fedora-infra runs): a Metalink 3.0 document for a repository's `repodata/repomd.xml` with
 * the `mm0` namespace, the plain-text mirror list, and the error answers.
 *
 * The metalink, element by element in MirrorManager's order and indentation:
 * ```xml
 * <?xml version="1.0" encoding="utf-8"?>
 * <metalink version="3.0" xmlns="http://www.metalinker.org/" type="dynamic" pubdate="Wed, 02 Dec 2026 01:00:00 GMT" generator="mb/0.1.0" xmlns:mm0="http://fedorahosted.org/mirrormanager">
 *  <files>
 *   <file name="repomd.xml">
 *    <mm0:timestamp>1796176843</mm0:timestamp>
 *    <size>3041</size>
 *    <verification>
 *     <hash type="md5">…</hash> <hash type="sha1">…</hash> <hash type="sha256">…</hash> <hash type="sha512">…</hash>
 *    </verification>
 *    <mm0:alternates>
 *     <mm0:alternate>
 *      <mm0:timestamp>…</mm0:timestamp> <size>…</size> <verification>…</verification>
 *     </mm0:alternate>
 *    </mm0:alternates>
 *    <resources maxconnections="1">
 *     <url protocol="https" type="https" location="DE" preference="100">https://…/repodata/repomd.xml</url>
 *     <url protocol="http" type="http" location="DE" preference="100" mm0:private="True">http://…</url>
 *    </resources>
 *   </file>
 *  </files>
 * </metalink>
 * ```
 * `preference` is 100 for the first mirror and one less for each next one (never below 1);
 * all URLs of one mirror share it. `protocol=` repeats `type=` because yum 3.2.20 read it.
 */
import type {RepomdVersion} from '../origin/repomd.js'
import {xmlAttribute, xmlEscape} from '../metalink/meta4.js'

export const METALINK_MEDIA_TYPE = 'application/metalink+xml'
const METALINK_NAMESPACE = 'http://www.metalinker.org/'
const MM0_NAMESPACE = 'http://fedorahosted.org/mirrormanager'

/** One download source of the repository: a mirror (or the origin) with its URLs. */
export interface RepoSource {
  /**
   * URLs of the file (metalink) or directory (mirror list), preferred first: https and http
   * by default, ftp and rsync too when `protocol=` asks for them; a mirror list writes each.
   */
  urls: string[]
  /** ISO 3166-1 alpha-2, upper case; '' when unknown (the origin: no `location` then). */
  location: string
  /** MirrorManager's `mm0:private`: the mirror serves only some clients (prefix- or AS-only). */
  private: boolean
}

/** The protocols `protocol=` may name, in the order a mirror's URLs are listed (MirrorManager's host category URL schemes). */
export const REPO_PROTOCOLS = ['https', 'http', 'ftp', 'rsync'] as const

/**
 * The protocols a `/metalink` or `/mirrorlist` request asks for with `protocol=`: values
 * separated by commas, as MirrorManager reads them (`protocol=https,http`), and also repeated
 * parameters (`protocol=https&protocol=http`); lower-cased, each once. Empty values and
 * values that are not a URL scheme (RFC 3986 §3.1: a letter, then letters, digits, `+`, `-`,
 * `.`) are dropped, so that a newline or a URL in the query never reaches the list's header
 * line, where dnf would read it as a mirror. Undefined when no value is left.
 */
export function requestedProtocols(params: URLSearchParams): string[] | undefined {
  const protocols = new Set<string>()
  for (const value of params.getAll('protocol')) {
    for (const part of value.split(',')) {
      const protocol = part.trim().toLowerCase()
      if (URI_SCHEME.test(protocol)) protocols.add(protocol)
    }
  }
  return protocols.size > 0 ? [...protocols] : undefined
}

/** A URL scheme (RFC 3986 §3.1), at most 32 characters. */
const URI_SCHEME = /^[a-z][a-z0-9+.-]{0,31}$/

/** What `repo=` and `arch=` may hold: MirrorManager's names (`fedora-42`, `epel-source-9`, `x86_64`), 1..128 characters. */
const REPO_NAME = /^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$/

/**
 * Whether `repo=` and `arch=` are names that may be echoed in a list's header line (see
 * {@link REPO_NAME}); a request with another value (a newline, a URL, a space) is refused
 * with {@link BAD_REPO_NAME}, since its header would let the query write a line dnf reads.
 */
export function isRepoName(value: string): boolean {
  return REPO_NAME.test(value)
}

/** The 400 answer to a `repo=` or `arch=` that is not a name. */
export const BAD_REPO_NAME = "error: invalid repo or arch: repo= and arch= take names of letters, digits, '.', '_', '+' and '-'\n"

/**
 * MirrorManager's protocol filter (`trim_to_preferred_protocols` in mirrorlist-server): each
 * source keeps only its URLs whose scheme is one of `protocols`, and a source left with none
 * is dropped. When no source keeps any URL, `sources` comes back unchanged, as MirrorManager
 * answers a protocol no mirror offers: the client still gets mirrors rather than nothing.
 */
export function trimToProtocols(sources: readonly RepoSource[], protocols: readonly string[]): readonly RepoSource[] {
  const trimmed: RepoSource[] = []
  for (const source of sources) {
    const urls = source.urls.filter((url) => protocols.includes(scheme(url)))
    if (urls.length > 0) trimmed.push({...source, urls})
  }
  return trimmed.length > 0 ? trimmed : sources
}

/** `pubdate` in RFC 822 form, as MirrorManager writes it (`%a, %d %b %Y %H:%M:%S GMT`). */
function pubdate(now: Date): string {
  return now.toUTCString()
}

function header(generator: string, now: Date): string {
  return `<?xml version="1.0" encoding="utf-8"?>\n<metalink version="3.0" xmlns="${METALINK_NAMESPACE}" type="dynamic" pubdate="${pubdate(now)}" generator="${xmlEscape(generator)}" xmlns:mm0="${MM0_NAMESPACE}">\n`
}

/**
 * MirrorManager's failure document: the header, `message` in a comment, and the end tag.
 * `--` in the message is broken up so the comment stays well-formed.
 */
export function metalinkFailure(message: string, generator: string, now = new Date()): string {
  return `${header(generator, now)}<!-- ${message.replaceAll('--', '- -')}\n-->\n</metalink>\n`
}

function details(v: RepomdVersion, indent: string): string {
  return (
    `${indent} <mm0:timestamp>${v.timestamp}</mm0:timestamp>\n` +
    `${indent} <size>${v.size}</size>\n` +
    `${indent} <verification>\n` +
    `${indent}  <hash type="md5">${v.md5}</hash>\n` +
    `${indent}  <hash type="sha1">${v.sha1}</hash>\n` +
    `${indent}  <hash type="sha256">${v.sha256}</hash>\n` +
    `${indent}  <hash type="sha512">${v.sha512}</hash>\n` +
    `${indent} </verification>\n`
  )
}

function scheme(url: string): string {
  const colon = url.indexOf(':')
  return colon > 0 ? url.slice(0, colon).toLowerCase() : 'http'
}

/**
 * The metalink of one repomd.xml: its current version, the `alternates` (newest first), and
 * the `sources` in preference order (their URLs of the {@link REPO_PROTOCOLS} are written).
 */
export function renderRepoMetalink(options: {name: string; current: RepomdVersion; alternates: readonly RepomdVersion[]; sources: readonly RepoSource[]; generator: string; now?: Date}): string {
  let doc = `${header(options.generator, options.now ?? new Date())} <files>\n  <file name="${xmlAttribute(options.name)}">\n`
  doc += details(options.current, '  ')
  if (options.alternates.length > 0) {
    doc += '   <mm0:alternates>\n'
    for (const alternate of options.alternates) doc += `    <mm0:alternate>\n${details(alternate, '     ')}    </mm0:alternate>\n`
    doc += '   </mm0:alternates>\n'
  }
  doc += '   <resources maxconnections="1">\n'
  let preference = 100
  for (const source of options.sources) {
    const privateAttribute = source.private ? ' mm0:private="True"' : ''
    for (const url of source.urls) {
      const protocol = scheme(url)
      if (!(REPO_PROTOCOLS as readonly string[]).includes(protocol)) continue
      const location = source.location ? ` location="${xmlEscape(source.location)}"` : ''
      doc += `    <url protocol="${protocol}" type="${protocol}"${location} preference="${preference}"${privateAttribute}>${xmlEscape(url)}</url>\n`
    }
    preference = Math.max(preference - 1, 1)
  }
  return `${doc}   </resources>\n  </file>\n </files>\n</metalink>\n`
}

/**
 * `text` with its control characters (C0 and DEL: newline, carriage return, …) percent-encoded,
 * so that a value from the request or the tree (a path with a newline) stays on its line of a
 * list dnf reads line by line.
 */
export function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters are what it replaces
  return text.replace(/[\x00-\x1f\x7f]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`)
}

/**
 * MirrorManager's plain-text mirror list: the `header` line (`# repo = R arch = A `), then
 * every URL of each source, one per line (one per mirror unless `protocol=` asked for more).
 */
export function renderRepoMirrorList(headerLine: string, sources: readonly RepoSource[]): string {
  let text = `${oneLine(headerLine)}\n`
  for (const source of sources) for (const url of source.urls) text += `${url}\n`
  return text
}

/**
 * MirrorManager's answer to an unknown (repo, arch): the request's header line, `error:
 * invalid repo or arch`, and every configured pair, sorted, as `# repo=R&arch=A` lines.
 */
export function unknownRepoMessage(headerLine: string, pairs: ReadonlyArray<readonly [string, string]>): string {
  let text = `${oneLine(headerLine)}error: invalid repo or arch\n# following repositories are available:\n`
  for (const [repo, arch] of [...pairs].sort((a, b) => (`${a[0]}+${a[1]}` < `${b[0]}+${b[1]}` ? -1 : 1))) text += `# repo=${repo}&arch=${arch}\n`
  return text
}
