/**
 * The request's conditional headers as RFC 9110 lets a server believe them: an
 * `If-Modified-Since` that is no valid HTTP-date, or one later than the server's clock, is
 * ignored (§13.1.3: "A date which is later than the server's current time is invalid"). A
 * client or cache with a clock ahead (or an attacker) would otherwise get `304 Not Modified`
 * for every version, the next ones too, from the redirect path and from local delivery alike.
 */
import type {IncomingHttpHeaders} from 'node:http'

/**
 * Removes `If-Modified-Since` from the request's headers when it is not a date at or before
 * `nowMs` (ms since the epoch, default the clock; compared in whole seconds, as HTTP-dates
 * are), so that every later step (the redirect's 304, `send`'s, the retry step) sees a request
 * without it.
 * @returns `req`, for use in the request handler's call
 */
export function dropInvalidIfModifiedSince<T extends {headers: IncomingHttpHeaders}>(req: T, nowMs = Date.now()): T {
  const since = req.headers['if-modified-since']
  if (since === undefined) return req
  const date = Date.parse(since)
  if (Number.isNaN(date) || Math.floor(date / 1000) > Math.floor(nowMs / 1000)) delete req.headers['if-modified-since']
  return req
}
