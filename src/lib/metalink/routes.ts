/**
 * The metalink route of `mb serve` (RFC 5854, RFC 6249, hash files, mirror list), for the
 * server's route table (`MirrorServer.addRoute`), and the Metalink/HTTP header providers for
 * redirects (`Link: rel=describedby` always, one more for the `.torrent` when the file has
 * BitTorrent data, `Digest` only with fresh hashes), for
 * `MirrorServer.addRedirectHeaders`. Both reach the server only through the
 * {@link RouteServices} they are created with.
 *
 * Routes, for an indexed file PATH:
 *   `PATH.meta4`, `PATH?meta4`, `PATH` with `Accept: application/metalink4+xml` → Metalink 4;
 *   `PATH.metalink` → Metalink 3; `PATH.sha256|.sha1|.md5` → hash file;
 *   `PATH.mirrorlist`, `PATH?mirrorlist` → mirror list (HTML, or JSON on request);
 *   `PATH.torrent`, `.magnet`, `.btih`, `.zsync` → BitTorrent and zsync (formats.ts).
 * A file on disk named like the representation (`X.meta4`, `X.sha256`, …) always wins: it
 * is delivered as itself, indexed or not.
 *
 * Freshness: the snapshot holds md5/sha1/sha256 only while the row's hashed size/mtime match
 * its size/mtime; on top of that the file on disk must still have that size and mtime
 * (checked with a stat, cached for `diskCheckSeconds` on the redirect path). Piece hashes
 * come from the database (cached per file version); when the database is unreachable the
 * documents carry the whole-file hashes without pieces.
 */
import {statSync} from 'node:fs'
import {sep} from 'node:path'
import type {Database} from '../db/index.js'
import {diskMatches, hashesMatchVersion, mtimeSeconds, sameVersion} from '../origin/freshness.js'
import {readStoredHashes, type StoredHashes} from '../origin/hash.js'
import type {RedirectHeaderProvider, RequestContext, Route, RouteServices} from '../serve/server.js'
import type {Selection} from '../select/types.js'
import {isPlainHost, withTrailingSlash} from '../text.js'
import type {FileEntry} from '../serve/snapshot.js'
import {hasQueryFlag} from '../serve/path.js'
import {buildDocument, DEFAULT_MAX_URLS, originUrlFor} from './document.js'
import {outdatedCopies} from './mirrorlist.js'
import {describedByLink, digestHeader, type HashKind} from './headers.js'
import {acceptsMeta4, type MetalinkContext, type Sent, sendHashFile, sendMeta4, sendMetalink3, sendMirrorList} from './http.js'
import {FORMAT_SUFFIXES, type FormatKind, type FormatStore, sendFormat} from './formats.js'
import {TORRENT_MEDIA_TYPE} from './torrent.js'
import {FORMAT_TORRENT, FORMAT_ZSYNC} from '../serve/snapshot.js'

export interface MetalinkRouteOptions {
  /** For piece hashes; without it documents carry whole-file hashes only. */
  database?: Database
  /** Mirror URLs per metalink (default 20). */
  maxUrls?: number
  /** Public base URL of this server (e.g. `https://download.example.org/`); default: from the request's Host. */
  baseUrl?: string
  /** How long a stat of an origin file vouches for its hashes on redirects, seconds (default 1; 0 = every request). */
  diskCheckSeconds?: number
  /** Piece-hash cache entries (default 10,000). */
  cacheSize?: number
  /** The BitTorrent and zsync data; without it those representations answer 404. */
  formats?: FormatStore
}

type Kind = 'meta4' | 'metalink' | 'mirrorlist' | HashKind | FormatKind

/** What the metalink route answers: which representation, of which indexed file. */
export interface MetalinkTarget {
  kind: Kind
  file: FileEntry
}

const SUFFIXES: Array<[string, Kind]> = [['.meta4', 'meta4'], ['.metalink', 'metalink'], ['.sha256', 'sha256'], ['.sha1', 'sha1'], ['.md5', 'md5'], ['.mirrorlist', 'mirrorlist'], ...FORMAT_SUFFIXES]

const FORMAT_KINDS = new Set<Kind>(FORMAT_SUFFIXES.map(([, kind]) => kind))

/** Which representation a request asks for, and of which indexed file; undefined if none. */
function metalinkTarget(ctx: Pick<RequestContext, 'path' | 'slash' | 'query' | 'file' | 'snapshot' | 'req'>): MetalinkTarget | undefined {
  if (ctx.slash) return undefined
  if (ctx.file) {
    if (ctx.query.length > 0) {
      if (hasQueryFlag(ctx.query, 'meta4')) return {kind: 'meta4', file: ctx.file}
      if (hasQueryFlag(ctx.query, 'mirrorlist')) return {kind: 'mirrorlist', file: ctx.file}
      if (hasQueryFlag(ctx.query, 'metalink')) return {kind: 'metalink', file: ctx.file}
    }
    // A Range request wants the file's bytes (a web seed, a resumed download), whatever it accepts.
    if (acceptsMeta4(ctx.req.headers.accept) && ctx.req.headers.range === undefined) return {kind: 'meta4', file: ctx.file}
    return undefined
  }
  const path = ctx.path
  const dot = path.lastIndexOf('.')
  if (dot <= 0) return undefined
  for (const [suffix, kind] of SUFFIXES) {
    if (path.length - dot === suffix.length && path.endsWith(suffix)) {
      const file = ctx.snapshot.files.get(path.slice(0, dot))
      return file ? {kind, file} : undefined
    }
  }
  return undefined
}

/** A small LRU of piece-hash rows keyed by path, valid for one file version. */
class HashCache {
  private readonly map = new Map<string, StoredHashes>()
  constructor(private readonly max: number) {}
  get(file: FileEntry): StoredHashes | undefined {
    const row = this.map.get(file.path)
    if (!row) return undefined
    if (!sameVersion(row, file) || row.sha256 !== file.sha256) {
      this.map.delete(file.path)
      return undefined
    }
    this.map.delete(file.path)
    this.map.set(file.path, row)
    return row
  }
  set(path: string, row: StoredHashes): void {
    if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as string)
    this.map.set(path, row)
  }
}

/** The metalink route and the Metalink/HTTP redirect-header providers, bound to one server. */
export class MetalinkRoutes {
  private readonly cache: HashCache
  private readonly diskChecks = new Map<string, {at: number; size: number; mtime: number}>()
  private readonly maxUrls: number
  private readonly diskCheckMs: number

  constructor(
    private readonly server: RouteServices,
    private readonly options: MetalinkRouteOptions = {},
  ) {
    this.cache = new HashCache(options.cacheSize ?? 10_000)
    this.maxUrls = options.maxUrls ?? DEFAULT_MAX_URLS
    this.diskCheckMs = (options.diskCheckSeconds ?? 1) * 1000
  }

  /** The route (see {@link Route}): `match` finds the representation asked for, `handle` answers it. */
  readonly route: Route<MetalinkTarget> = {
    name: 'metalink',
    match: metalinkTarget,
    handle: (ctx, target) => this.handle(ctx, target),
  }

  /**
   * Redirect header `Link: <…/PATH.meta4>; rel=describedby; type="application/metalink4+xml"`
   * (RFC 6249 §6).
   */
  readonly describedByHeader: RedirectHeaderProvider = (headers, ctx, file, client) => {
    headers.push('Link', describedByLink(`${originUrlFor(this.baseUrl(ctx, client.https), file.path)}.meta4`))
  }

  /**
   * Redirect header `Link: <…/PATH.torrent>; rel=describedby; type="application/x-bittorrent"`
   * (RFC 6249 §6), on a line of its own, while the file has current BitTorrent data.
   */
  readonly torrentLinkHeader: RedirectHeaderProvider = (headers, ctx, file, client) => {
    if (this.options.formats && (file.formats ?? 0) & FORMAT_TORRENT && this.diskMatches(file))
      headers.push('Link', `<${originUrlFor(this.baseUrl(ctx, client.https), file.path)}.torrent>; rel=describedby; type="${TORRENT_MEDIA_TYPE}"`)
  }

  /** Redirect header `Digest` (RFC 3230), only while the hashes are fresh in the snapshot and on disk. */
  readonly digestHeader: RedirectHeaderProvider = (headers, _ctx, file) => {
    if (file.sha256 !== null && file.md5 !== null && file.sha1 !== null && this.diskMatches(file)) headers.push('Digest', digestHeader({md5: file.md5, sha1: file.sha1, sha256: file.sha256}))
  }

  /**
   * The public base URL for this request: the configured one, else the request's `Host`
   * when it is a plain `host[:port]` ({@link isPlainHost}), else the address the request
   * came in on (IPv6 in brackets, RFC 3986 §3.2.2). A Host with any other character is the
   * client's and would land in a `Link` header and the document: it is not used.
   */
  private baseUrl(ctx: RequestContext, https: boolean): string {
    if (this.options.baseUrl) return withTrailingSlash(this.options.baseUrl)
    const header = ctx.req.headers.host
    const {localAddress, localPort} = ctx.req.socket
    const host = header !== undefined && isPlainHost(header) ? header : `${localAddress?.includes(':') ? `[${localAddress}]` : localAddress}:${localPort}`
    return `${https ? 'https' : 'http'}://${host}/`
  }

  /** The stored hash row of `file` when its hashes are fresh in the snapshot, else null. */
  private async storedHashes(file: FileEntry): Promise<StoredHashes | null> {
    if (!file.sha256 || !file.md5 || !file.sha1) return null
    const cached = this.cache.get(file)
    if (cached) return cached
    const fallback: StoredHashes = {
      size: file.size,
      mtime: file.mtime,
      md5: file.md5,
      sha1: file.sha1,
      sha256: file.sha256,
      piece_size: null,
      piece_hash: null,
      pieces: null,
      hashed_size: file.size,
      hashed_mtime: file.mtime,
    }
    if (!this.options.database) return fallback
    try {
      const row = await readStoredHashes(this.options.database, file.path)
      if (!row || row.sha256 !== file.sha256 || !hashesMatchVersion(row, file)) return fallback
      const normalized = {...row, size: Number(row.size), mtime: Number(row.mtime)}
      this.cache.set(file.path, normalized)
      return normalized
    } catch {
      return fallback // database down: whole-file hashes from the snapshot still hold
    }
  }

  private async handle(ctx: RequestContext, target: MetalinkTarget): Promise<void> {
    const server = this.server
    // A real file with the representation's name wins (only reached when it is not indexed).
    // A synchronous stat (no thread-pool round trip) rules the common case out cheaply.
    if (!ctx.file && statSync(server.root + sep + ctx.path, {throwIfNoEntry: false}) !== undefined) {
      const own = await server.resolveOnDisk(ctx.path)
      if (own && !own.directory) return server.deliver(ctx, 'not_indexed', own.real)
    }
    const client = server.clientInfo(ctx)
    if (client === undefined) return server.plain(ctx, 400, 'bad_request', 'Bad request: ?country= must be an ISO 3166-1 alpha-2 code such as DE.')
    const file = target.file
    const selection = server.selectMirrors(ctx, client, file, target.kind === 'mirrorlist')
    if (FORMAT_KINDS.has(target.kind)) return this.handleFormat(ctx, target.kind as FormatKind, file, selection, this.baseUrl(ctx, client.https))
    let stored = await this.storedHashes(file)
    if (stored) {
      let st: {size: number; mtimeMs: number} | undefined
      try {
        st = statSync(server.root + sep + file.path, {throwIfNoEntry: false})
      } catch {
        st = undefined
      }
      if (!diskMatches(st, file)) stored = null
    }
    const bits = file.formats ?? 0
    const formats = this.options.formats && stored ? {torrent: (bits & FORMAT_TORRENT) !== 0, zsync: (bits & FORMAT_ZSYNC) !== 0, metaurl: this.options.formats.meta4Metaurl} : undefined
    const doc = buildDocument({
      path: file.path,
      size: file.size,
      mtime: file.mtime,
      stored,
      hashesFresh: stored !== null,
      selection,
      baseUrl: this.baseUrl(ctx, client.https),
      maxUrls: this.maxUrls,
      formats,
    })
    const mctx: MetalinkContext = {doc, selection, client}
    if (target.kind === 'mirrorlist') mctx.outdated = outdatedCopies(file, selection, (holding) => server.selectMirrors(ctx, client, {...file, mirrors: Int16Array.from(holding.mirrors)}, false))
    let sent: Sent
    switch (target.kind) {
      case 'meta4':
        sent = sendMeta4(ctx.req, ctx.res, mctx)
        break
      case 'metalink':
        sent = sendMetalink3(ctx.req, ctx.res, mctx)
        break
      case 'mirrorlist':
        sent = sendMirrorList(ctx.req, ctx.res, mctx)
        break
      default:
        sent = sendHashFile(ctx.req, ctx.res, mctx, target.kind as HashKind)
    }
    server.finish(ctx, sent.status, sent.outcome, {bytesSent: sent.bytesSent, fileSize: file.size, realm: selection.realm})
  }

  /**
   * Answers `.torrent`, `.magnet`, `.btih` or `.zsync` (formats.ts) for this client's
   * `selection`: 404 with the reason when the store holds no current data for the file or the
   * file on disk no longer has the indexed version.
   */
  private async handleFormat(ctx: RequestContext, kind: FormatKind, file: FileEntry, selection: Selection, baseUrl: string): Promise<void> {
    const doc = buildDocument({path: file.path, size: file.size, mtime: file.mtime, stored: null, hashesFresh: false, selection, baseUrl, maxUrls: this.maxUrls})
    const formats = this.options.formats
    let stored: Awaited<ReturnType<FormatStore['torrent']>> | Awaited<ReturnType<FormatStore['zsync']>>
    if (!formats) stored = {status: 404, reason: 'This server does not serve BitTorrent or zsync files.'}
    else if (!this.diskMatches(file, Date.now(), true)) stored = {status: 404, reason: `/${file.path} changed on the origin since it was indexed; try again once it is re-indexed.`}
    else stored = kind === 'zsync' ? await formats.zsync(file) : await formats.torrent(file)
    const sent = sendFormat(ctx.req, ctx.res, kind, doc, stored, formats?.trackers ?? [])
    this.server.finish(ctx, sent.status, sent.outcome, {bytesSent: sent.bytesSent, fileSize: file.size, realm: selection.realm})
  }

  /** True when the file on disk still has the indexed size and mtime (stat cached for diskCheckSeconds unless `fresh`). */
  private diskMatches(file: FileEntry, now = Date.now(), fresh = false): boolean {
    const seen = this.diskChecks.get(file.path)
    if (seen && !fresh && now - seen.at < this.diskCheckMs) return sameVersion(seen, file)
    let size = -1
    let mtime = -1
    try {
      const st = statSync(this.server.root + sep + file.path)
      size = st.size
      mtime = mtimeSeconds(st)
    } catch {
      /* gone: not fresh */
    }
    if (this.diskCheckMs > 0) {
      if (this.diskChecks.size > 100_000) this.diskChecks.clear()
      this.diskChecks.set(file.path, {at: now, size, mtime})
    }
    return sameVersion({size, mtime}, file)
  }
}
