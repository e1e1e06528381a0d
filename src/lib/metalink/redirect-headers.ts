/**
 * The Metalink/HTTP header lines of a `302` redirect (RFC 6249 §6, RFC 3230 §4.3.2), for
 * `MirrorServer.addRedirectHeaders`, in this order:
 *   `Link: <BASE/PATH.meta4>; rel=describedby; type="application/metalink4+xml"` always;
 *   `Link: <BASE/PATH.torrent>; rel=describedby; type="application/x-bittorrent"` while the
 *   file has current BitTorrent data (and the server serves it);
 *   `Digest: SHA-256=…, MD5=…, SHA=…` only with fresh hashes (all three in the snapshot);
 *   `Link: <BASE/PATH.asc>; rel=describedby; type="application/pgp-signature"` when a
 *   detached signature is indexed beside the file (./signature.ts).
 *
 * None of these depends on the client beyond the base URL, so the lines are built once per
 * file version and base URL and kept in a bounded cache: a redirect then costs one `Map`
 * lookup and a few comparisons. The providers never stat the disk: `MirrorServer.currentFile`
 * has confirmed the disk's version before any redirect, and a changed file reaches them as
 * an entry without hashes.
 */
import type {IncomingMessage} from 'node:http'
import type {RedirectHeaderProvider} from '../serve/server.js'
import {FORMAT_TORRENT, type FileEntry} from '../serve/snapshot.js'
import {isPlainHost, withTrailingSlash} from '../text.js'
import {originUrlFor} from './document.js'
import {describedByLink, digestHeader} from './headers.js'
import {signatureLink} from './signature.js'
import {TORRENT_MEDIA_TYPE} from './torrent.js'

/** Distinct `Host` values whose base URL is kept (a client can send any plain host). */
const MAX_HOSTS = 256

/**
 * The public base URL of this server for a request, ending in `/`: the configured one, else
 * the request's `Host` when it is a plain `host[:port]` ({@link isPlainHost}), else the
 * address the request came in on (IPv6 in brackets, RFC 3986 §3.2.2). A Host with any other
 * character is the client's and would land in a `Link` header and the document: it is not
 * used. Base URLs by Host are kept (at most {@link MAX_HOSTS} per scheme) so that a redirect
 * builds no string for it.
 */
export class BaseUrls {
  private readonly configured: string | undefined
  private readonly http = new Map<string, string>()
  private readonly https = new Map<string, string>()

  /** @param configured `serve.public_url`, e.g. `https://download.example.org/` (a trailing `/` is added) */
  constructor(configured?: string) {
    this.configured = configured ? withTrailingSlash(configured) : undefined
  }

  /** The base URL for `req`, received over TLS when `https` (e.g. `http://127.0.0.1:8080/`). */
  of(req: Pick<IncomingMessage, 'headers' | 'socket'>, https: boolean): string {
    if (this.configured !== undefined) return this.configured
    const header = req.headers.host
    const known = https ? this.https : this.http
    if (header !== undefined) {
      const cached = known.get(header)
      if (cached !== undefined) return cached
      if (isPlainHost(header)) {
        const base = `${https ? 'https' : 'http'}://${header}/`
        if (known.size < MAX_HOSTS) known.set(header, base)
        return base
      }
    }
    const {localAddress, localPort} = req.socket
    return `${https ? 'https' : 'http'}://${localAddress?.includes(':') ? `[${localAddress}]` : localAddress}:${localPort}/`
  }
}

/** The header lines of one file version under one base URL, and what they were built from. */
interface CachedLines {
  size: number
  mtime: number
  md5: string | null
  sha1: string | null
  sha256: string | null
  signature: string | null | undefined
  torrent: boolean
  base: string
  /** Flat name, value, name, value… as `writeHead` takes them. */
  lines: string[]
}

export interface RedirectHeaderOptions {
  /** The public base URL (`serve.public_url`); default: from the request's Host. */
  baseUrl?: string
  /** Whether `.torrent` files are served (a FormatStore is configured): only then the torrent `Link`. */
  torrents?: boolean
  /** File versions whose lines are kept (default 10,000; the oldest entry goes first). */
  cacheSize?: number
}

/**
 * The Metalink/HTTP redirect headers of one server (see the file comment): {@link provider}
 * is the {@link RedirectHeaderProvider} to register.
 */
export class MetalinkRedirectHeaders {
  private readonly cache = new Map<string, CachedLines>()
  private readonly max: number
  private readonly torrents: boolean
  readonly baseUrls: BaseUrls

  constructor(options: RedirectHeaderOptions = {}) {
    this.baseUrls = new BaseUrls(options.baseUrl)
    this.torrents = options.torrents === true
    this.max = Math.max(1, options.cacheSize ?? 10_000)
  }

  /** Pushes the lines for `file` (its indexed version, confirmed on disk by the server) onto `headers`. */
  readonly provider: RedirectHeaderProvider = (headers, ctx, file, client) => {
    const lines = this.lines(file, this.baseUrls.of(ctx.req, client.https))
    for (let i = 0; i < lines.length; i++) headers.push(lines[i])
  }

  /**
   * The flat header lines of `file` under `base`: cached by path, valid while the path's size,
   * mtime, hashes, signature, torrent data and base URL are the ones they were built from (a
   * new file version, a rehash or another Host builds them anew). Fields are read, never
   * copied: the entry may be a compact view.
   */
  lines(file: FileEntry, base: string): string[] {
    const path = file.path
    const md5 = file.md5
    const sha1 = file.sha1
    const sha256 = file.sha256
    const signature = file.signature
    const torrent = this.torrents && ((file.formats ?? 0) & FORMAT_TORRENT) !== 0
    const cached = this.cache.get(path)
    if (
      cached !== undefined &&
      cached.size === file.size &&
      cached.mtime === file.mtime &&
      cached.sha256 === sha256 &&
      cached.md5 === md5 &&
      cached.sha1 === sha1 &&
      cached.signature === signature &&
      cached.torrent === torrent &&
      cached.base === base
    )
      return cached.lines
    const url = originUrlFor(base, path)
    const lines = ['Link', describedByLink(`${url}.meta4`)]
    if (torrent) lines.push('Link', `<${url}.torrent>; rel=describedby; type="${TORRENT_MEDIA_TYPE}"`)
    if (md5 !== null && sha1 !== null && sha256 !== null) lines.push('Digest', digestHeader({md5, sha1, sha256}))
    if (signature) lines.push('Link', signatureLink(originUrlFor(base, path + signature)))
    if (cached !== undefined) this.cache.delete(path)
    else if (this.cache.size >= this.max) this.cache.delete(this.cache.keys().next().value as string)
    this.cache.set(path, {size: file.size, mtime: file.mtime, md5, sha1, sha256, signature, torrent, base, lines})
    return lines
  }
}
