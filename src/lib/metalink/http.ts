/**
 * HTTP answers for the metalink representations of an origin file. Each handler takes the
 * request, the response and a {@link MetalinkContext} (the document already built for this
 * client), writes the whole response (HEAD: headers only) and returns what it sent, so the
 * serve router only has to find the file and report the outcome.
 *
 * - Metalink 4: `application/metalink4+xml` (RFC 5854 §7), `Content-Disposition:
 *   attachment` with the file name (RFC 6266), `Vary: Accept` (the same URL answers
 *   differently by `Accept`).
 * - Metalink 3: `application/metalink+xml`.
 * - Hash files: `text/plain`, 404 when no fresh hash is known.
 * - Mirror list: HTML, or JSON with `Accept: application/json`; `Vary: Accept`.
 * Every answer is per client: `Cache-Control: private, no-store` (RFC 9111 §5.2.2).
 */
import type {IncomingMessage, ServerResponse} from 'node:http'
import Negotiator from 'negotiator'
import type {ClientInfo, Exclusion, Selection} from '../select/types.js'
import type {MetalinkDocument} from './document.js'
import {type HashKind, hashFileBody} from './headers.js'
import {META4_MEDIA_TYPE, meta4FilePart, meta4Head, meta4Tail} from './meta4.js'
import {METALINK3_MEDIA_TYPE, metalink3FilePart, metalink3Head, metalink3Tail} from './metalink3.js'
import {buildMirrorList, renderMirrorListHtml} from './mirrorlist.js'
import {wellFormed} from '../text.js'

/** What a handler needs about the file and the client. */
export interface MetalinkContext {
  doc: MetalinkDocument
  selection: Selection
  client: ClientInfo
  /** For the mirror list: the outdated copies this client may see (`outdatedCopies()` in ./mirrorlist.ts). */
  outdated?: readonly Exclusion[]
}

/** What a handler sent: HTTP status, outcome kind (RequestOutcome.outcome) and body bytes. */
export interface Sent {
  status: number
  outcome: 'meta4' | 'metalink' | 'hash' | 'mirrorlist' | 'not_found'
  bytesSent: number
}

const LIST_OFFERS = ['text/html', 'application/json']

/** The media type of `offers` an `Accept` header prefers (RFC 9110 §12.5.1, q-values honoured, `negotiator`), or undefined. */
function preferred(accept: string, offers: string[]): string | undefined {
  return new Negotiator({headers: {accept}}).mediaType(offers)
}

/** How an `Accept` header rates one media type: the q-value and specificity of its most specific matching range. */
interface Rating {
  q: number
  /** 3 the type itself, 2 a `type/` range with a wildcard subtype, 1 the full wildcard range, 0 no range matches (q 0 then). */
  specificity: number
}

/** {@link Rating} of `type` (lower case, `main/sub`) in `accept` (RFC 9110 §12.5.1). */
function rate(accept: string, type: string): Rating {
  const slash = type.indexOf('/')
  const main = type.slice(0, slash)
  let best: Rating = {q: 0, specificity: 0}
  for (const range of accept.split(',')) {
    const [mediaRange, ...params] = range.split(';')
    const [rangeMain, rangeSub] = mediaRange.trim().toLowerCase().split('/')
    const specificity = rangeMain === '*' && rangeSub === '*' ? 1 : rangeMain !== main ? 0 : rangeSub === '*' ? 2 : `${rangeMain}/${rangeSub}` === type ? 3 : 0
    if (specificity <= best.specificity) continue
    const qParam = params.map((p) => p.trim().toLowerCase()).find((p) => p.startsWith('q='))
    const q = qParam === undefined ? 1 : Number(qParam.slice(2))
    best = {q: Number.isFinite(q) ? Math.min(Math.max(q, 0), 1) : 0, specificity}
  }
  return best
}

/**
 * Which metalink an `Accept` header prefers to the file itself (RFC 9110 §12.5.1), or
 * undefined for the file: `meta4` (`application/metalink4+xml`) or `metalink` (Metalink 3,
 * `application/metalink+xml`), whichever has the higher q-value (then the more specific
 * range), Metalink 4 on a tie. A
 * metalink wins over the file when its q-value is higher, or equal and named more
 * specifically than the range that covers the file (aria2c's and zypper's full wildcard range
 * plus the metalink types at q=1); the wildcard range alone, or a type with `q=0` (refused), does not.
 * A header that names no metalink type is not parsed (the redirect's hot path).
 */
export function negotiatedMetalink(accept: string | undefined): 'meta4' | 'metalink' | undefined {
  if (accept === undefined || !/metalink/i.test(accept)) return undefined
  const v4 = rate(accept, META4_MEDIA_TYPE)
  const v3 = rate(accept, METALINK3_MEDIA_TYPE)
  const [kind, rating] = v4.q > v3.q || (v4.q === v3.q && v4.specificity >= v3.specificity) ? (['meta4', v4] as const) : (['metalink', v3] as const)
  if (rating.q === 0) return undefined
  const file = rate(accept, 'application/octet-stream')
  return rating.q > file.q || (rating.q === file.q && rating.specificity > file.specificity) ? kind : undefined
}

/** True when an `Accept` header prefers JSON to HTML (RFC 9110 §12.5.1; ties go to the type listed first). */
export function acceptsJson(accept: string | undefined): boolean {
  if (!accept || !/json/i.test(accept)) return false
  return preferred(accept, LIST_OFFERS) === 'application/json'
}

/**
 * `Content-Disposition: attachment` with the file name (RFC 6266 §4.3): an ASCII
 * `filename` fallback plus `filename*` (RFC 8187) when the name is not plain ASCII.
 */
export function contentDisposition(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\]/g, '_')
  if (ascii === name) return `attachment; filename="${name}"`
  const encoded = encodeURIComponent(wellFormed(name)).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`
}

/**
 * Writes the whole response: `body` as one string, or as parts written in turn without
 * joining them (strings as UTF-8, bytes as they are: a cached part is sent, not copied), in
 * one corked batch. HEAD: the headers only (`Content-Length` of the body all the same).
 * @returns the body bytes sent (0 for HEAD)
 */
export function writeBody(req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string>, body: string | ReadonlyArray<string | Uint8Array>): number {
  const parts = typeof body === 'string' ? [body] : body
  let length = 0
  for (const part of parts) length += typeof part === 'string' ? Buffer.byteLength(part, 'utf8') : part.length
  res.writeHead(status, {...headers, 'Content-Length': String(length)})
  if (req.method === 'HEAD') {
    res.end()
    return 0
  }
  res.cork() // end() uncorks: headers and parts leave in one writev
  for (let i = 0; i < parts.length - 1; i++) res.write(parts[i])
  res.end(parts[parts.length - 1])
  return length
}

const PRIVATE = 'private, no-store'

/**
 * Answers with the Metalink 4 document (RFC 5854): its head and tail made for this request,
 * `filePart` (the UTF-8 of {@link meta4FilePart} of `ctx.doc`, kept per file version by the
 * caller) between them.
 */
export function sendMeta4(req: IncomingMessage, res: ServerResponse, ctx: MetalinkContext, filePart: Uint8Array = Buffer.from(meta4FilePart(ctx.doc))): Sent {
  const bytesSent = writeBody(req, res, 200, {'Content-Type': META4_MEDIA_TYPE, 'Content-Disposition': contentDisposition(`${ctx.doc.name}.meta4`), Vary: 'Accept', 'Cache-Control': PRIVATE}, [
    meta4Head(ctx.doc),
    filePart,
    meta4Tail(ctx.doc),
  ])
  return {status: 200, outcome: 'meta4', bytesSent}
}

/** Answers with the Metalink 3.0 document, `filePart` (the UTF-8 of {@link metalink3FilePart}, kept per file version) as in {@link sendMeta4}. */
export function sendMetalink3(req: IncomingMessage, res: ServerResponse, ctx: MetalinkContext, filePart: Uint8Array = Buffer.from(metalink3FilePart(ctx.doc))): Sent {
  const bytesSent = writeBody(req, res, 200, {'Content-Type': METALINK3_MEDIA_TYPE, 'Content-Disposition': contentDisposition(`${ctx.doc.name}.metalink`), 'Cache-Control': PRIVATE}, [
    metalink3Head(ctx.doc),
    filePart,
    metalink3Tail(ctx.doc),
  ])
  return {status: 200, outcome: 'metalink', bytesSent}
}

/**
 * Answers with a hash file (`"<hex>  <name>\n"`, text/plain), or 404 when the file has no
 * fresh hashes (never yet hashed, or changed since).
 */
export function sendHashFile(req: IncomingMessage, res: ServerResponse, ctx: MetalinkContext, kind: HashKind): Sent {
  if (!ctx.doc.hashes) {
    const bytesSent = writeBody(
      req,
      res,
      404,
      {'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store'},
      `No current ${kind} hash of /${ctx.doc.path}: it has not been hashed since it last changed (run \`mb index --hashes\`).\n`,
    )
    return {status: 404, outcome: 'not_found', bytesSent}
  }
  const bytesSent = writeBody(req, res, 200, {'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-cache'}, hashFileBody(ctx.doc.hashes, kind, ctx.doc.name))
  return {status: 200, outcome: 'hash', bytesSent}
}

/** Answers with the mirror list: JSON for `Accept: application/json`, else HTML. */
export function sendMirrorList(req: IncomingMessage, res: ServerResponse, ctx: MetalinkContext): Sent {
  const list = buildMirrorList(ctx.doc, ctx.selection, ctx.client, ctx.outdated)
  const json = acceptsJson(req.headers.accept)
  const body = json ? `${JSON.stringify(list, null, 2)}\n` : renderMirrorListHtml(list)
  const bytesSent = writeBody(req, res, 200, {'Content-Type': json ? 'application/json; charset=utf-8' : 'text/html; charset=utf-8', Vary: 'Accept', 'Cache-Control': PRIVATE}, body)
  return {status: 200, outcome: 'mirrorlist', bytesSent}
}
