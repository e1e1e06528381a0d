/**
 * BitTorrent metainfo files and magnet links for web-seed-only downloads of one origin file.
 *
 * - `.torrent` (`application/x-bittorrent`, BEP 3): a single-file v1 info dictionary
 *   (`length`, `name`, `piece length` (a power of two, the file's piece size), `pieces`
 *   (concatenated 20-byte SHA-1 digests)), and `url-list` (BEP 19 web seeds: the client's
 *   mirrors best first, the origin last). `announce`/`announce-list` (BEP 12) appear only
 *   when trackers are configured; otherwise clients find no peers and fetch from the web
 *   seeds alone.
 * - info hash: SHA-1 of the bencoded info dictionary (BEP 3), 40 hex digits (`.btih`).
 * - magnet link (BEP 9, and the `ws=`/`xs=` parameters of the magnet URI scheme):
 *   `magnet:?xt=urn:btih:HEX&dn=NAME&xl=BYTES&tr=…&ws=…&xs=TORRENT_URL`, every value
 *   percent-encoded as a URI component (RFC 3986), never XML-escaped.
 *
 * The info dictionary is the same for every client: it is bencoded once per file version
 * ({@link torrentInfo}) and kept by the caller; each request bencodes only its own small
 * outer dictionary around it ({@link renderTorrent}).
 */
import {createHash} from 'node:crypto'
import bencode from 'bencode'
import {wellFormed} from '../text.js'

export const TORRENT_MEDIA_TYPE = 'application/x-bittorrent'

/** What the info dictionary is made of: one file version. */
export interface TorrentSource {
  /** The file's name (basename). */
  name: string
  /** Bytes (> 0). */
  size: number
  /** Bytes per piece, a power of two. */
  pieceSize: number
  /** SHA-1 digests of each piece, hex, concatenated (40 digits per piece). */
  sha1PiecesHex: string
}

/** A bencoded info dictionary and its info hash. */
export interface TorrentInfo {
  /** The bencoded info dictionary. */
  info: Uint8Array
  /** SHA-1 of `info`, 40 lower-case hex digits. */
  infoHash: string
  name: string
  size: number
}

/**
 * The bencoded info dictionary of `source` and its info hash. Callers keep the result per
 * file version: it is the same for every client.
 * @throws Error when the pieces do not cover the file (`ceil(size / pieceSize)` digests)
 */
export function torrentInfo(source: TorrentSource): TorrentInfo {
  const pieces = Buffer.from(source.sha1PiecesHex, 'hex')
  if (pieces.length !== 20 * Math.ceil(source.size / source.pieceSize)) throw new Error(`the SHA-1 pieces of ${source.name} do not cover its ${source.size} bytes`)
  const info = bencode.encode({length: source.size, name: wellFormed(source.name), 'piece length': source.pieceSize, pieces})
  return {info, infoHash: createHash('sha1').update(info).digest('hex'), name: source.name, size: source.size}
}

/** The per-request part of a metainfo file. */
export interface TorrentOptions {
  /** Web seeds (BEP 19), best first: the file's URL on each mirror, then on the origin. */
  webSeeds: string[]
  /** Tracker announce URLs; empty: none (web seeds only). */
  trackers: readonly string[]
  /** `creation date`, Unix seconds (UTC). */
  creationDate: number
  /** `created by`. */
  createdBy: string
}

const INFO_KEY = bencode.encode('info')

/**
 * The `.torrent` file: `announce` (first tracker) and `announce-list` (one tier per tracker,
 * BEP 12) when trackers are given, `created by`, `creation date`, the cached `info`, and
 * `url-list`. The outer dictionary is bencoded without `info` and the cached bytes are put in
 * at the place its key sorts to (after `creation date`, before `url-list`), so the result is
 * the canonical bencoding (keys in byte order) of the whole dictionary.
 */
export function renderTorrent(torrent: TorrentInfo, options: TorrentOptions): Buffer {
  return Buffer.concat(torrentParts(torrent, options))
}

/**
 * {@link renderTorrent} as the pieces it is joined from, in order (the cached info dictionary
 * among them, not copied), for a response that writes them in turn.
 */
export function torrentParts(torrent: TorrentInfo, options: TorrentOptions): Uint8Array[] {
  const head = bencode.encode({
    announce: options.trackers[0],
    'announce-list': options.trackers.length > 1 ? options.trackers.map((t) => [t]) : undefined,
    'created by': options.createdBy,
    'creation date': options.creationDate,
  })
  const tail = bencode.encode({'url-list': options.webSeeds})
  return [head.subarray(0, head.length - 1), INFO_KEY, torrent.info, tail.subarray(1)]
}

/** What a magnet link names besides the info hash. */
export interface MagnetOptions {
  /** Web seeds, best first (`ws=`). */
  webSeeds: string[]
  /** The URL of the `.torrent` (`xs=`, exact source). */
  torrentUrl: string
  trackers: readonly string[]
}

/** A URI component, percent-encoded (RFC 3986); lone surrogates become U+FFFD first. */
function component(value: string): string {
  return encodeURIComponent(wellFormed(value))
}

/**
 * The magnet link of `torrent`: `xt=urn:btih:<hex>`, `dn` (name), `xl` (bytes), a `tr` per
 * tracker, a `ws` per web seed and `xs` pointing at the `.torrent`.
 */
export function magnetLink(torrent: TorrentInfo, options: MagnetOptions): string {
  const parts = [`xt=urn:btih:${torrent.infoHash}`, `dn=${component(torrent.name)}`, `xl=${torrent.size}`]
  for (const tracker of options.trackers) parts.push(`tr=${component(tracker)}`)
  for (const seed of options.webSeeds) parts.push(`ws=${component(seed)}`)
  parts.push(`xs=${component(options.torrentUrl)}`)
  return `magnet:?${parts.join('&')}`
}
