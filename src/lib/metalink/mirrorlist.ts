/**
 * The public mirror list of one file (MirrorBrain's `?mirrorlist`): the file's size, mtime
 * and hashes, links to its metalinks and hash files, the mirrors this client could be sent
 * to grouped by realm, and the outdated copies on mirrors it could be sent to once updated.
 *
 * What a client may see is decided by the selection itself (src/lib/select), never by rules
 * of its own here: a mirror appears only when `select()` ranks it for this client. A
 * disabled, down, `prefix_only`, client-network-limited or country-excluded mirror the
 * client cannot use is not listed at all, not even as passed over. The fields are an
 * explicit allow-list (identifier, country, continent, the public HTTP(S) URL without user
 * info, realm, rank, distance); prefixes, client networks, AS, scores, rsync/FTP URLs,
 * credentials, admin names and e-mail addresses and comments are never copied, and the
 * origin's reason is given in public words, without the operator's settings. The admin view
 * with every mirror and reason is `mb file lookup` and `mb mirror list`.
 */
import type {Candidate, ClientInfo, Exclusion, OriginReason, Realm, SelectFile, Selection} from '../select/types.js'
import {encodePath, mirrorBase} from '../select/url.js'
import type {MetalinkDocument} from './document.js'
import {unixIso} from '../time.js'
import {stripUserinfo} from '../redact.js'

export interface MirrorListMirror {
  identifier: string
  country: string | null
  continent: string | null
  /** The file's URL on this mirror (absent for an outdated copy without one). */
  url: string | null
  realm?: Realm
  rank?: number
  distance_km?: number
  /** For outdated copies: `stale`, and how the copy differs (`stale: 60000 bytes, origin 65536`). */
  reason?: 'stale'
  detail?: string
}

export interface MirrorList {
  path: string
  name: string
  size: number
  /** RFC 3339 UTC. */
  mtime: string
  hashes: {md5: string; sha1: string; sha256: string; piece_size: number; piece_hash: string; pieces: number} | null
  /** Every representation of the file; null where the file has no current data for it. */
  links: {
    file: string
    meta4: string
    metalink: string
    sha256: string | null
    sha1: string | null
    md5: string | null
    torrent: string | null
    magnet: string | null
    btih: string | null
    zsync: string | null
  }
  /** The requesting client as GeoIP (or an honoured `?country=`) sees it: its own data. */
  client: {ip: string; country: string | null; continent: string | null; asn: number | null}
  /** The winning pool, or null when the origin serves the file. */
  realm: Realm | null
  /** How the mirrors were ranked: `geo` (nearest pools first) or `score` (by score alone, whatever the distance). */
  ranking: 'geo' | 'score'
  /** Why the origin serves it, when it does, in public words ({@link PUBLIC_ORIGIN}). */
  origin: {reason: OriginReason; detail: string} | null
  /** The redirect rule that applies to this client and file (docs/selection.md "Redirect rules"), or null: its name, its target, and the URL a `url` rule sends the download to. */
  rule: {name: string; target: 'url' | 'mirrors' | 'origin'; url: string | null} | null
  /** The mirrors this client could be sent to, by realm, in ranked order within each. */
  realms: Array<{realm: Realm; mirrors: MirrorListMirror[]}>
  /** Outdated copies on mirrors this client could be sent to once they hold this version. */
  outdated: MirrorListMirror[]
}

/** Why the origin delivers a file, as the public may read it (the selection's detail names settings). */
const PUBLIC_ORIGIN: Record<OriginReason, string> = {
  small_file: 'small files are delivered by the origin itself',
  origin_only: 'this file is delivered by the origin only',
  excluded_agent: 'downloads by your client software are delivered by the origin',
  excluded_client: 'downloads from your network are delivered by the origin',
  excluded_mime: 'files of this type are delivered by the origin',
  directory: 'a directory',
  no_mirror: 'no mirror holds this version for you at the moment',
  rule: 'for your location this file is delivered by the origin',
  not_indexed: 'this file is new on the origin and is delivered by the origin until the mirrors hold it',
  index_stale: 'this file changed on the origin and is delivered by the origin until the mirrors hold the new version',
}

/** The public words for why the origin serves the file: an IPv6 client whose mirrors lack IPv6 is told so. */
function publicOrigin(selection: Selection): string {
  const reason = selection.origin!.reason
  if (reason === 'no_mirror' && selection.excluded.some((e) => e.reason === 'no_ipv6')) return 'no mirror that holds this version serves IPv6 clients; over IPv4 one would'
  return PUBLIC_ORIGIN[reason]
}

function fromCandidate(c: Candidate): MirrorListMirror {
  const m = c.mirror
  return {
    identifier: m.identifier,
    country: m.country,
    continent: m.continent,
    url: stripUserinfo(c.url),
    realm: c.realm,
    rank: c.rank,
    distance_km: c.distanceKm === undefined ? undefined : Math.round(c.distanceKm),
  }
}

function fromStale(e: Exclusion, path: string, https: boolean): MirrorListMirror {
  const m = e.mirror
  const base = mirrorBase(m, https) ?? m.httpUrl ?? m.httpsUrl
  let url: string | null = null
  if (base && (!m.basePath || path.startsWith(m.basePath))) url = stripUserinfo(base + encodePath(m.basePath ? path.slice(m.basePath.length) : path))
  return {identifier: m.identifier, country: m.country, continent: m.continent, url, reason: 'stale', detail: e.detail}
}

/**
 * The stale copies of an explained `selection` (reason `stale`) that are on mirrors this
 * client could be sent to: `reselect` (the same `select()` for the same client) is asked
 * again with those mirrors counted as holders, and only the ones it then ranks are kept,
 * so that every other rule (disabled, down, client networks, pool flags, distance, …) is
 * the selection's own.
 * @param file      the origin file the selection was made for (size bytes, mtime Unix seconds)
 * @param selection an explained selection (`excluded` filled) of `file`
 * @param reselect  selects for the same client and mirrors; called at most once
 * @returns the kept exclusions, in `selection.excluded` order
 */
export function outdatedCopies(file: SelectFile, selection: Selection, reselect: (file: SelectFile) => Selection): Exclusion[] {
  const stale = selection.excluded.filter((e) => e.reason === 'stale')
  if (stale.length === 0) return []
  const holders = Array.from(file.mirrors)
  for (const e of stale) holders.push(e.mirror.id)
  const again = reselect({path: file.path, size: file.size, mtime: file.mtime, mirrors: holders})
  const usable = new Set<number>()
  for (const c of again.ranked) usable.add(c.mirror.id)
  return stale.filter((e) => usable.has(e.mirror.id))
}

/**
 * The mirror list data (also the JSON form) for `doc`, this client's `selection` (its
 * `ranked` and `origin`, and whether `excluded` holds `no_ipv6`) and the `outdated` copies ({@link outdatedCopies}).
 */
export function buildMirrorList(doc: MetalinkDocument, selection: Selection, client: ClientInfo, outdated: readonly Exclusion[] = []): MirrorList {
  const realms: MirrorList['realms'] = []
  for (const c of selection.ranked) {
    let group = realms[realms.length - 1]
    if (!group || group.realm !== c.realm) {
      group = {realm: c.realm, mirrors: []}
      realms.push(group)
    }
    group.mirrors.push(fromCandidate(c))
  }
  const h = doc.hashes
  return {
    path: doc.path,
    name: doc.name,
    size: doc.size,
    mtime: unixIso(doc.mtime),
    hashes: h ? {md5: h.md5, sha1: h.sha1, sha256: h.sha256, piece_size: h.pieceSize, piece_hash: h.pieceHash, pieces: h.pieceCount} : null,
    links: {
      file: doc.originUrl,
      meta4: doc.meta4Url,
      metalink: doc.metalinkUrl,
      sha256: h ? `${doc.originUrl}.sha256` : null,
      sha1: h ? `${doc.originUrl}.sha1` : null,
      md5: h ? `${doc.originUrl}.md5` : null,
      torrent: doc.torrentUrl ?? null,
      magnet: doc.torrentUrl ? `${doc.originUrl}.magnet` : null,
      btih: doc.torrentUrl ? `${doc.originUrl}.btih` : null,
      zsync: doc.zsyncUrl ?? null,
    },
    client: {ip: client.ip, country: client.country ?? null, continent: client.continent ?? null, asn: client.asn ?? null},
    realm: selection.realm,
    ranking: selection.ranking ?? 'geo',
    origin: selection.origin ? {reason: selection.origin.reason, detail: publicOrigin(selection)} : null,
    rule: selection.rule ? {name: selection.rule.name, target: selection.rule.target, url: selection.rule.url === undefined ? null : stripUserinfo(selection.rule.url)} : null,
    realms,
    outdated: outdated.filter((e) => e.reason === 'stale').map((e) => fromStale(e, doc.path, client.https)),
  }
}

const ESCAPES: Record<string, string> = {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}

/** HTML-escapes text for element content and quoted attributes. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c])
}

function humanSize(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]} (${bytes} bytes)`
}

const REALM_TITLES: Record<Realm, string> = {
  prefix: 'Mirrors in your network',
  as: 'Mirrors in your autonomous system (AS)',
  country: 'Mirrors in your country',
  continent: 'Mirrors on your continent',
  world: 'Mirrors elsewhere in the world',
  fallback: 'Fallback mirrors',
}

function mirrorRow(m: MirrorListMirror, outdated: boolean): string {
  const link = m.url ? `<a href="${escapeHtml(m.url)}">${escapeHtml(m.url)}</a>` : '—'
  const cells = [escapeHtml(m.identifier), escapeHtml(m.country ?? 'location unknown'), link]
  if (outdated) cells.push(escapeHtml(m.detail ?? ''))
  else cells.splice(2, 0, String(m.rank ?? ''))
  return `<tr>${cells.map((c) => `<td>${c}</td>`).join('')}</tr>`
}

/** Where the client is as GeoIP knows it: `GB, EU, AS64500`, or `location unknown`. */
function clientPlace(client: MirrorList['client']): string {
  const parts = client.country || client.continent ? [client.country ?? 'country unknown', client.continent ?? 'continent unknown'] : ['location unknown']
  if (client.asn) parts.push(`AS${client.asn}`)
  return parts.join(', ')
}

/** Renders the mirror list as a self-contained HTML page (UTF-8, inline CSS, no scripts). */
export function renderMirrorListHtml(list: MirrorList): string {
  const name = escapeHtml(list.name)
  const h = list.hashes
  const parts: string[] = []
  parts.push(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mirrors of ${name}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em auto;max-width:60em;padding:0 1em;color:#222}table{border-collapse:collapse;width:100%;margin-bottom:1.5em}td,th{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}code{font-size:.9em;word-break:break-all}h2{margin-top:1.5em;font-size:1.15em}</style>
</head><body>
<h1>Mirrors of <code>${escapeHtml(list.path)}</code></h1>
<table>
<tr><th>File</th><td><a href="${escapeHtml(list.links.file)}">${name}</a></td></tr>
<tr><th>Size</th><td>${escapeHtml(humanSize(list.size))}</td></tr>
<tr><th>Last modified</th><td>${escapeHtml(list.mtime)}</td></tr>`)
  if (h) {
    parts.push(`<tr><th>SHA-256</th><td><code>${h.sha256}</code></td></tr>
<tr><th>SHA-1</th><td><code>${h.sha1}</code></td></tr>
<tr><th>MD5</th><td><code>${h.md5}</code></td></tr>`)
  } else {
    parts.push('<tr><th>Hashes</th><td>not available (the file has not been hashed since it last changed)</td></tr>')
  }
  const links = [`<a href="${escapeHtml(list.links.meta4)}">Metalink 4 (.meta4)</a>`, `<a href="${escapeHtml(list.links.metalink)}">Metalink 3 (.metalink)</a>`]
  if (list.links.sha256)
    links.push(`<a href="${escapeHtml(list.links.sha256)}">.sha256</a>`, `<a href="${escapeHtml(list.links.sha1!)}">.sha1</a>`, `<a href="${escapeHtml(list.links.md5!)}">.md5</a>`)
  const l = list.links
  if (l.torrent) links.push(`<a href="${escapeHtml(l.torrent)}">BitTorrent (.torrent)</a>`, `<a href="${escapeHtml(l.magnet!)}">magnet link</a>`, `<a href="${escapeHtml(l.btih!)}">info hash</a>`)
  if (l.zsync) links.push(`<a href="${escapeHtml(l.zsync)}">zsync (.zsync)</a>`)
  parts.push(`<tr><th>Metalinks and hashes</th><td>${links.join(' · ')}</td></tr>
</table>
<p>Your address: ${escapeHtml(list.client.ip)} (${escapeHtml(clientPlace(list.client))})</p>`)
  if (list.rule)
    parts.push(
      `<p>Redirect rule <code>${escapeHtml(list.rule.name)}</code> applies: ${list.rule.url ? `downloads go to <a href="${escapeHtml(list.rule.url)}">${escapeHtml(list.rule.url)}</a>` : list.rule.target === 'mirrors' ? 'only the mirrors below are used' : 'the origin delivers the file'}.</p>`,
    )
  if (list.ranking === 'score' && list.realms.length > 0) parts.push('<p>Mirrors are ranked by their score alone, wherever they are: each takes a share of the downloads in proportion to it.</p>')
  if (list.origin) parts.push(`<p>This file is delivered by the origin server itself (${escapeHtml(list.origin.detail)}).</p>`)
  for (const group of list.realms) {
    parts.push(`<h2>${escapeHtml(REALM_TITLES[group.realm])} (${group.mirrors.length})</h2>
<table><tr><th>Mirror</th><th>Country</th><th>Rank</th><th>URL</th></tr>
${group.mirrors.map((m) => mirrorRow(m, false)).join('\n')}
</table>`)
  }
  if (list.realms.length === 0 && !list.origin) parts.push('<p>No mirror holds this file for you at the moment; it is delivered by the origin.</p>')
  if (list.outdated.length > 0) {
    parts.push(`<h2>Outdated copies, not used until updated (${list.outdated.length})</h2>
<table><tr><th>Mirror</th><th>Country</th><th>URL</th><th>How it differs</th></tr>
${list.outdated.map((m) => mirrorRow(m, true)).join('\n')}
</table>`)
  }
  parts.push('</body></html>\n')
  return parts.join('\n')
}
