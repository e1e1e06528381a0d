/**
 * The HTTP lister: walks a mirror's directory indexes over HTTP(S) with undici and yields the
 * {@link ListingEntry} stream the reconciler consumes.
 *
 * - Index formats: see http-listing.ts (nginx HTML/JSON/XML, Apache, lighttpd, styled indexes
 *   with plain links). The format is chosen by Content-Type (JSON, XML) or else HTML.
 * - Directories are fetched breadth-first, `concurrency` at a time (default 4), over one
 *   keep-alive undici Agent per listing; entries are yielded as each directory arrives, and no
 *   new directory is fetched while the consumer is not reading (back-pressure).
 * - Redirects (RFC 9110 section 15.4): the base URL may redirect within its own origin (the
 *   final URL becomes the base); a redirect to another scheme, host or port is an MbError
 *   ("HTTP base URL … redirects to ftp://…; refusing to scan"). A subdirectory that redirects
 *   out of the base tree is skipped with a warning, like a symlink leaving the tree.
 * - A directory answering 503 or 429 (busy) is retried a few times (Retry-After, else backoff).
 * - A subdirectory answering 403/404/410 is skipped with a warning (unreadable or vanished);
 *   the `subdir` start folder answering 404/410 while the base URL answers is SCAN_DIR_ABSENT;
 *   any other failure (5xx, timeout, reset) fails the whole listing, because a partial listing
 *   would make files look missing.
 * - Symlinks cannot be seen over HTTP: a symlinked directory is listed under the link's path;
 *   loops are cut when a directory's listing is identical to one of its ancestors', and at
 *   `maxDepth`.
 * - Sizes shown rounded (`1.2K`) give `sizeApproximate` entries with a [sizeMin, sizeMax] range;
 *   with `exactSizes: 'head'` such files get a HEAD request and its Content-Length instead.
 * - rsync's `.~tmp~` directories are skipped. Credentials in the URL are sent as HTTP Basic
 *   authentication (RFC 7617) and never appear in messages.
 */
import {setTimeout as sleep} from 'node:timers/promises'
import {signedUrl} from '../sign.js'
import {createHash} from 'node:crypto'
import pLimit from 'p-limit'
import {Agent, request, type Dispatcher} from 'undici'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import {canonicalPath, HtmlIndexParser, parseJsonIndex, parseXmlIndex, type IndexEntry} from './http-listing.js'
import type {ListOptions, Lister, ListingEntry} from './types.js'

export interface HttpListerOptions {
  /** Directories fetched in parallel (default 4). */
  concurrency?: number
  /** Deepest directory level walked below the base (default 64). */
  maxDepth?: number
  /** `never` (default): keep rounded index sizes as ranges; `head`: HEAD each such file for its exact size. */
  exactSizes?: 'never' | 'head'
  /** Accept any TLS certificate on https:// mirrors (self-signed, expired, other name). Off by default. */
  allowSelfSigned?: boolean
  /** Sent as User-Agent (default `mb-scan`). */
  userAgent?: string
  /** Called with non-fatal findings (skipped subdirectory, redirect out of the tree, loop). */
  onWarning?: (message: string) => void
}

/** Default connect and idle timeouts, seconds. */
const HTTP_DEFAULT_CONNECT_TIMEOUT = 30
const HTTP_DEFAULT_IO_TIMEOUT = 60
const MAX_REDIRECTS = 5
/** Retries of a directory answering 503 or 429 (busy), with Retry-After or 0.1, 0.2, 0.4… s between. */
const MAX_BUSY_RETRIES = 6
const TMP_DIR = '.~tmp~'
/** Largest index page read when the caller sets no `maxIndexBytes`: 64 MiB (about 500,000 entries of nginx HTML). */
const DEFAULT_MAX_INDEX_BYTES = 64 * 1024 * 1024

/** Creates the HTTP lister (protocol `http`, for http:// and https:// base URLs). */
export function createHttpLister(options: HttpListerOptions = {}): Lister {
  return {
    protocol: 'http',
    list: (baseUrl, listOptions) => listHttp(baseUrl, listOptions, options),
  }
}

interface DirTask {
  /** Path relative to the base ('' for the base). */
  rel: string
  url: URL
  depth: number
  /** Listing fingerprints of the ancestors (loop detection). */
  ancestors: string[]
}

interface DirResult {
  task: DirTask
  entries: IndexEntry[]
  /** Final URL after redirects (children resolve against it). */
  url: URL
  fingerprint: string
}

/** Parsed base URL: credentials split off, path ending in '/'. */
function parseBase(baseUrl: string): {url: URL; auth?: string; display: string} {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new MbError(`Not a valid HTTP URL: ${redact(baseUrl)}; expected http(s)://host[:port]/path/`, {code: 'SCAN_BAD_URL'})
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new MbError(`Not an HTTP URL: ${redact(baseUrl)}; expected http:// or https://`, {code: 'SCAN_BAD_URL'})
  }
  let auth: string | undefined
  if (url.username || url.password) {
    auth = 'Basic ' + Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString('base64')
    url.username = ''
    url.password = ''
  }
  url.search = ''
  url.hash = ''
  if (!url.pathname.endsWith('/')) url.pathname += '/'
  return {url, auth, display: url.href}
}

/** The connection pool of one listing: `concurrency` directories at a time plus a HEAD, time limits in ms. */
function listingAgent(concurrency: number, connectTimeout: number, ioTimeout: number, allowSelfSigned: boolean): Agent {
  return new Agent({
    connections: concurrency + 1,
    connect: {timeout: connectTimeout, rejectUnauthorized: !allowSelfSigned},
    headersTimeout: ioTimeout,
    bodyTimeout: ioTimeout,
    keepAliveTimeout: 10_000,
  })
}

/** Walks the tree from the base URL (or `subdir` below it), fetching up to `concurrency` directories at a time. */
async function* listHttp(baseUrl: string, listOptions: ListOptions, options: HttpListerOptions): AsyncGenerator<ListingEntry> {
  const base = parseBase(baseUrl)
  const concurrency = Math.max(1, options.concurrency ?? 4)
  // A one-folder listing enters no subdirectory: depth 0 only, and nothing to warn about.
  const maxDepth = listOptions.recursive === false ? 0 : (options.maxDepth ?? 64)
  const warn = options.onWarning ?? (() => {})
  const connectTimeout = (listOptions.connectTimeoutSeconds ?? HTTP_DEFAULT_CONNECT_TIMEOUT) * 1000
  const ioTimeout = (listOptions.ioTimeoutSeconds ?? HTTP_DEFAULT_IO_TIMEOUT) * 1000
  const subdir = (listOptions.subdir ?? '').split('/').filter((s) => s !== '' && s !== '.')
  if (subdir.includes('..')) throw new MbError(`Subdirectory "${listOptions.subdir}" must not contain ".."`, {code: 'SCAN_BAD_SUBDIR'})
  const agent = listingAgent(concurrency, connectTimeout, ioTimeout, options.allowSelfSigned === true)
  const controller = new AbortController()
  const outer = listOptions.signal
  const onAbort = () => controller.abort(outer?.reason)
  outer?.addEventListener('abort', onAbort, {once: true})
  const headers: Record<string, string> = {'user-agent': options.userAgent ?? 'mb-scan', accept: 'text/html, application/json;q=0.9, */*;q=0.5'}
  if (base.auth) headers.authorization = base.auth
  const heads = pLimit(concurrency)
  const ctx: FetchContext = {
    agent,
    headers,
    signal: controller.signal,
    ioTimeout,
    connectTimeout,
    warn,
    display: base.display,
    outerSignal: outer,
    maxIndexBytes: listOptions.maxIndexBytes ?? DEFAULT_MAX_INDEX_BYTES,
    sign: listOptions.sign,
  }

  // The base may redirect within its origin; the final URL is the tree's root from then on.
  let root = base.url
  const startUrl = new URL(subdir.map((s) => encodeURIComponent(s) + '/').join(''), root)
  const inflight = new Map<number, Promise<{id: number; result?: DirResult; error?: unknown}>>()
  let nextId = 0
  const queue: DirTask[] = []
  let head = 0 // next task to start (an index, not shift(): the queue can hold 100,000s of directories)
  const start = (task: DirTask) => {
    const id = nextId++
    const p = fetchDirectory(task, root, ctx, options, heads).then(
      (result) => ({id, result}),
      (error: unknown) => ({id, error}),
    )
    inflight.set(id, p)
  }

  try {
    outer?.throwIfAborted()
    // The first directory alone: it settles the root after redirects and fails loudly.
    const first = await fetchDirectory({rel: subdir.join('/'), url: startUrl, depth: 0, ancestors: []}, root, ctx, options, heads, true)
    if (!first) return
    if (subdir.length === 0) root = first.url
    const handle = (result: DirResult) => directoryEntries(result, queue, maxDepth, warn)
    yield* handle(first)
    while (head < queue.length || inflight.size > 0) {
      while (head < queue.length && inflight.size < concurrency) {
        start(queue[head])
        queue[head++] = undefined as unknown as DirTask // let started tasks be collected
      }
      const done = await Promise.race(inflight.values())
      inflight.delete(done.id)
      if (done.error !== undefined) throw done.error
      if (done.result) yield* handle(done.result)
    }
  } catch (error) {
    if (error instanceof MbError) throw error
    throw mapHttpError(error, ctx, base.display)
  } finally {
    outer?.removeEventListener('abort', onAbort)
    controller.abort()
    for (const p of inflight.values()) p.catch(() => {})
    await agent.destroy().catch(() => {})
  }
}

/** The entries of one fetched directory; its subdirectories no deeper than `maxDepth` are queued. */
function* directoryEntries(result: DirResult, queue: DirTask[], maxDepth: number, warn: (m: string) => void): Generator<ListingEntry> {
  for (const e of result.entries) {
    if (e.name === TMP_DIR) continue
    const rel = result.task.rel === '' ? e.name : `${result.task.rel}/${e.name}`
    const out: ListingEntry = {path: rel, type: e.type, size: e.size}
    if (e.mtime !== undefined) Object.assign(out, {mtime: e.mtime, mtimePrecision: e.mtimePrecision})
    if (e.sizeApproximate) Object.assign(out, {sizeApproximate: true, sizeMin: e.sizeMin, sizeMax: e.sizeMax})
    yield out
    if (e.type === 'dir') {
      if (result.task.depth + 1 > maxDepth) {
        if (maxDepth > 0) warn(`HTTP directory ${rel}/ is deeper than ${maxDepth} levels; skipped`)
        continue
      }
      queue.push({rel, url: new URL(encodeURIComponent(e.name) + '/', result.url), depth: result.task.depth + 1, ancestors: [...result.task.ancestors, result.fingerprint]})
    }
  }
}

interface FetchContext {
  agent: Agent
  headers: Record<string, string>
  signal: AbortSignal
  outerSignal?: AbortSignal
  ioTimeout: number
  connectTimeout: number
  sign?: (url: string) => string
  warn: (m: string) => void
  display: string
  /** Largest index page read, bytes. */
  maxIndexBytes: number
}

function sameOrigin(a: URL, b: URL): boolean {
  return a.protocol === b.protocol && a.host === b.host
}

function within(url: URL, root: URL): boolean {
  return canonicalPath(url.pathname).startsWith(canonicalPath(root.pathname))
}

/**
 * Fetches and parses one directory index, following redirects within the tree.
 * @returns undefined when the (non-base) directory is skipped.
 */
async function fetchDirectory(task: DirTask, root: URL, ctx: FetchContext, options: HttpListerOptions, heads: ReturnType<typeof pLimit>, isBase = false): Promise<DirResult | undefined> {
  let url = task.url
  let busyRetries = 0
  for (let hop = 0; ; hop++) {
    let res: Dispatcher.ResponseData
    try {
      res = await request(signedUrl(ctx.sign, url), {method: 'GET', dispatcher: ctx.agent, headers: ctx.headers, signal: ctx.signal})
    } catch (error) {
      throw mapHttpError(error, ctx, url.href)
    }
    const status = res.statusCode
    if (status >= 300 && status < 400 && status !== 304) {
      await res.body.dump().catch(() => {})
      const location = res.headers.location
      const loc = typeof location === 'string' ? location : Array.isArray(location) ? location[0] : undefined
      if (!loc) throw new MbError(`HTTP ${status} without a Location header for ${url.href}`, {code: 'SCAN_HTTP'})
      let next: URL
      try {
        next = new URL(loc, url)
      } catch {
        throw new MbError(`HTTP ${status} for ${url.href} has an invalid Location "${redact(loc)}"`, {code: 'SCAN_HTTP'})
      }
      if (!sameOrigin(next, url)) {
        const message = `HTTP ${isBase ? 'base URL' : 'directory'} ${url.href} redirects to ${redact(next.href)}; refusing to scan`
        if (isBase) throw new MbError(`${message} (a redirect to another scheme, host or port is not this mirror's tree; fix the mirror's HTTP URL)`, {code: 'SCAN_REDIRECT'})
        ctx.warn(`${message} it (outside the mirror's tree)`)
        return undefined
      }
      if (!isBase && !within(next, root)) {
        ctx.warn(`HTTP directory ${url.href} redirects to ${next.href}, outside the mirror's tree; skipped`)
        return undefined
      }
      if (hop + 1 >= MAX_REDIRECTS) throw new MbError(`HTTP ${url.href}: more than ${MAX_REDIRECTS} redirects; refusing to scan`, {code: 'SCAN_REDIRECT'})
      next.search = ''
      next.hash = ''
      if (!next.pathname.endsWith('/')) next.pathname += '/'
      url = next
      continue
    }
    if ((status === 503 || status === 429) && busyRetries < MAX_BUSY_RETRIES) {
      // Busy (lighttpd answers 503 while too many listings are being built): wait and retry.
      await res.body.dump().catch(() => {})
      const retryAfter = Number(res.headers['retry-after'])
      const delay = Number.isFinite(retryAfter) && retryAfter >= 0 ? Math.min(retryAfter, 10) * 1000 : 100 * 2 ** busyRetries
      busyRetries++
      hop--
      // An abort rejects with the signal's reason, as the requests do, for mapHttpError to name it.
      await sleep(delay, undefined, {signal: ctx.signal}).catch(() => Promise.reject(ctx.signal.reason))
      continue
    }
    if (status !== 200) {
      await res.body.dump().catch(() => {})
      if (status === 401) throw new MbError(`HTTP ${isBase ? 'base URL' : 'directory'} ${url.href} requires authentication (401); put the credentials in the mirror's HTTP URL`, {code: 'SCAN_AUTH'})
      if (isBase && task.rel !== '' && (status === 404 || status === 410)) throw await absentOrMissing(root, url, status, ctx)
      if (!isBase && (status === 403 || status === 404 || status === 410)) {
        ctx.warn(`HTTP directory ${url.href} answered ${status}; skipped`)
        return undefined
      }
      const hint = isBase && (status === 403 || status === 404) ? `; check the mirror's HTTP URL and that directory indexes are enabled` : ''
      throw new MbError(`HTTP ${isBase ? 'base URL' : 'directory'} ${url.href} answered ${status}${hint}`, {code: isBase && status === 404 ? 'SCAN_BASE_MISSING' : 'SCAN_HTTP'})
    }
    return directoryResult(task, res, url, ctx, options, heads)
  }
}

/**
 * The error for a `--dir` start folder answering 404/410. One request to the mirror's base URL
 * tells the two cases apart: the base answers (2xx/3xx) → the mirror simply has not synced that
 * folder (SCAN_DIR_ABSENT, which a `--dir` scan reconciles as an empty folder); the base fails
 * too → the mirror's URL is wrong (SCAN_BASE_MISSING, a failure as always).
 */
async function absentOrMissing(root: URL, url: URL, status: number, ctx: FetchContext): Promise<MbError> {
  let baseStatus: number | undefined
  try {
    const res = await request(signedUrl(ctx.sign, root), {method: 'GET', dispatcher: ctx.agent, headers: ctx.headers, signal: ctx.signal})
    baseStatus = res.statusCode
    await res.body.dump().catch(() => {})
  } catch (error) {
    throw mapHttpError(error, ctx, root.href)
  }
  if (baseStatus >= 200 && baseStatus < 400) return new MbError(`HTTP directory ${url.href} answered ${status}: the folder is not on the mirror`, {code: 'SCAN_DIR_ABSENT'})
  return new MbError(`HTTP directory ${url.href} answered ${status} and the base URL ${root.href} answered ${baseStatus}; check the mirror's HTTP URL and that directory indexes are enabled`, {
    code: 'SCAN_BASE_MISSING',
  })
}

/**
 * Reads a directory's 200 answer (at `url`, after redirects) into its entries and fingerprint.
 * @returns undefined when it lists exactly what an ancestor lists (a symlink loop).
 */
async function directoryResult(task: DirTask, res: Dispatcher.ResponseData, url: URL, ctx: FetchContext, options: HttpListerOptions, heads: ReturnType<typeof pLimit>): Promise<DirResult | undefined> {
  const type = String(res.headers['content-type'] ?? '').toLowerCase()
  const length = Number(res.headers['content-length'] ?? NaN)
  let entries: IndexEntry[]
  try {
    entries = await readIndex(res.body, type, url, ctx.maxIndexBytes, Number.isFinite(length) ? length : 0)
  } catch (error) {
    if (error instanceof MbError) throw error
    const code = (error as {code?: string})?.code
    if (Number.isFinite(length) && !ctx.signal.aborted && (code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'UND_ERR_RES_CONTENT_LENGTH_MISMATCH')) {
      throw endedEarly(url, `shorter than its Content-Length of ${length} bytes`)
    }
    if (!ctx.signal.aborted && error instanceof Error && error.name === 'HTTPParserError' && /EOF/.test(error.message)) throw endedEarly(url, 'the chunked body lacks its last chunk')
    if ((error as {code?: string})?.code?.startsWith('UND_ERR') || ctx.signal.aborted) throw mapHttpError(error, ctx, url.href)
    throw new MbError(`HTTP ${url.href} did not return a readable directory index (${type || 'no Content-Type'}): ${(error as Error).message}`, {code: 'SCAN_PARSE', cause: error})
  }
  const fingerprint = createHash('sha1')
    .update(
      entries
        .map((e) => `${e.name}\0${e.type}\0${e.size}\0${e.mtime ?? ''}`)
        .sort()
        .join('\n'),
    )
    .digest('hex')
  if (task.ancestors.includes(fingerprint) && entries.length > 0) {
    ctx.warn(`HTTP directory ${url.href} lists exactly what one of its ancestors lists (a symlink loop); skipped`)
    return undefined
  }
  if (options.exactSizes === 'head') await resolveSizes(entries, url, ctx, heads)
  return {task, entries, url, fingerprint}
}

/**
 * Reads one index body into its entries, holding at most `maxBytes` of it.
 *
 * A close-delimited body (no Content-Length, no chunked encoding; RFC 9112 section 6.3) ends
 * when the connection closes, so a cut connection looks like a short page. Each page must
 * therefore end as an index ends: HTML with an explicit `</body>` or `</html>`, JSON as one
 * complete value, XML with nginx's closing `</list>`. A body shorter than its Content-Length,
 * or a chunked body without its last chunk, fails in undici; {@link directoryResult} reports
 * those as SCAN_TRUNCATED too.
 * @throws MbError SCAN_TRUNCATED for a page that ended early, SCAN_INDEX_TOO_LARGE past `maxBytes`
 */
async function readIndex(body: Dispatcher.ResponseData['body'], contentType: string, url: URL, maxBytes: number, contentLength: number): Promise<IndexEntry[]> {
  if (contentType !== '' && !contentType.includes('html') && !contentType.includes('json') && !contentType.includes('xml')) {
    await body.dump().catch(() => {})
    throw new MbError(`HTTP ${url.href} is not a directory index (Content-Type ${contentType}); the base URL must name a directory`, {code: 'SCAN_PARSE'})
  }
  if (contentLength > maxBytes) {
    body.destroy()
    throw indexTooLarge(url, maxBytes, `its Content-Length is ${contentLength} bytes`)
  }
  const decoder = new TextDecoder('utf-8')
  const structured = contentType.includes('json') || contentType.includes('xml')
  const parser = structured ? undefined : new HtmlIndexParser(url)
  let text = ''
  let bytes = 0
  for await (const chunk of body) {
    bytes += (chunk as Buffer).length
    if (bytes > maxBytes) {
      body.destroy()
      throw indexTooLarge(url, maxBytes, 'the page is larger')
    }
    const part = decoder.decode(chunk as Buffer, {stream: true})
    if (parser) parser.write(part)
    else text += part
  }
  const last = decoder.decode()
  if (!parser) return parseStructuredIndex(text + last, contentType, url)
  parser.write(last)
  const entries = parser.end()
  if (!parser.complete) throw endedEarly(url, 'no closing </html>')
  return entries
}

/** Parses a JSON or XML index that must be complete (see {@link readIndex}). */
function parseStructuredIndex(text: string, contentType: string, url: URL): IndexEntry[] {
  if (contentType.includes('xml')) {
    if (!/<\/list>\s*$/.test(text)) throw endedEarly(url, 'no closing </list>')
    return parseXmlIndex(text)
  }
  try {
    return parseJsonIndex(text)
  } catch (error) {
    if (error instanceof SyntaxError) throw endedEarly(url, `not complete, valid JSON: ${error.message}`)
    throw error
  }
}

function endedEarly(url: URL, why: string): MbError {
  return new MbError(`the index page of ${redact(url.href)} ended early (${why}): the connection was cut; nothing was changed`, {code: 'SCAN_TRUNCATED'})
}

function indexTooLarge(url: URL, maxBytes: number, why: string): MbError {
  return new MbError(`the index page of ${redact(url.href)} is larger than scan.max_index_bytes (${maxBytes} bytes; ${why}); nothing was changed. Raise scan.max_index_bytes if the page is genuine.`, {
    code: 'SCAN_INDEX_TOO_LARGE',
  })
}

/** HEAD each approximately-sized file for its Content-Length (exactSizes: 'head'). */
async function resolveSizes(entries: IndexEntry[], dirUrl: URL, ctx: FetchContext, heads: ReturnType<typeof pLimit>): Promise<void> {
  await Promise.all(
    entries
      .filter((e) => e.type === 'file' && e.sizeApproximate)
      .map((e) =>
        heads(async () => {
          const url = new URL(encodeURIComponent(e.name), dirUrl)
          let res: Dispatcher.ResponseData
          try {
            res = await request(signedUrl(ctx.sign, url), {method: 'HEAD', dispatcher: ctx.agent, headers: ctx.headers, signal: ctx.signal})
          } catch (error) {
            throw mapHttpError(error, ctx, url.href)
          }
          await res.body.dump().catch(() => {})
          const length = Number(res.headers['content-length'])
          if (res.statusCode === 200 && Number.isInteger(length) && length >= 0) {
            e.size = length
            delete e.sizeApproximate
            delete e.sizeMin
            delete e.sizeMax
          }
        }),
      ),
  )
}

/** Maps undici and socket errors to MbErrors that name the host and the cause; never shows credentials. */
function mapHttpError(error: unknown, ctx: FetchContext, where: string): MbError {
  if (error instanceof MbError) return error
  const code = (error as {code?: unknown})?.code
  const message = error instanceof Error ? error.message : String(error)
  const target = redact(where)
  let host = target
  try {
    host = new URL(where).host
  } catch {}
  if (ctx.outerSignal?.aborted) return new MbError(`HTTP listing of ${ctx.display} aborted`, {code: 'SCAN_ABORTED', cause: error})
  if (code === 'ECONNREFUSED') return new MbError(`HTTP connection to ${host} refused (ECONNREFUSED); is a web server running there?`, {code: 'SCAN_CONNECT', cause: error})
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new MbError(`HTTP host ${host} not found (${code}); check the mirror's HTTP URL`, {code: 'SCAN_CONNECT', cause: error})
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return new MbError(`HTTP connection to ${host} not established within ${ctx.connectTimeout / 1000} s (connect timeout)`, {code: 'SCAN_TIMEOUT', cause: error})
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
    return new MbError(`HTTP server ${host} did not answer ${target} within ${ctx.ioTimeout / 1000} s (idle timeout)`, {code: 'SCAN_TIMEOUT', cause: error})
  }
  if (code === 'ECONNRESET' || code === 'UND_ERR_SOCKET' || code === 'EPIPE')
    return new MbError(`HTTP connection to ${host} broke while fetching ${target} (${code})`, {code: 'SCAN_CONNECT', cause: error})
  if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) {
    return new MbError(`HTTPS certificate of ${host} is not trusted (${code}); fix the certificate or allow self-signed certificates for this mirror`, {code: 'SCAN_TLS', cause: error})
  }
  return new MbError(`HTTP listing of ${ctx.display} failed at ${target}: ${message}`, {code: 'SCAN_FAILED', cause: error})
}

/**
 * The HTTP lister `mb scan` uses (listers.ts). It resolves
 * rounded index sizes (Apache, lighttpd) with HEAD requests, so its entries are exact and a
 * reconciler that compares `size` alone stays correct; nginx indexes need no HEAD at all.
 * A reconciler that honours sizeMin/sizeMax can use `createHttpLister()` instead and save
 * those requests.
 */
export const httpLister: Lister = createHttpLister({exactSizes: 'head'})
