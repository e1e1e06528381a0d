/**
 * Signed mirror URLs: a mirror that serves only URLs carrying a token with an expiry (nginx's
 * `secure_link` module, CDN token auth) gets every URL mb hands out for it signed: redirects,
 * `Link` alternatives, metalinks and torrents' web seeds (the ranked candidates' URLs,
 * select/rank.ts), and the URLs probes, scans and content checks request. Repository lists that
 * clients append file names to (apt's `mirrors.txt`, dnf's lists) cannot carry a per-file
 * token, so a signing mirror is left out of them.
 *
 * Scheme `nginx_secure_link_md5` (nginx documentation, ngx_http_secure_link_module) with the
 * mirror's configuration
 *
 * ```nginx
 * secure_link $arg_md5,$arg_expires;
 * secure_link_md5 "$secure_link_expires$uri SECRET";
 * if ($secure_link = "")  { return 403; }
 * if ($secure_link = "0") { return 410; }
 * ```
 *
 * appends `?md5=B64&expires=T` to the URL, where T is the expiry (Unix seconds) and B64 the
 * base64url MD5 (no padding) of T, the URL's decoded path (nginx's `$uri`), a space and the
 * secret. T is rounded up to the minute, so one mirror and path give one URL per minute.
 */
import {createHash} from 'node:crypto'

/** The signing schemes `mb mirror add|edit --sign` accepts. */
export const SIGN_SCHEMES = ['nginx_secure_link_md5'] as const

/** Shortest secret accepted, in characters: a guessable secret signs for anyone. */
export const MIN_SECRET_LENGTH = 16

/** Default lifetime of a signed URL, seconds (`--sign-ttl`): long enough for a DVD over a slow link. */
export const DEFAULT_SIGN_TTL_SECONDS = 6 * 3600

/**
 * Signs an absolute http(s) URL without a query (`url`), valid until about `ttl` seconds after
 * `nowSeconds` (Unix seconds; default the clock).
 */
export type UrlSigner = (url: string, nowSeconds?: number) => string

/** The decoded path of an absolute URL without query or fragment, as nginx's `$uri` has it. */
function uriPath(url: string): string {
  const start = url.indexOf('/', url.indexOf('//') + 2)
  const path = start < 0 ? '/' : url.slice(start)
  try {
    return decodeURIComponent(path)
  } catch {
    return path
  }
}

/**
 * The signer of a mirror's settings, or null when it signs nothing (`scheme` null). The
 * scheme and secret are checked when stored (../mirrors/validate.ts); an unknown scheme here
 * (a row edited in SQL) signs nothing.
 * @param ttlSeconds how long a signed URL stays valid (> 0)
 */
export function compileSigner(scheme: string | null | undefined, secret: string | null | undefined, ttlSeconds: number | null | undefined): UrlSigner | null {
  if (scheme !== 'nginx_secure_link_md5' || !secret) return null
  const ttl = ttlSeconds && ttlSeconds > 0 ? ttlSeconds : DEFAULT_SIGN_TTL_SECONDS
  return (url, nowSeconds = Date.now() / 1000) => {
    const expires = Math.ceil((nowSeconds + ttl) / 60) * 60
    const md5 = createHash('md5')
      .update(`${expires}${uriPath(url)} ${secret}`)
      .digest('base64url')
    return `${url}${url.includes('?') ? '&' : '?'}md5=${md5}&expires=${expires}`
  }
}

/** `url` as a client requests it from a mirror: signed by `sign` when the mirror signs its URLs, else as it is. */
export function signedUrl(sign: UrlSigner | ((url: string) => string) | undefined, url: URL): URL | string {
  return sign ? sign(url.href) : url
}
