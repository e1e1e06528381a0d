/**
 * The origin form of a path: `BASE/_origin/PATH` is delivered by the origin itself when no
 * eligible mirror holds the file, or within the origin's budget (`serve.origin_budget`,
 * ./origin-budget.ts); over it, a file a mirror holds gets the `302` a request for `BASE/PATH`
 * would get, so the form is no bypass that takes the tree from the origin at scale. apt's
 * `mirrors.txt` and dnf's metalink and mirror list end with it, and Metalink 4 and 3, a
 * torrent's `url-list` and a magnet's `ws=` do when they list fewer than
 * `serve.origin_fallback_mirrors` mirrors: a client that has tried the mirrors lands on bytes.
 * With `serve.origin_url` set (a plain HTTP server of the origin tree) the lists end with
 * that URL instead (mb does not meter or budget it).
 *
 * A path prefix rather than a query marker, because apt and dnf append file names to the
 * base URLs of their lists. The form serves what a plain origin HTTP server would (as
 * MirrorBrain and Mirrorbits expose the origin): regular files inside the root, symlinks as
 * the index recorded them, Range and conditional requests; no directory index and no
 * metalink representations. Ordinary requests are not affected: `select.min_size`, the
 * origin exceptions and the redirect rules keep deciding them. Deliveries in this form are
 * counted like any other (`X-MB-Origin-Reason: origin_fallback`, meter reason `fallback`). The URLs are built by
 * `BaseUrls.origin()` (./public-url.ts).
 */
import {ORIGIN_FALLBACK_REASON, ORIGIN_PREFIX} from './public-url.js'
import type {RequestContext, Route, RouteServices} from './route.js'

/** The origin-relative path a request in the origin form names ('' for the prefix alone), or undefined. */
function originTarget(ctx: Pick<RequestContext, 'path'>): string | undefined {
  const path = ctx.path
  if (path.startsWith(ORIGIN_PREFIX)) return path.slice(ORIGIN_PREFIX.length)
  return path === ORIGIN_PREFIX.slice(0, -1) ? '' : undefined
}

/**
 * The route of the origin form (register it first): a file is delivered from the origin,
 * anything else gets 404. The request is reported under the file's own path.
 */
export function originRoute(server: RouteServices): Route<string> {
  return {
    name: 'origin',
    match: originTarget,
    handle: async (ctx, path) => {
      const file = ctx.slash || path === '' ? undefined : ctx.snapshot.lookup(path)
      ctx.path = file?.path ?? path
      ctx.file = file
      const onDisk = ctx.slash || path === '' ? undefined : await server.resolveOnDisk(ctx.path)
      if (onDisk === undefined || onDisk.directory) {
        return server.plain(ctx, 404, 'not_found', `Not found: /${ORIGIN_PREFIX}${path}${ctx.slash ? '/' : ''} (the origin form serves files only)`)
      }
      if (file !== undefined) return server.originFallback(ctx, file, onDisk.real)
      return server.deliver(ctx, ORIGIN_FALLBACK_REASON, onDisk.real)
    },
  }
}
