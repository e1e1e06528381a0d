/**
 * `304 Not Modified` for an indexed file that mirrors serve (RFC 9110 §13.1.3), answered by
 * the redirect path before any `302`.
 */
import type {FileEntry} from '../snapshot/file-entry.js'
import type {RequestContext, RouteServices} from './route.js'

/**
 * Answers `304 Not Modified` instead of a redirect when the request's `If-Modified-Since`
 * (RFC 9110 §13.1.3; a future one was dropped by ./conditional.ts) is at or after the indexed
 * version's mtime, as Mirrorbits does: a caching proxy that holds the file needs no round trip
 * to a mirror. A newer version keeps the redirect. With `If-None-Match` the date is ignored
 * (RFC 9110 §13.2.2) and the redirect stays: mb has no entity tag of its own for a version
 * that mirrors serve (each mirror sends its own). False when it did not answer.
 * @param server the server's `Server` header and report (`serverHeaders`, `finish`)
 */
export function notModified(server: Pick<RouteServices, 'finish'> & {serverHeaders(): Record<string, string>}, ctx: RequestContext, file: FileEntry): boolean {
  const headers = ctx.req.headers
  const since = headers['if-modified-since']
  if (since === undefined || headers['if-none-match'] !== undefined) return false
  const date = Date.parse(since)
  if (Number.isNaN(date) || Math.floor(date / 1000) < file.mtime) return false
  ctx.res.writeHead(304, {'Last-Modified': new Date(file.mtime * 1000).toUTCString(), 'Cache-Control': 'private, no-store', Vary: 'X-Forwarded-For, X-Forwarded-Proto', ...server.serverHeaders()})
  ctx.res.end()
  server.finish(ctx, 304, 'not_modified', {fileSize: file.size})
  return true
}
