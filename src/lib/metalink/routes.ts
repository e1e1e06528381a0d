/**
 * The metalink route of `mb serve` (RFC 5854, RFC 6249, hash files, mirror list), for the
 * server's route table (`MirrorServer.addRoute`); it reaches the server only through the
 * {@link RouteServices} it is created with. The Metalink/HTTP headers of redirects are
 * ./redirect-headers.ts.
 *
 * Routes, for an indexed file PATH:
 *   `PATH.meta4`, `PATH?meta4`, `PATH` with an `Accept` that prefers
 *   `application/metalink4+xml` (q-values honoured, RFC 9110 §12.5.1) → Metalink 4;
 *   `PATH.metalink`, `PATH?metalink` → Metalink 3; `PATH.sha256|.sha1|.md5` → hash file;
 *   `PATH.mirrorlist`, `PATH?mirrorlist` → mirror list (HTML, or JSON on request);
 *   `PATH.torrent`, `.magnet`, `.btih`, `.zsync` → BitTorrent and zsync (formats.ts).
 * A file on disk named like the representation (`X.meta4`, `X.sha256`, …) always wins: it
 * is delivered as itself, indexed or not, once the disk check sees it (within
 * `serve.disk_check_seconds`, at once in a watched directory: {@link RouteServices.fileOnDisk}).
 * A file on disk that is not indexed (yet) gets the same representations, with the origin as
 * its only source (reason `not_indexed`); one that changed since it was indexed is described
 * as the disk has it ({@link RouteServices.currentFile}).
 *
 * Freshness: the snapshot holds md5/sha1/sha256 only while the row's hashed size/mtime match
 * its size/mtime; on top of that the file on disk must still have that size and mtime, which
 * {@link RouteServices.currentFile} checks (a stat at most `serve.disk_check_seconds` old; a changed
 * file comes back without hashes). Piece hashes come from the database; they and the parts
 * of the documents that do not depend on the client are kept per file version
 * (./version-cache.ts), so a request builds only its ranked `<url>` list. When the database
 * is unreachable the documents carry the whole-file hashes without pieces.
 */
import type {Database} from '../db/index.js'
import {hashesMatchVersion} from '../origin/freshness.js'
import {readStoredHashes, type StoredHashes} from '../origin/hash.js'
import {BAD_COUNTRY_QUERY, type RequestContext, type Route, type RouteServices} from '../serve/delivery/route.js'
import type {FileEntry} from '../serve/snapshot/file-entry.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import type {Selection} from '../select/types.js'
import {hasQueryFlag} from '../serve/delivery/path.js'
import {buildDocument, DEFAULT_MAX_URLS} from './document.js'
import {SignatureTexts, signatureOf} from './signature.js'
import {outdatedCopies} from './mirrorlist.js'
import {StaleCopiesCache} from './stale-copies.js'
import type {HashKind} from './headers.js'
import {type MetalinkContext, type Sent, sendHashFile, sendMeta4, sendMetalink3, sendMirrorList, negotiatedMetalink} from './http.js'
import {FORMAT_SUFFIXES, type FormatKind, type FormatStore, sendFormat} from './formats.js'
import {meta4FilePart} from './meta4.js'
import {metalink3FilePart} from './metalink3.js'
import {type CacheBudget, VersionCache} from './version-cache.js'
import {FORMAT_TORRENT, FORMAT_ZSYNC, fileWith} from '../serve/snapshot/file-entry.js'
import {BaseUrls} from '../serve/delivery/public-url.js'

export interface MetalinkRouteOptions {
  /** For piece hashes; without it documents carry whole-file hashes only. */
  database?: Database
  /** Mirror URLs per metalink (default 20), or a function read per request (a reload may change `select.metalink_max_mirrors`). */
  maxUrls?: number | (() => number)
  /** This server's URLs (`serve.public_url`, `serve.origin_url`), shared with the other routes; default: from the request's Host, the origin form. */
  baseUrls?: BaseUrls
  /** File versions whose hash rows and document parts are kept, and the bytes they may take (./version-cache.ts). */
  cache: CacheBudget
  /** The BitTorrent and zsync data; without it those representations answer 404. */
  formats?: FormatStore
}

type Kind = 'meta4' | 'metalink' | 'mirrorlist' | HashKind | FormatKind

/** What the metalink route answers: which representation, of which file. */
export interface MetalinkTarget {
  kind: Kind
  /** The indexed file; undefined for a path that is not indexed (maybe a file on disk). */
  file: FileEntry | undefined
  /** Origin-relative path of the file described. */
  path: string
  /**
   * Asked for by `Accept` alone, at the file's own URL (not by suffix or query): then the
   * document is sent only when it lists a mirror, else the file's bytes.
   */
  negotiated?: boolean
}

const SUFFIXES: Array<[string, Kind]> = [['.meta4', 'meta4'], ['.metalink', 'metalink'], ['.sha256', 'sha256'], ['.sha1', 'sha1'], ['.md5', 'md5'], ['.mirrorlist', 'mirrorlist'], ...FORMAT_SUFFIXES]

const FORMAT_KINDS = new Set<Kind>(FORMAT_SUFFIXES.map(([, kind]) => kind))

/** Which representation a request asks for, and of which indexed file; undefined if none. */
function metalinkTarget(ctx: Pick<RequestContext, 'path' | 'slash' | 'query' | 'file' | 'snapshot' | 'req'>): MetalinkTarget | undefined {
  if (ctx.slash) return undefined
  const path = ctx.path
  if (ctx.query.length > 0) {
    if (hasQueryFlag(ctx.query, 'meta4')) return {kind: 'meta4', file: ctx.file, path}
    if (hasQueryFlag(ctx.query, 'mirrorlist')) return {kind: 'mirrorlist', file: ctx.file, path}
    if (hasQueryFlag(ctx.query, 'metalink')) return {kind: 'metalink', file: ctx.file, path}
  }
  // A Range request wants the file's bytes (a web seed, a resumed download), whatever it accepts.
  if (ctx.file) {
    if (ctx.req.headers.range !== undefined) return undefined
    const kind = negotiatedMetalink(ctx.req.headers.accept)
    return kind === undefined ? undefined : {kind, file: ctx.file, path, negotiated: true}
  }
  const dot = path.lastIndexOf('.')
  if (dot > 0) {
    for (const [suffix, kind] of SUFFIXES) {
      if (path.length - dot === suffix.length && path.endsWith(suffix)) {
        const described = path.slice(0, dot)
        return {kind, file: ctx.snapshot.lookup(described), path: described}
      }
    }
  }
  // Not indexed: the origin's file (handle() looks), which no mirror is known to hold: a
  // metalink by Accept alone would list none, so the request gets the file's bytes.
  return undefined
}

/** The selection of a file the index does not know: the origin serves it. */
const NOT_INDEXED: Selection = {realm: null, ranked: [], excluded: [], origin: {reason: 'not_indexed', detail: 'the file is on the origin but not in the index yet'}}

/** The selection of a file that changed on disk since it was indexed: the origin serves it. */
const INDEX_STALE: Selection = {realm: null, ranked: [], excluded: [], origin: {reason: 'index_stale', detail: 'the file changed on the origin since it was indexed'}}

const NO_MIRRORS = new Int16Array(0)

/**
 * What the documents of one file version share, whatever the client: the hash row (or null
 * without fresh hashes) and the UTF-8 of the Metalink 4 and 3 file parts (made on first use).
 */
interface VersionParts {
  stored: StoredHashes | null
  meta4?: Buffer
  metalink3?: Buffer
}

/** The bytes a {@link VersionParts} of `stored` will hold once both parts are made (about 3× the piece hex: the row, and each part's lines). */
function partsBytes(stored: StoredHashes | null): number {
  return 1024 + 3 * (stored?.pieces?.length ?? 0)
}

/** The representations ./http.ts answers from a built document. */
type DocumentKind = 'meta4' | 'metalink' | 'mirrorlist' | HashKind

/** Writes the answer of `kind` for `mctx` (the file parts of `parts` made for meta4 and metalink). */
function send(ctx: RequestContext, kind: DocumentKind, mctx: MetalinkContext, parts: VersionParts): Sent {
  switch (kind) {
    case 'meta4':
      return sendMeta4(ctx.req, ctx.res, mctx, parts.meta4)
    case 'metalink':
      return sendMetalink3(ctx.req, ctx.res, mctx, parts.metalink3)
    case 'mirrorlist':
      return sendMirrorList(ctx.req, ctx.res, mctx)
    default:
      return sendHashFile(ctx.req, ctx.res, mctx, kind)
  }
}

/** The metalink route, bound to one server. */
export class MetalinkRoutes {
  private readonly versions: VersionCache<VersionParts>
  private readonly maxUrls: () => number
  private readonly signatures = new SignatureTexts(() => this.server.root)
  /** The outdated copies for the mirror list (with a database). */
  private readonly staleCopies: StaleCopiesCache | undefined
  /** This server's base URLs by request; the redirect headers link the same documents and share them. */
  readonly baseUrls: BaseUrls

  constructor(
    private readonly server: RouteServices,
    private readonly options: MetalinkRouteOptions,
  ) {
    this.versions = new VersionCache(options.cache)
    const maxUrls = options.maxUrls ?? DEFAULT_MAX_URLS
    this.maxUrls = typeof maxUrls === 'number' ? () => maxUrls : maxUrls
    this.baseUrls = options.baseUrls ?? new BaseUrls()
    this.staleCopies = options.database === undefined ? undefined : new StaleCopiesCache(options.database)
  }

  /** Whether `.torrent` (and `.magnet`, `.btih`) are served: a format store was given. */
  get servesTorrents(): boolean {
    return this.options.formats !== undefined
  }

  /** The route (see {@link Route}): `match` finds the representation asked for, `handle` answers it. */
  readonly route: Route<MetalinkTarget> = {
    name: 'metalink',
    match: metalinkTarget,
    handle: (ctx, target) => this.handle(ctx, target),
  }

  /** This server's public base URL and the origin's direct base URL for this request (see {@link BaseUrls}). */
  private bases(ctx: RequestContext, https: boolean): {baseUrl: string; originBase: string} {
    return {baseUrl: this.baseUrls.of(ctx.req, https), originBase: this.baseUrls.origin(ctx.req, https)}
  }

  /**
   * The parts of `file`'s documents that are the same for every client (see
   * {@link VersionParts}), kept per file version: the hash row is read once per version
   * while the snapshot holds fresh hashes, else the parts carry none. A row that does not
   * match the snapshot's version, or a database that cannot be reached, gives the snapshot's
   * whole-file hashes without pieces, not kept (the next request reads again).
   */
  private async versionParts(file: FileEntry): Promise<VersionParts> {
    const cached = this.versions.get(file)
    if (cached) return cached
    if (!file.sha256 || !file.md5 || !file.sha1) return this.keep(file, {stored: null})
    const fallback: StoredHashes = {
      size: file.size,
      mtime: file.mtime,
      md5: file.md5,
      sha1: file.sha1,
      sha256: file.sha256,
      piece_size: null,
      piece_hash: null,
      pieces: null,
      sha1_pieces: null,
      hashed_size: file.size,
      hashed_mtime: file.mtime,
    }
    if (!this.options.database) return this.keep(file, {stored: fallback})
    try {
      const row = await readStoredHashes(this.options.database, file.path)
      if (!row || row.sha256 !== file.sha256 || !hashesMatchVersion(row, file)) return {stored: fallback}
      return this.keep(file, {stored: {...row, size: Number(row.size), mtime: Number(row.mtime)}})
    } catch {
      return {stored: fallback} // database down: whole-file hashes from the snapshot still hold
    }
  }

  /** Keeps `parts` for this version of `file` and returns them. */
  private keep(file: FileEntry, parts: VersionParts): VersionParts {
    this.versions.set(file, parts, partsBytes(parts.stored))
    return parts
  }

  /**
   * The file a not-indexed target describes, from the disk: an origin-only entry when
   * `target.path` is a regular file inside the root, else undefined (after answering: the
   * default handling for a directory or the request's own file, 404 otherwise).
   */
  private async unindexed(ctx: RequestContext, target: MetalinkTarget): Promise<FileEntry | undefined> {
    const server = this.server
    const described = await server.resolveOnDisk(target.path)
    if (described === undefined || described.directory) {
      await server.serveDefault(ctx)
      return undefined
    }
    return {path: target.path, size: described.size, mtime: described.mtime, mirrors: NO_MIRRORS, md5: null, sha1: null, sha256: null}
  }

  private async handle(ctx: RequestContext, target: MetalinkTarget): Promise<void> {
    const server = this.server
    // A real file with the representation's name wins (only reached when it is not indexed).
    // A cached stat (the disk check's) rules the common case out without a system call.
    if (!ctx.file && target.path !== ctx.path && server.fileOnDisk(ctx, ctx.path)) {
      const own = await server.resolveOnDisk(ctx.path)
      if (own && !own.directory) return server.deliver(ctx, 'not_indexed', own.real)
    }
    // currentFile() has compared the indexed version with the disk (a stat at most
    // serve.disk_check_seconds old): `current` is what the disk holds, without hashes when it changed.
    const current = target.file ? server.currentFile(ctx, target.file) : await this.unindexed(ctx, target)
    if (current === undefined) return
    const client = server.clientInfo(ctx)
    if (client === undefined) return server.plain(ctx, 400, 'bad_request', BAD_COUNTRY_QUERY)
    const changed = target.file !== undefined && current !== target.file
    const file = target.kind === 'mirrorlist' && target.file !== undefined && !changed ? await this.withStaleCopies(ctx.snapshot, current) : current
    const selection = !target.file ? NOT_INDEXED : changed ? INDEX_STALE : server.selectMirrors(ctx, client, file, target.kind === 'mirrorlist')
    if (target.negotiated && selection.ranked.length === 0) {
      // A document whose only URL is this server costs the client a round trip for nothing
      // (zypper asks for one with every file): the bytes it would fetch next, at once.
      ctx.res.setHeader('Vary', 'Accept')
      return server.deliver(ctx, selection.origin?.reason ?? 'no_mirror')
    }
    const bases = this.bases(ctx, client.https)
    if (FORMAT_KINDS.has(target.kind)) return this.handleFormat(ctx, target.kind as FormatKind, file, selection, bases, changed)
    const parts = await this.versionParts(file)
    const stored = parts.stored
    const bits = file.formats ?? 0
    const formats = this.options.formats && stored ? {torrent: (bits & FORMAT_TORRENT) !== 0, zsync: (bits & FORMAT_ZSYNC) !== 0, metaurl: this.options.formats.meta4Metaurl} : undefined
    const doc = buildDocument({
      path: file.path,
      size: file.size,
      mtime: file.mtime,
      stored,
      hashesFresh: stored !== null,
      selection,
      ...bases,
      maxUrls: this.maxUrls(),
      originFallbackMirrors: this.baseUrls.originFallbackMirrors,
      formats,
    })
    if (target.kind === 'meta4') {
      const signature = signatureOf(ctx.snapshot.files, file)
      const text = signature && (await this.signatures.text(signature))
      if (text) doc.signature = text
    }
    const mctx: MetalinkContext = {doc, selection, client}
    if (target.kind === 'mirrorlist')
      mctx.outdated = outdatedCopies(file, selection, (holding) => server.selectMirrors(ctx, client, fileWith(file, {mirrors: Int16Array.from(holding.mirrors)}), false))
    if (target.kind === 'meta4') parts.meta4 ??= Buffer.from(meta4FilePart(doc))
    else if (target.kind === 'metalink') parts.metalink3 ??= Buffer.from(metalink3FilePart(doc))
    server.answerLater(ctx, () => {
      const sent = send(ctx, target.kind as DocumentKind, mctx, parts)
      // Counted for the file it describes (`PATH.meta4` as `PATH?meta4`), not for a path of its own.
      server.finish(ctx, sent.status, sent.outcome, {bytesSent: sent.bytesSent, fileSize: file.size, realm: selection.realm, path: file.path})
    })
  }

  /**
   * `file` with the outdated copies the mirrors' last scans saw (./stale-copies.ts), so that the mirror list shows them as outdated instead of
   * leaving them out. Without a database, or while it is unreachable, `file` as it is.
   */
  private async withStaleCopies(snapshot: Snapshot, file: FileEntry): Promise<FileEntry> {
    if (this.staleCopies === undefined) return file
    try {
      const stale = await this.staleCopies.of(snapshot, file)
      return stale.size === 0 ? file : fileWith(file, {stale})
    } catch {
      return file
    }
  }

  /**
   * Answers `.torrent`, `.magnet`, `.btih` or `.zsync` (formats.ts) for this client's
   * `selection`: 404 with the reason when the store holds no current data for the file or the
   * file on disk no longer has the indexed version (`changed`, from `currentFile()`).
   */
  private async handleFormat(ctx: RequestContext, kind: FormatKind, file: FileEntry, selection: Selection, bases: {baseUrl: string; originBase: string}, changed: boolean): Promise<void> {
    const doc = buildDocument({
      path: file.path,
      size: file.size,
      mtime: file.mtime,
      stored: null,
      hashesFresh: false,
      selection,
      ...bases,
      maxUrls: this.maxUrls(),
      originFallbackMirrors: this.baseUrls.originFallbackMirrors,
    })
    const formats = this.options.formats
    let stored: Awaited<ReturnType<FormatStore['torrent']>> | Awaited<ReturnType<FormatStore['zsync']>>
    if (!formats) stored = {status: 404, reason: 'This server does not serve BitTorrent or zsync files.'}
    else if (changed) stored = {status: 404, reason: `/${file.path} changed on the origin since it was indexed; try again once it is re-indexed.`}
    else stored = kind === 'zsync' ? await formats.zsync(file) : await formats.torrent(file)
    const sent = sendFormat(ctx.req, ctx.res, kind, doc, stored, formats?.trackers ?? [])
    this.server.finish(ctx, sent.status, sent.outcome, {bytesSent: sent.bytesSent, fileSize: file.size, realm: selection.realm, path: file.path})
  }
}
