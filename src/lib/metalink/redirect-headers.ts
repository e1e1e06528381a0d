/**
 * The Metalink/HTTP header lines of a `302` redirect (RFC 6249 §6, RFC 3230 §4.3.2), for
 * `MirrorServer.addRedirectHeaders`, in this order (no `rel=duplicate` to the origin: a
 * redirect names at least one mirror, and Metalink/HTTP clients may use every duplicate like
 * any other source, so the origin would carry what mirrors can; docs/selection.md, "No
 * client prefers the origin"):
 *   `Link: <BASE/PATH.meta4>; rel=describedby; type="application/metalink4+xml"` always;
 *   `Link: <BASE/PATH.torrent>; rel=describedby; type="application/x-bittorrent"` while the
 *   file has current BitTorrent data (and the server serves it);
 *   `Digest: SHA-256=…, MD5=…, SHA=…` only with fresh hashes (all three in the snapshot);
 *   `Link: <BASE/PATH.asc>; rel=describedby; type="application/pgp-signature"` when a
 *   detached signature is indexed beside the file (./signature.ts).
 *
 * None of these depends on the client beyond the base URLs, so the lines are built once per
 * file version and base URLs and kept in the bounded {@link VersionCache}: a redirect then
 * costs one lookup and a few comparisons (the digests are compared by their id, not read). The providers never stat the disk: `MirrorServer.currentFile`
 * has confirmed the disk's version before any redirect, and a changed file reaches them as
 * an entry without hashes.
 */
import type {BaseUrls} from '../serve/delivery/public-url.js'
import type {RedirectHeaderProvider} from '../serve/delivery/route.js'
import {FORMAT_TORRENT, type FileEntry} from '../serve/snapshot/file-entry.js'
import {originUrlFor} from './document.js'
import {describedByLink, digestHeader} from './headers.js'
import {signatureLink} from './signature.js'
import {TORRENT_MEDIA_TYPE} from './torrent.js'
import {type CacheBudget, VersionCache} from './version-cache.js'

/** The header lines of one file version under one base URL, and what else they were built from. */
interface CachedLines {
  signature: string | null | undefined
  torrent: boolean
  base: string
  /** Flat name, value, name, value… as `writeHead` takes them. */
  lines: string[]
}

export interface RedirectHeaderOptions {
  /** The base URLs by request, shared with the metalink routes (the same documents are linked). */
  baseUrls: BaseUrls
  /** Whether `.torrent` files are served (the metalink routes have a format store): only then the torrent `Link`. */
  torrents: boolean
  /** File versions whose lines are kept, and the bytes they may take (./version-cache.ts; the least recently used goes first). */
  cache: CacheBudget
}

/**
 * The Metalink/HTTP redirect headers of one server (see the file comment): {@link provider}
 * is the {@link RedirectHeaderProvider} to register.
 */
export class MetalinkRedirectHeaders {
  private readonly cache: VersionCache<CachedLines>
  private readonly torrents: boolean
  readonly baseUrls: BaseUrls

  constructor(options: RedirectHeaderOptions) {
    this.baseUrls = options.baseUrls
    this.torrents = options.torrents
    this.cache = new VersionCache(options.cache)
  }

  /** Pushes the lines for `file` (its indexed version, confirmed on disk by the server) onto `headers`. */
  readonly provider: RedirectHeaderProvider = (headers, ctx, file, client) => {
    const lines = this.lines(file, this.baseUrls.of(ctx.req, client.https))
    for (let i = 0; i < lines.length; i++) headers.push(lines[i])
  }

  /**
   * The flat header lines of `file` under `base`: kept per file version ({@link VersionCache}:
   * size, mtime, hashes, formats), valid while the signature, torrent data and base URL are the
   * ones they were built from (a new file version, a rehash or another Host builds them anew).
   */
  lines(file: FileEntry, base: string): string[] {
    const signature = file.signature
    const torrent = this.torrents && ((file.formats ?? 0) & FORMAT_TORRENT) !== 0
    const cached = this.cache.get(file)
    if (cached !== undefined && cached.signature === signature && cached.torrent === torrent && cached.base === base) return cached.lines
    const path = file.path
    const url = originUrlFor(base, path)
    const lines = ['Link', describedByLink(`${url}.meta4`)]
    if (torrent) lines.push('Link', `<${url}.torrent>; rel=describedby; type="${TORRENT_MEDIA_TYPE}"`)
    const {md5, sha1, sha256} = file
    if (md5 !== null && sha1 !== null && sha256 !== null) lines.push('Digest', digestHeader({md5, sha1, sha256}))
    if (signature) lines.push('Link', signatureLink(originUrlFor(base, path + signature)))
    let bytes = 64
    for (let i = 0; i < lines.length; i++) bytes += lines[i].length
    this.cache.set(file, {signature, torrent, base, lines}, bytes)
    return lines
  }
}
