/**
 * The BitTorrent and zsync representations of an indexed origin file, as `mb serve`
 * (metalink/routes.ts) and `mb metalink --format` (metalink/offline.ts) answer them:
 *
 * - `PATH.torrent` → `application/x-bittorrent` (torrent.ts), web seeds = the client's
 *   mirrors best first, then the origin's direct URL (src/lib/serve/delivery/origin-form.ts);
 * - `PATH.magnet` → `text/plain`, the magnet link (torrent.ts) with the same web seeds;
 * - `PATH.btih` → `text/plain`, the info hash in hex;
 * - `PATH.zsync` → `application/x-zsync` (zsync-control.ts), `URL:` lines for the client's
 *   mirrors (the origin only when no mirror serves this client: zsync picks among its URLs at
 *   random, so listing the origin beside mirrors would send part of the load back to it).
 *
 * What they are made of (the SHA-1 pieces, the zsync block sums) comes from the store, is
 * read once per file version and kept in {@link FormatStore}; only the URL lists are written
 * per request. A file without current data gets 404 with the reason and what to run.
 */
import type {IncomingMessage, ServerResponse} from 'node:http'
import type {Database} from '../db/index.js'
import {hashesMatchVersion} from '../origin/freshness.js'
import type {MetalinkDocument} from './document.js'
import {contentDisposition, writeBody} from './http.js'
import {magnetLink, renderTorrent, TORRENT_MEDIA_TYPE, type TorrentInfo, torrentInfo, type TorrentOptions, torrentParts} from './torrent.js'
import {ZSYNC_MEDIA_TYPE, type ZsyncControl, zsyncNameOk, zsyncParts} from './zsync-control.js'
import {type CacheBudget, VersionCache} from './version-cache.js'

/** The representations this module answers. */
export type FormatKind = 'torrent' | 'magnet' | 'btih' | 'zsync'

/** The file extension of each kind, with its dot. */
export const FORMAT_SUFFIXES: ReadonlyArray<[string, FormatKind]> = [
  ['.torrent', 'torrent'],
  ['.magnet', 'magnet'],
  ['.btih', 'btih'],
  ['.zsync', 'zsync'],
]

/** The file version a representation is asked for (size bytes, mtime Unix seconds, SHA-1 (and SHA-256) hex from the snapshot). */
export interface FormatFile {
  path: string
  size: number
  mtime: number
  sha1: string | null
  sha256?: string | null
}

/** Why a representation cannot be given: the HTTP status and a sentence for the body. */
export interface Unavailable {
  status: 404 | 503
  reason: string
}

/** Settings of {@link FormatStore}. */
export interface FormatStoreOptions {
  /** Smallest file size in bytes with zsync sums (config `zsync.min_size`); null: zsync is off. */
  zsyncMinSize: number | null
  /** BitTorrent info dictionaries kept (./version-cache.ts). */
  torrentCache: CacheBudget
  /** zsync block sums kept (./version-cache.ts). */
  zsyncCache: CacheBudget
  /** Tracker URLs (config `torrent.trackers`). */
  trackers?: readonly string[]
  /** Name the .torrent in meta4 documents (config `torrent.meta4_metaurl`, default false). */
  meta4Metaurl?: boolean
}

const HASH_HINT = 'run `mb index --hashes` on the origin'

/** The stored data of the client formats, read once per file version. */
export class FormatStore {
  private readonly torrents: VersionCache<TorrentInfo>
  private readonly zsyncs: VersionCache<ZsyncControl>
  readonly trackers: readonly string[]
  readonly meta4Metaurl: boolean

  constructor(
    private readonly database: Database | undefined,
    private readonly options: FormatStoreOptions,
  ) {
    this.torrents = new VersionCache(options.torrentCache)
    this.zsyncs = new VersionCache(options.zsyncCache)
    this.trackers = options.trackers ?? []
    this.meta4Metaurl = options.meta4Metaurl ?? false
  }

  /** The info dictionary of `file` (its SHA-1 pieces must be current), or why there is none. */
  async torrent(file: FormatFile): Promise<TorrentInfo | Unavailable> {
    if (file.size === 0) return {status: 404, reason: `/${file.path} is empty; BitTorrent cannot describe a file of 0 bytes.`}
    const cached = this.torrents.get(file)
    if (cached) return cached
    if (!this.database) return {status: 503, reason: 'The store is not available; try again later.'}
    let row: {size: number; mtime: number; sha1: string | null; piece_size: number | null; sha1_pieces: string | null; hashed_size: number | null; hashed_mtime: number | null} | undefined
    try {
      row = await this.database.db.selectFrom('file').select(['size', 'mtime', 'sha1', 'piece_size', 'sha1_pieces', 'hashed_size', 'hashed_mtime']).where('path', '=', file.path).executeTakeFirst()
    } catch {
      return {status: 503, reason: 'The store cannot be reached at the moment; try again later.'}
    }
    if (!row?.sha1_pieces || !row.piece_size || row.sha1 !== file.sha1 || !hashesMatchVersion(row, file)) {
      return {status: 404, reason: `No BitTorrent piece hashes of /${file.path}: it has not been hashed since it last changed (${HASH_HINT}).`}
    }
    const slash = file.path.lastIndexOf('/')
    const info = torrentInfo({name: file.path.slice(slash + 1), size: file.size, pieceSize: Number(row.piece_size), sha1PiecesHex: row.sha1_pieces})
    this.torrents.set(file, info, info.info.length)
    return info
  }

  /** The zsync data of `file` (its block sums must be current), or why there is none. */
  async zsync(file: FormatFile): Promise<ZsyncControl | Unavailable> {
    const min = this.options.zsyncMinSize
    if (min === null) return {status: 404, reason: 'zsync is turned off on this server (zsync.enabled: false).'}
    if (file.size < min) return {status: 404, reason: `/${file.path} is smaller than ${min} bytes (zsync.min_size): no .zsync is made for it; download it whole.`}
    const slash = file.path.lastIndexOf('/')
    const name = file.path.slice(slash + 1)
    if (!zsyncNameOk(name)) return {status: 404, reason: `The name of /${file.path} holds a line break, which a .zsync header cannot carry.`}
    const cached = this.zsyncs.get(file)
    if (cached) return cached
    if (!this.database) return {status: 503, reason: 'The store is not available; try again later.'}
    let row:
      | {size: number; mtime: number; sha1: string | null; zsync_block_size: number | null; hashed_size: number | null; hashed_mtime: number | null; hash_lengths: string; sums: Uint8Array}
      | undefined
    try {
      row = await this.database.db
        .selectFrom('file')
        .innerJoin('file_zsync', 'file_zsync.file_id', 'file.id')
        .select(['file.size', 'file.mtime', 'file.sha1', 'file.zsync_block_size', 'file.hashed_size', 'file.hashed_mtime', 'file_zsync.hash_lengths', 'file_zsync.sums'])
        .where('file.path', '=', file.path)
        .executeTakeFirst()
    } catch {
      return {status: 503, reason: 'The store cannot be reached at the moment; try again later.'}
    }
    if (!row?.zsync_block_size || !row.sha1 || row.sha1 !== file.sha1 || !hashesMatchVersion(row, file)) {
      return {status: 404, reason: `No zsync block sums of /${file.path}: they have not been computed since it last changed (${HASH_HINT}).`}
    }
    const control: ZsyncControl = {name, size: file.size, mtime: file.mtime, sha1: row.sha1, blockSize: Number(row.zsync_block_size), hashLengths: row.hash_lengths, sums: row.sums}
    this.zsyncs.set(file, control, row.sums.length)
    return control
  }
}

/** True when `value` is an {@link Unavailable} answer. */
export function isUnavailable(value: object): value is Unavailable {
  return 'reason' in value && 'status' in value
}

/** The web seeds of `doc`: the mirrors in order, then the origin. */
function webSeeds(doc: MetalinkDocument): string[] {
  return doc.sources.map((s) => s.url)
}

/** The zsync URLs of `doc`: the mirrors in order, or the origin's direct URL alone when no mirror is listed. */
export function zsyncUrls(doc: MetalinkDocument): string[] {
  const mirrors = doc.sources.filter((s) => s.mirror !== undefined).map((s) => s.url)
  return mirrors.length > 0 ? mirrors : doc.sources.filter((s) => s.mirror === undefined).map((s) => s.url)
}

/** The `.torrent` of `doc` for `info`: web seeds from `doc`, `creation date` = the file's mtime. */
export function torrentBody(doc: MetalinkDocument, info: TorrentInfo, trackers: readonly string[]): Buffer {
  return renderTorrent(info, torrentOptions(doc, trackers))
}

/** The per-request part of the `.torrent` of `doc`: its web seeds, `creation date` = the file's mtime. */
function torrentOptions(doc: MetalinkDocument, trackers: readonly string[]): TorrentOptions {
  return {webSeeds: webSeeds(doc), trackers, creationDate: doc.mtime, createdBy: doc.generator}
}

/** The magnet link of `doc` for `info`. */
export function magnetBody(doc: MetalinkDocument, info: TorrentInfo, trackers: readonly string[]): string {
  return magnetLink(info, {webSeeds: webSeeds(doc), torrentUrl: `${doc.originUrl}.torrent`, trackers})
}

/** What a format answer sent (see `Sent` in http.ts). */
export interface FormatSent {
  status: number
  outcome: FormatKind | 'not_found' | 'error'
  bytesSent: number
}

const PRIVATE = 'private, no-store'
const TEXT = 'text/plain; charset=utf-8'

/**
 * Answers `kind` for `doc` (built for this client) with the data `stored` (or its
 * {@link Unavailable} reason: 404, or 503 when the store cannot be read).
 */
export function sendFormat(
  req: IncomingMessage,
  res: ServerResponse,
  kind: FormatKind,
  doc: MetalinkDocument,
  stored: TorrentInfo | ZsyncControl | Unavailable,
  trackers: readonly string[],
): FormatSent {
  if (isUnavailable(stored)) {
    const bytesSent = writeBody(req, res, stored.status, {'Content-Type': TEXT, 'Cache-Control': 'no-store'}, `${stored.reason}\n`)
    return {status: stored.status, outcome: stored.status === 404 ? 'not_found' : 'error', bytesSent}
  }
  let bytesSent: number
  switch (kind) {
    case 'torrent':
      bytesSent = writeBody(
        req,
        res,
        200,
        {'Content-Type': TORRENT_MEDIA_TYPE, 'Content-Disposition': contentDisposition(`${doc.name}.torrent`), 'Cache-Control': PRIVATE},
        torrentParts(stored as TorrentInfo, torrentOptions(doc, trackers)),
      )
      break
    case 'magnet':
      bytesSent = writeBody(req, res, 200, {'Content-Type': TEXT, 'Cache-Control': PRIVATE}, `${magnetBody(doc, stored as TorrentInfo, trackers)}\n`)
      break
    case 'btih':
      bytesSent = writeBody(req, res, 200, {'Content-Type': TEXT, 'Cache-Control': 'no-cache'}, `${(stored as TorrentInfo).infoHash}\n`)
      break
    default:
      bytesSent = writeBody(
        req,
        res,
        200,
        {'Content-Type': ZSYNC_MEDIA_TYPE, 'Content-Disposition': contentDisposition(`${doc.name}.zsync`), 'Cache-Control': PRIVATE},
        zsyncParts(stored as ZsyncControl, zsyncUrls(doc)),
      )
  }
  return {status: 200, outcome: kind, bytesSent}
}
