/**
 * How the operator's pages (`/mirrors`, ./network-page.ts; `/mirrors/NAME`, ./mirror-page.ts)
 * are answered: one place for their headers.
 */
import type {RequestContext, RouteServices} from '../serve/delivery/route.js'

/**
 * Answers a page about the network (`/mirrors`, `/mirrors/NAME`): `200` with `body` as JSON or
 * self-contained HTML (a CSP that loads nothing), cacheable for a minute, the body left out
 * for HEAD; reported as `other`, since it is not a download.
 */
export function sendNetworkPage(services: Pick<RouteServices, 'finish'>, ctx: RequestContext, body: Buffer, json: boolean): void {
  const head = ctx.req.method === 'HEAD'
  ctx.res.writeHead(200, {
    'Content-Type': json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8',
    'Content-Length': body.length,
    'Cache-Control': 'public, max-age=60',
    Vary: 'Accept',
    'Content-Security-Policy': "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
  })
  ctx.res.end(head ? undefined : body)
  services.finish(ctx, 200, 'other', {bytesSent: head ? 0 : body.length})
}
