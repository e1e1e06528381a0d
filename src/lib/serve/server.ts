/**
 * The HTTP front of `mb serve` on plain `node:http`: the redirect hot path, local delivery,
 * directory indexes, and a small route table that other features (metalinks, hash files,
 * mirror lists) extend.
 *
 * Per request on the hot path: parse the target (./path.ts), look the path up in the
 * in-memory snapshot, resolve the client (./client-address.ts), GeoIP, `select()`, and write
 * `302 Found` (RFC 9110 §15.4.3) with `Location`, `X-MB-Mirror`, `X-MB-Realm`,
 * `Link: <url>; rel=duplicate; pri=K; geo=cc` lines (RFC 6249, one header line per
 * alternative), and `Cache-Control: private, no-store` (RFC 9111 §5.2.2) so that shared
 * caches never keep a per-client answer. Nothing on this path waits on the database.
 *
 * Local delivery (`send`, RFC 9110 Range/conditional requests) covers files the selection
 * leaves to the origin and files on disk that are not (yet) indexed; a realpath check keeps
 * every byte inside the root.
 */
import {realpath, stat} from 'node:fs/promises'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {sep} from 'node:path'
import {performance} from 'node:perf_hooks'
import type {TLSSocket} from 'node:tls'
import send from 'send'
import type {Logger} from 'pino'
import {continentOf, isCountryCode} from '../geo/countries.js'
import type {GeoResolver} from '../geo/geoip.js'
import type {SelectOptions} from '../select/options.js'
import type {ClientInfo, Selection} from '../select/types.js'
import {encodePath} from '../select/url.js'
import {listDirectory, renderIndex} from './autoindex.js'
import {type ResolvedClient, TrustedProxies, resolveClient} from './client-address.js'
import type {SnapshotKeeper} from './keeper.js'
import {parseTarget, queryParam} from './path.js'
import type {FileEntry, Snapshot} from './snapshot.js'
import type {Outcome, RequestObserver, RequestOutcome} from './types.js'

/** The selection function's shape (src/lib/select). */
export type SelectFn = (client: ClientInfo, file: FileEntry, mirrorsById: ReadonlyMap<number, import('../select/types.js').SelectMirror>, options: SelectOptions, explain?: boolean, limit?: number) => Selection

export interface ServerOptions {
  /** The origin tree (absolute or relative; resolved with realpath at start). */
  root: string
  keeper: Pick<SnapshotKeeper, 'current'>
  geo: GeoResolver
  select: SelectFn
  selectOptions: SelectOptions
  trustedProxies: TrustedProxies | readonly string[]
  logger?: Logger
  /** Link: rel=duplicate alternatives per redirect (default: selectOptions.maxAlternatives). */
  linkCount?: number
  /** Honour `?country=XX` (testing aid; default true). */
  countryQuery?: boolean
  /** Extra headers for a redirect (flat name/value list), e.g. Metalink/HTTP `Link: rel=describedby` and `Digest` (src/lib/metalink/routes.ts). */
  redirectHeaders?: (ctx: RequestContext, file: FileEntry, client: ClientInfo) => string[]
}

/** Everything a route handler needs about one request. */
export interface RequestContext {
  req: http.IncomingMessage
  res: http.ServerResponse
  /** Decoded origin-relative path ('' = root), no leading or trailing slash. */
  path: string
  /** The request path ended with '/'. */
  slash: boolean
  /** Raw query without '?'. */
  query: string
  /** The snapshot in effect for this request. */
  snapshot: Snapshot
  /** The indexed file at `path`, if any. */
  file: FileEntry | undefined
  startedAt: number
  startedMs: number
  /** Resolved client (computed lazily by {@link MirrorServer.client}). */
  resolved?: ResolvedClient
  /** Client with GeoIP data (computed lazily by {@link MirrorServer.clientInfo}). */
  info?: ClientInfo
}

/**
 * An extra route, tried in registration order before the default file handling. `match`
 * must be cheap (a suffix or query test); `handle` answers the request and reports it once
 * through `server.finish(ctx, status, outcome, extra)`.
 */
export interface Route {
  name: string
  match(ctx: RequestContext): boolean
  handle(ctx: RequestContext, server: MirrorServer): void | Promise<void>
}

const geoParameters = new Map<string, string>()

/** `; geo=cc` for a mirror's country code (RFC 6249 §6), lower-cased once per code instead of per request. */
function geoParameter(country: string): string {
  let text = geoParameters.get(country)
  if (text === undefined) {
    text = `; geo=${country.toLowerCase()}`
    if (geoParameters.size < 1000) geoParameters.set(country, text)
  }
  return text
}

/** The server. Create, `listen()`, and `close()` on shutdown. */
export class MirrorServer {
  readonly http: http.Server
  private readonly routes: Route[] = []
  private readonly observers: RequestObserver[] = []
  private readonly shutdownHooks: Array<() => void | Promise<void>> = []
  private readonly trusted: TrustedProxies
  private rootReal = ''
  private readonly linkCount: number
  private readonly countryQuery: boolean
  private readonly selectLimit: number

  constructor(readonly options: ServerOptions) {
    this.trusted = options.trustedProxies instanceof TrustedProxies ? options.trustedProxies : new TrustedProxies(options.trustedProxies)
    this.linkCount = options.linkCount ?? options.selectOptions.maxAlternatives ?? 5
    this.countryQuery = options.countryQuery ?? true
    this.selectLimit = Math.max(1, this.linkCount)
    this.http = http.createServer({keepAliveTimeout: 5000, requestTimeout: 30_000, maxHeaderSize: 16_384}, (req, res) => this.handle(req, res))
    this.http.on('clientError', (error: NodeJS.ErrnoException, socket) => {
      // Malformed requests and oversized headers/targets never reach handle(); answer cleanly.
      if (!socket.writable) return socket.destroy()
      const status = error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400
      socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
    })
  }

  /** Adds a route tried before the default file handling (see {@link Route}). */
  addRoute(route: Route): void {
    this.routes.push(route)
  }

  /** Registers an observer, called once per answered request (must not block). */
  addObserver(observer: RequestObserver): void {
    this.observers.push(observer)
  }

  /** Registers work to await in `close()` after the listener stops (flushing counters). */
  addShutdownHook(hook: () => void | Promise<void>): void {
    this.shutdownHooks.push(hook)
  }

  /** The realpath of the root (after `listen()`). */
  get root(): string {
    return this.rootReal
  }

  /** Resolves the root and starts listening. Port 0 picks a free port. */
  async listen(host: string, port: number): Promise<AddressInfo> {
    this.rootReal = await realpath(this.options.root)
    await new Promise<void>((resolve, reject) => {
      this.http.once('error', reject)
      this.http.listen(port, host, () => {
        this.http.off('error', reject)
        resolve()
      })
    })
    return this.http.address() as AddressInfo
  }

  /** Stops accepting connections, ends idle keep-alive ones, then awaits the shutdown hooks. */
  async close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.http.close(() => resolve()))
    this.http.closeIdleConnections()
    const force = setTimeout(() => this.http.closeAllConnections(), 5000)
    await closed
    clearTimeout(force)
    for (const hook of this.shutdownHooks) {
      try {
        await hook()
      } catch (error) {
        this.options.logger?.error({err: (error as Error).message}, 'shutdown hook failed')
      }
    }
  }

  /** The client of this request after trusted-proxy resolution (memoised on ctx). */
  client(ctx: RequestContext): ResolvedClient {
    if (ctx.resolved === undefined) {
      const h = ctx.req.headers
      ctx.resolved = resolveClient(ctx.req.socket.remoteAddress, h['x-forwarded-for'], h['x-forwarded-proto'], (ctx.req.socket as TLSSocket).encrypted === true, this.trusted)
    }
    return ctx.resolved
  }

  /**
   * The client with GeoIP location and AS, `?country=` applied (memoised on ctx).
   * @returns undefined when `?country=` is invalid (the caller answers 400)
   */
  clientInfo(ctx: RequestContext): ClientInfo | undefined {
    if (ctx.info !== undefined) return ctx.info
    const c = this.client(ctx)
    const geo = this.options.geo.lookup(c.ip) // {} for an empty or unparsable address
    const info: ClientInfo = {ip: c.ip, address: c.address, country: geo.country, continent: geo.continent, latitude: geo.latitude, longitude: geo.longitude, asn: geo.asn, https: c.https, userAgent: ctx.req.headers['user-agent']}
    if (this.countryQuery && ctx.query.length > 0 && ctx.query.includes('country=')) {
      const cc = queryParam(ctx.query, 'country')
      if (cc !== undefined) {
        const upper = cc.toUpperCase()
        if (!isCountryCode(upper)) return undefined
        info.country = upper
        info.continent = continentOf(upper)
        info.latitude = undefined
        info.longitude = undefined
      }
    }
    ctx.info = info
    return info
  }

  /**
   * Reports an answered request once: to every observer (statistics, access log, metrics)
   * and, at `--log-level debug`, as one JSON log line. The per-request record for operators
   * is the access log (`--access-log`); the JSON line is for debugging.
   */
  finish(ctx: RequestContext, status: number, outcome: Outcome, extra?: Partial<RequestOutcome>): void {
    if (!this.reporting) return
    const record = this.record(ctx, status, outcome)
    if (extra !== undefined) Object.assign(record, extra)
    this.report(record)
  }

  /** Someone reads the request records: an observer, or the debug log. */
  private get reporting(): boolean {
    return this.observers.length > 0 || (this.options.logger !== undefined && this.options.logger.isLevelEnabled('debug'))
  }

  /** The record of an answered request, with every optional field present (unset). */
  private record(ctx: RequestContext, status: number, outcome: Outcome): RequestOutcome {
    const req = ctx.req
    const c = ctx.resolved ?? this.client(ctx)
    const headers = req.headers
    return {
      time: ctx.startedMs,
      method: req.method ?? '',
      target: req.url ?? '',
      path: ctx.path,
      httpVersion: req.httpVersion,
      status,
      outcome,
      clientIp: c.ip,
      country: ctx.info?.country,
      bytesSent: 0,
      userAgent: headers['user-agent'],
      referer: headers.referer,
      durationSeconds: (performance.now() - ctx.startedAt) / 1000,
      // Every optional field present: one object shape for all records.
      mirrorId: undefined,
      mirrorIdentifier: undefined,
      realm: undefined,
      fileSize: undefined,
      rangeStart: undefined,
    }
  }

  /** Hands a finished record to the debug log and every observer. */
  private report(record: RequestOutcome): void {
    const observers = this.observers
    const logger = this.options.logger
    if (logger !== undefined && logger.isLevelEnabled('debug')) {
      logger.debug({
        ip: record.clientIp,
        cc: record.country,
        m: record.method,
        url: record.target,
        st: record.status,
        out: record.outcome,
        mirror: record.mirrorIdentifier,
        realm: record.realm ?? undefined,
        bytes: record.bytesSent,
        ms: Math.round(record.durationSeconds * 1e5) / 100,
      })
    }
    for (let i = 0; i < observers.length; i++) {
      try {
        observers[i](record)
      } catch {
        /* an observer must never break a request */
      }
    }
  }

  /** Writes a short plain-text answer and reports it. */
  plain(ctx: RequestContext, status: number, outcome: Outcome, text: string, headers: Record<string, string> = {}): void {
    const body = `${text}\n`
    ctx.res.writeHead(status, {'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', ...headers})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.finish(ctx, status, outcome)
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const startedAt = performance.now()
    const method = req.method
    const parsed = parseTarget(req.url ?? '/')
    const snapshot = this.options.keeper.current
    const ctx: RequestContext = {req, res, path: parsed.ok ? parsed.path : '', slash: parsed.ok ? parsed.slash : false, query: parsed.ok ? parsed.query : '', snapshot, file: undefined, startedAt, startedMs: Date.now()}
    try {
      if (method !== 'GET' && method !== 'HEAD') return this.plain(ctx, 405, 'bad_request', 'Method not allowed: use GET or HEAD.', {Allow: 'GET, HEAD'})
      if (!parsed.ok) return this.plain(ctx, parsed.status, 'bad_request', `Bad request: ${parsed.reason}.`)
      if (!ctx.slash) ctx.file = snapshot.files.get(ctx.path)
      for (let i = 0; i < this.routes.length; i++) {
        const route = this.routes[i]
        if (route.match(ctx)) {
          const result = route.handle(ctx, this)
          if (result) result.catch((error) => this.fail(ctx, error))
          return
        }
      }
      if (ctx.file !== undefined) return this.redirectOrDeliver(ctx, ctx.file)
      this.fromDisk(ctx).catch((error) => this.fail(ctx, error))
    } catch (error) {
      this.fail(ctx, error)
    }
  }

  /** The catch-all: 500 with a log line (tests assert that bad input never gets here). */
  fail(ctx: RequestContext, error: unknown): void {
    this.options.logger?.error({err: error instanceof Error ? error.stack : String(error), url: ctx.req.url}, 'request failed')
    if (ctx.res.headersSent) {
      ctx.res.destroy()
      this.finish(ctx, 500, 'error')
      return
    }
    this.plain(ctx, 500, 'error', 'Internal server error.')
  }

  /** Indexed file: select a mirror and redirect, or deliver it from the origin. */
  private redirectOrDeliver(ctx: RequestContext, file: FileEntry): void {
    const client = this.clientInfo(ctx)
    if (client === undefined) return this.plain(ctx, 400, 'bad_request', 'Bad request: ?country= must be an ISO 3166-1 alpha-2 code such as DE.')
    // Only the first `linkCount` candidates are used (Location is the first): rank no more.
    const selection = this.options.select(client, file, ctx.snapshot.mirrors, this.options.selectOptions, false, this.selectLimit)
    const ranked = selection.ranked
    if (ranked.length === 0) {
      this.deliver(ctx, selection.origin?.reason ?? 'no_mirror').catch((error) => this.fail(ctx, error))
      return
    }
    const best = ranked[0]
    const links = Math.min(ranked.length, this.linkCount)
    const duplicates: string[] = new Array(links)
    for (let i = 0; i < links; i++) {
      const c = ranked[i]
      const cc = c.mirror.country
      duplicates[i] = `<${c.url}>; rel=duplicate; pri=${i + 1}${cc ? geoParameter(cc) : ''}`
    }
    // One name with an array of values: node writes one `Link:` line per value and checks
    // the name once.
    const headers: Array<string | string[]> = ['Location', best.url, 'X-MB-Mirror', best.mirror.identifier, 'X-MB-Realm', best.realm, 'Cache-Control', 'private, no-store', 'Vary', 'X-Forwarded-For, X-Forwarded-Proto', 'Content-Length', '0']
    if (links > 0) headers.push('Link', duplicates)
    if (this.options.redirectHeaders) {
      const extra = this.options.redirectHeaders(ctx, file, client)
      for (let i = 0; i < extra.length; i++) headers.push(extra[i])
    }
    ctx.res.writeHead(302, headers)
    ctx.res.end()
    if (!this.reporting) return
    // The record's fields set in place (one object shape, no merge of an extra object).
    const record = this.record(ctx, 302, 'redirect')
    record.mirrorId = best.mirror.id
    record.mirrorIdentifier = best.mirror.identifier
    record.realm = best.realm
    record.fileSize = file.size
    // A Range not starting at byte 0 (a resumed download) is reported so that stats do not count it again.
    const range = ctx.req.headers.range
    if (range !== undefined) record.rangeStart = /^bytes=0-/.test(range) ? 0 : Number(/^bytes=(\d+)-/.exec(range)?.[1] ?? -1)
    this.report(record)
  }

  /** Not in the index: a directory, a file on disk not indexed yet, or 404. */
  private async fromDisk(ctx: RequestContext): Promise<void> {
    const target = await this.resolveOnDisk(ctx.path)
    if (target === undefined) return this.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}`)
    if (target.directory) return this.directory(ctx, target.real)
    if (ctx.slash) return this.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}/ (a file, not a directory)`)
    return this.deliver(ctx, 'not_indexed', target.real)
  }

  /** Realpath of root-relative `path` when it exists inside the root, else undefined. */
  async resolveOnDisk(path: string): Promise<{real: string; directory: boolean; size: number} | undefined> {
    let real: string
    try {
      real = await realpath(path ? `${this.rootReal}${sep}${path}` : this.rootReal)
    } catch {
      return undefined
    }
    if (real !== this.rootReal && !real.startsWith(this.rootReal + sep)) return undefined
    try {
      const st = await stat(real)
      if (st.isDirectory()) return {real, directory: true, size: 0}
      if (st.isFile()) return {real, directory: false, size: st.size}
    } catch {
      /* vanished */
    }
    return undefined
  }

  private async directory(ctx: RequestContext, real: string): Promise<void> {
    if (!ctx.slash) {
      const q = ctx.query ? `?${ctx.query}` : ''
      const location = `/${encodePath(ctx.path)}/${q}`
      ctx.res.writeHead(301, {Location: location, 'Content-Length': '0', 'Cache-Control': 'public, max-age=300'})
      ctx.res.end()
      this.finish(ctx, 301, 'directory')
      return
    }
    const entries = await listDirectory(real, this.rootReal)
    const body = Buffer.from(renderIndex(ctx.path, entries))
    ctx.res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8', 'Content-Length': body.length, 'Cache-Control': 'public, max-age=60'})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.finish(ctx, 200, 'directory', {bytesSent: ctx.req.method === 'HEAD' ? 0 : body.length})
  }

  /**
   * Delivers a file from the origin with `send` (Content-Length, Last-Modified, ETag,
   * Range -> 206/416, If-Modified-Since/If-None-Match -> 304, HEAD).
   * @param reason why the origin serves it (sent as `X-MB-Origin-Reason`)
   * @param knownReal the file's realpath when already resolved
   */
  async deliver(ctx: RequestContext, reason: string, knownReal?: string): Promise<void> {
    let real = knownReal
    if (real === undefined) {
      const target = await this.resolveOnDisk(ctx.path)
      if (target === undefined || target.directory) return this.plain(ctx, 404, 'not_found', `Not found: /${ctx.path} (indexed, but missing from the origin tree)`)
      real = target.real
    }
    const {req, res} = ctx
    // send() percent-decodes its path argument once; hand it the encoded real path.
    const stream = send(req, `/${encodePath(real.slice(1))}`, {dotfiles: 'allow', index: false, etag: true, lastModified: true, acceptRanges: true})
    stream.on('headers', (response: http.ServerResponse) => {
      response.setHeader('X-MB-Origin-Reason', reason)
    })
    stream.on('error', (error: Error & {status?: number; statusCode?: number}) => {
      const status = error.status ?? error.statusCode ?? 500
      if (status >= 500) return this.fail(ctx, error)
      this.plain(ctx, status, status === 404 ? 'not_found' : 'bad_request', `${http.STATUS_CODES[status] ?? 'Error'}: /${ctx.path}`)
    })
    res.once('finish', () => {
      const status = res.statusCode
      if (status >= 400) return // reported by the error handler
      const length = Number(res.getHeader('Content-Length') ?? 0)
      const range = status === 206 ? /bytes (\d+)-/.exec(String(res.getHeader('Content-Range') ?? '')) : null
      this.finish(ctx, status, status === 304 ? 'not_modified' : 'local', {
        bytesSent: req.method === 'HEAD' || status === 304 ? 0 : length,
        fileSize: ctx.file?.size,
        rangeStart: range ? Number(range[1]) : undefined,
      })
    })
    stream.pipe(res)
  }
}
