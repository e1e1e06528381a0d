/**
 * What every metalink representation of one origin file is built from: the file, its fresh
 * hashes (or none), and its download sources in the selection engine's order, then the origin
 * in a form it always delivers itself (src/lib/serve/delivery/origin-form.ts), so that the last
 * fallback never redirects to a mirror again.
 * Metalink 4 (RFC 5854), Metalink 3.0, hash files, Metalink/HTTP headers (RFC 6249) and the
 * mirror list all read this one shape, so they always agree.
 */
import {hashesFresh} from '../origin/freshness.js'
import {splitPieces, type StoredHashes} from '../origin/hash.js'
import {rangeHonouringFirst} from '../select/segmented.js'
import {encodePath} from '../select/url.js'
import type {Selection} from '../select/types.js'
import {withTrailingSlash} from '../text.js'
import {DEFAULT_ORIGIN_FALLBACK_MIRRORS} from '../serve/config.js'

/** Default cap on mirror URLs in a metalink (config `metalink.max_urls`). */
export const DEFAULT_MAX_URLS = 20

/** The generator string written into metalinks. */
const GENERATOR = 'mb/0.1.0'

/** Digests of a file, lower-case hex, present only when fresh. */
export interface DocumentHashes {
  md5: string
  sha1: string
  sha256: string
  /** Piece length in bytes. */
  pieceSize: number
  /** 'sha256' or 'sha1'. */
  pieceHash: 'sha256' | 'sha1'
  /** Piece digests, hex, concatenated (split with {@link pieceList}). */
  piecesHex: string
  /** Number of pieces (0 when no piece hashes are known). */
  pieceCount: number
  /** SHA-1 digests of the same pieces, hex, concatenated ('' when not known). */
  sha1PiecesHex: string
}

/** The piece digests of `hashes`, one hex string per piece, in order. */
function pieceList(hashes: DocumentHashes): string[] {
  return splitPieces(hashes.piecesHex, hashes.pieceHash)
}

/**
 * The one list of piece hashes the metalinks carry: SHA-1 (which libzypp, aria2c and wget2
 * all check; ./meta4.ts has why one list), from the index's SHA-1 pieces; a row without them
 * gives its own pieces. Undefined when no piece hashes are known.
 */
export function clientPieces(hashes: DocumentHashes): {type: 'sha1' | 'sha256'; digests: string[]} | undefined {
  if (hashes.pieceCount === 0 || hashes.pieceSize === 0) return undefined
  if (hashes.pieceHash !== 'sha1' && hashes.sha1PiecesHex.length === hashes.pieceCount * 40) return {type: 'sha1', digests: splitPieces(hashes.sha1PiecesHex, 'sha1')}
  return {type: hashes.pieceHash, digests: pieceList(hashes)}
}

/** One download source of the file. */
export interface Source {
  url: string
  /** 1 = most preferred (RFC 5854 §4.2.16), ascending. */
  priority: number
  /** ISO 3166-1 alpha-2, lower case, when known (RFC 5854 §4.2.16 `location`). */
  location?: string
  /** The mirror's identifier; undefined for the origin. */
  mirror?: string
}

/** Everything a metalink needs, built by {@link buildDocument}. */
export interface MetalinkDocument {
  /** Origin-relative path, no leading '/'. */
  path: string
  /** The file's name (basename of the path). */
  name: string
  /** Bytes. */
  size: number
  /** Unix seconds (UTC). */
  mtime: number
  /** Null when no fresh hashes are known. */
  hashes: DocumentHashes | null
  /** Mirrors in selection order (capped), then the origin's direct URL ({@link BuildOptions.originBase}) when fewer than {@link BuildOptions.originFallbackMirrors} mirrors are. */
  sources: Source[]
  /** The URL of the file on this server (which may redirect; the base of `.meta4`, `.torrent` and the other representations). */
  originUrl: string
  /** The URL of this file's .meta4 on this server (Metalink 4 `origin dynamic="true"`). */
  meta4Url: string
  /** The URL of this file's Metalink 3 document. */
  metalinkUrl: string
  /** The URL of this file's `.torrent` when it has current BitTorrent data (also `.magnet`, `.btih`); else undefined. */
  torrentUrl?: string
  /** The URL of this file's `.zsync` when it has current zsync sums; else undefined. */
  zsyncUrl?: string
  /** Whether the Metalink 4 document names {@link torrentUrl} in a `<metaurl>` (config `torrent.meta4_metaurl`). */
  torrentMetaurl?: boolean
  /** When the document was made. */
  published: Date
  generator: string
  /** The ASCII-armored detached OpenPGP signature of the file (./signature.ts), when one sits beside it. */
  signature?: string
}

/** {@link MetalinkDocument} as `mb metalink --json` prints it: snake_case keys, `published` in ISO 8601 UTC. */
export interface DocumentJson {
  path: string
  name: string
  size: number
  mtime: number
  hashes: {md5: string; sha1: string; sha256: string; piece_size: number; piece_hash: 'sha256' | 'sha1'; pieces_hex: string; piece_count: number} | null
  sources: Source[]
  origin_url: string
  meta4_url: string
  metalink_url: string
  published: string
  generator: string
}

/** The JSON form of `doc` (see {@link DocumentJson}). */
export function documentJson(doc: MetalinkDocument): DocumentJson {
  const h = doc.hashes
  return {
    path: doc.path,
    name: doc.name,
    size: doc.size,
    mtime: doc.mtime,
    hashes: h && {md5: h.md5, sha1: h.sha1, sha256: h.sha256, piece_size: h.pieceSize, piece_hash: h.pieceHash, pieces_hex: h.piecesHex, piece_count: h.pieceCount},
    sources: doc.sources,
    origin_url: doc.originUrl,
    meta4_url: doc.meta4Url,
    metalink_url: doc.metalinkUrl,
    published: doc.published.toISOString(),
    generator: doc.generator,
  }
}

export interface BuildOptions {
  /** Origin-relative path (no leading '/', not encoded). */
  path: string
  size: number
  /** Unix seconds (UTC). */
  mtime: number
  /** The file row's hash columns; used only when fresh. */
  stored: StoredHashes | null
  /** Whether the stored hashes are fresh. Default: computed with {@link hashesFresh} (row only). */
  hashesFresh?: boolean
  /** The selection for this client (ranked mirrors; none for origin-only files). */
  selection: Selection
  /** This server's public base URL, ending in '/', e.g. `https://download.example.org/`. */
  baseUrl: string
  /**
   * The base URL under which the origin itself delivers the tree, never redirecting
   * (`originBase()` of src/lib/serve/delivery/origin-form.ts): the last source. Default: `baseUrl`.
   */
  originBase?: string
  /** Cap on mirror URLs (default 20). */
  maxUrls?: number
  /**
   * The origin's direct URL ends the sources only when fewer mirrors than this are listed
   * (`serve.origin_fallback_mirrors`, default 2; always when none is): no client prefers the
   * origin while mirrors are healthy.
   */
  originFallbackMirrors?: number
  /**
   * The client formats with current data, `torrent` and `zsync` (the snapshot's `formats`
   * bits, read by the caller), and whether the meta4 names the torrent (`metaurl`).
   */
  formats?: {torrent: boolean; zsync: boolean; metaurl: boolean}
  now?: Date
  generator?: string
}

/** Fresh hashes from a stored row, or null. */
function documentHashes(stored: StoredHashes | null, fresh: boolean): DocumentHashes | null {
  if (!stored || !fresh || !stored.md5 || !stored.sha1 || !stored.sha256) return null
  const pieceHash = stored.piece_hash === 'sha1' ? 'sha1' : 'sha256'
  const pieces = stored.piece_size && stored.pieces ? stored.pieces : ''
  return {
    md5: stored.md5,
    sha1: stored.sha1,
    sha256: stored.sha256,
    pieceSize: stored.piece_size ?? 0,
    pieceHash,
    piecesHex: pieces,
    pieceCount: pieces.length / (pieceHash === 'sha1' ? 40 : 64),
    sha1PiecesHex: pieces && stored.sha1_pieces ? stored.sha1_pieces : '',
  }
}

/** The URL of `path` on the server at `baseUrl` (path percent-encoded, RFC 3986). */
export function originUrlFor(baseUrl: string, path: string): string {
  return withTrailingSlash(baseUrl) + encodePath(path)
}

/**
 * Builds the metalink document for one file and one client: the ranked mirrors of
 * `selection` (at most `maxUrls`, priority 1…N in selection order, mirrors that ignore Range
 * after the rest: ../select/segmented.ts) then, when N is below `originFallbackMirrors`, the
 * origin's direct URL (priority N+1, under `originBase`). An origin-delivered selection
 * (origin-only files, small files) lists only the origin. Hashes are included only when fresh.
 */
export function buildDocument(options: BuildOptions): MetalinkDocument {
  const maxUrls = options.maxUrls ?? DEFAULT_MAX_URLS
  const originUrl = originUrlFor(options.baseUrl, options.path)
  const sources: Source[] = []
  if (!options.selection.origin) {
    for (const candidate of rangeHonouringFirst(options.selection.ranked)) {
      if (sources.length >= maxUrls) break
      const country = candidate.mirror.country
      sources.push({url: candidate.url, priority: sources.length + 1, location: country ? country.toLowerCase() : undefined, mirror: candidate.mirror.identifier})
    }
  }
  if (sources.length < Math.max(1, options.originFallbackMirrors ?? DEFAULT_ORIGIN_FALLBACK_MIRRORS)) {
    sources.push({url: options.originBase === undefined ? originUrl : originUrlFor(options.originBase, options.path), priority: sources.length + 1})
  }
  const fresh = options.hashesFresh ?? hashesFresh(options.stored)
  const slash = options.path.lastIndexOf('/')
  return {
    path: options.path,
    name: slash >= 0 ? options.path.slice(slash + 1) : options.path,
    size: options.size,
    mtime: options.mtime,
    hashes: documentHashes(options.stored, fresh),
    sources,
    originUrl,
    meta4Url: `${originUrl}.meta4`,
    metalinkUrl: `${originUrl}.metalink`,
    torrentUrl: options.formats?.torrent ? `${originUrl}.torrent` : undefined,
    zsyncUrl: options.formats?.zsync ? `${originUrl}.zsync` : undefined,
    torrentMetaurl: options.formats ? options.formats.torrent && options.formats.metaurl : undefined,
    published: options.now ?? new Date(),
    generator: options.generator ?? GENERATOR,
  }
}
