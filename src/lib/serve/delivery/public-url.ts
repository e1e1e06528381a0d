/**
 * This server's own URLs, as the documents it writes name them: its public base URL
 * (`serve.public_url`, else the request's Host), and the base under which the origin itself
 * delivers the tree (`serve.origin_url`, else this server's origin form `BASE/_origin/`,
 * ./origin-form.ts), and below how many listed mirrors a metalink, a torrent's web seeds and
 * a magnet's `ws=` end with it. Metalinks, redirect headers and the dnf and apt lists all
 * build their absolute URLs here.
 */
import type {IncomingMessage} from 'node:http'
import {isPlainHost, withTrailingSlash} from '../../text.js'
import {DEFAULT_ORIGIN_FALLBACK_MIRRORS} from '../config.js'

/** The `X-MB-Origin-Reason` of a delivery in the origin form (./origin-form.ts). */
export const ORIGIN_FALLBACK_REASON = 'origin_fallback'

/** The reserved first path segment of the origin form (./origin-form.ts), with its slash. */
export const ORIGIN_PREFIX = '_origin/'

/** Distinct `Host` values whose base URL is kept (a client can send any plain host). */
const MAX_HOSTS = 256

/** The part of a request a base URL is made from. */
type RequestLike = Pick<IncomingMessage, 'headers' | 'socket'>

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
  private readonly originUrl: string | undefined
  private readonly http = new Map<string, string>()
  private readonly https = new Map<string, string>()
  /** The origin form's base by public base URL (a redirect builds no string for it). */
  private readonly origins = new Map<string, string>()

  /**
   * @param configured `serve.public_url`, e.g. `https://download.example.org/` (a trailing `/` is added)
   * @param originUrl `serve.origin_url`: a plain HTTP server of the origin tree, e.g. `https://origin.example.org/pub/`
   * @param originFallbackMirrors `serve.origin_fallback_mirrors`: metalinks, web seeds and `ws=` end with the origin's URL only below this many mirrors
   */
  constructor(
    configured?: string,
    originUrl?: string,
    readonly originFallbackMirrors = DEFAULT_ORIGIN_FALLBACK_MIRRORS,
  ) {
    this.configured = configured ? withTrailingSlash(configured) : undefined
    this.originUrl = originUrl ? withTrailingSlash(originUrl) : undefined
  }

  /** The base URL for `req`, received over TLS when `https` (e.g. `http://127.0.0.1:8080/`). */
  of(req: RequestLike, https: boolean): string {
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

  /**
   * The base URL (ending in '/') under which the origin itself delivers every file, never
   * redirecting: `serve.origin_url` when set, else {@link of} + `_origin/` (the origin form).
   * Every fallback list ends with a URL under it.
   */
  origin(req: RequestLike, https: boolean): string {
    return this.originUrl ?? this.originOf(this.of(req, https))
  }

  /** {@link origin} for the public base URL `base` (ending in '/'). */
  originOf(base: string): string {
    if (this.originUrl !== undefined) return this.originUrl
    let origin = this.origins.get(base)
    if (origin === undefined) {
      origin = base + ORIGIN_PREFIX
      if (this.origins.size < 2 * MAX_HOSTS) this.origins.set(base, origin)
    }
    return origin
  }
}
