/**
 * The HTTP front of `mb serve` on plain `node:http`: the redirect hot path, local delivery,
 * directory indexes, and a small route table that other features (metalinks, hash files,
 * mirror lists) extend.
 *
 * Per request on the hot path: parse the target (./path.ts), look the path up in the
 * in-memory snapshot, resolve the client (./client-address.ts), GeoIP, `select()`, and write
 * `302 Found` (RFC 9110 §15.4.3) with `Location`, `X-MB-Mirror`, `X-MB-Realm` and
 * `Cache-Control: private, no-store` (RFC 9111 §5.2.2) so that shared caches never keep a
 * per-client answer, then the headers of the registered {@link RedirectHeaderProvider}s
 * (`Link: <url>; rel=duplicate; pri=K; geo=cc` lines from {@link duplicateLinks}, RFC 6249;
 * Metalink/HTTP headers from src/lib/metalink/routes.ts). Nothing on this path waits on the
 * database. With `select.retry_window_seconds` > 0, a client address asking again for a file
 * it was just answered for takes the next rank, then the origin (./retry.ts), and every
 * answer so decided says `X-MB-Attempt: N`.
 *
 * Local delivery (`send`, RFC 9110 Range/conditional requests) covers files the selection
 * leaves to the origin and files on disk that are not (yet) indexed; a realpath check keeps
 * every byte inside the root.
 *
 * Connections are capped per client and in total, and drained on close (./connections.ts).
 * Settings a reload may change ({@link ServerSettings}) are swapped in by `reconfigure()`.
 * Answers carry `Server: mb/VERSION` (RFC 9110 §10.2.4) when a version is given.
 */
import {realpath, stat} from 'node:fs/promises'
import http from 'node:http'
import net, {type AddressInfo} from 'node:net'
import {sep} from 'node:path'
import type {Duplex} from 'node:stream'
import {performance} from 'node:perf_hooks'
import type {TLSSocket} from 'node:tls'
import send from 'send'
import type {Logger} from 'pino'
import {isCountryCode} from '../../geo/countries.js'
import type {GeoResolver} from '../../geo/geoip.js'
import {selectUnderRule} from '../../rules/apply.js'
import {type RuleMatch, ruleLocation} from '../../rules/rule.js'
import {escalationHeader, type VerifyOptions, Verifier} from '../../verify/verifier.js'
import {DiskVersions} from '../../origin/disk.js'
import {type FileVersion, mtimeSeconds} from '../../origin/freshness.js'
import {clientInfo} from '../../select/index.js'
import type {SelectOptions} from '../../select/options.js'
import type {Candidate, ClientInfo, Selection} from '../../select/types.js'
import {encodePath} from '../../select/url.js'
import {headerSafe} from '../../text.js'
import {listDirectory, renderIndex} from './autoindex.js'
import {type CountryQueryTrust, type ResolvedClient, TrustedProxies, resolveClient} from './client-address.js'
import {ConnectionGuard, type ConnectionLimits, defaultMaxConnections, openFileLimit} from './connections.js'
import type {SnapshotKeeper} from '../snapshot/keeper.js'
import {listenOn} from './listen.js'
import {parseTarget, queryParam} from './path.js'
import {type FileEntry, type Snapshot, unindexedVersion} from '../snapshot/snapshot.js'
import {resolveLinks} from '../../origin/links.js'
import type {Outcome, RequestObserver, RequestOutcome} from './outcome.js'
import {TurnBatch} from './turn-batch.js'
import {rankOfAttempt} from '../../select/retry.js'
import {Retries, type RetryStep, attemptText, selectionForAttempt} from './retry.js'

export interface ServerOptions {
  /** The origin tree (absolute or relative; resolved with realpath at start). */
  root: string
  keeper: Pick<SnapshotKeeper, 'current'>
  geo: GeoResolver
  selectOptions: SelectOptions
  trustedProxies: TrustedProxies | readonly string[]
  logger?: Logger
  /** Candidates a redirect ranks, at least 1: Location and the Link alternatives are taken from them (default: selectOptions.maxAlternatives). */
  linkCount?: number
  /** Who may use `?country=XX` (a testing aid); undefined = nobody, the parameter is ignored. */
  countryQuery?: CountryQueryTrust
  /** Connection caps and time limits (default: {@link DEFAULT_CONNECTION_SETTINGS}). */
  connections?: ConnectionSettings
  /** Sent as `Server: mb/VERSION` on every answer (RFC 9110 §10.2.4); none when absent. */
  version?: string
  /** Verified redirects (src/lib/verify); undefined = off. */
  verify?: VerifyOptions
  /** How long one stat of an indexed file vouches that the disk still holds the indexed version, seconds (default 1; 0 = no check: the index is trusted). */
  diskCheckSeconds?: number
  /** Called once when a request finds an indexed file changed on disk (after the log line; see {@link MirrorServer.currentFile}). */
  onIndexStale?: (stale: IndexStale) => void
}

/** An indexed file whose size or mtime on disk differs from the index. */
export interface IndexStale {
  /** Origin-relative path. */
  path: string
  /** What the index says (bytes, Unix seconds). */
  indexed: FileVersion
  /** What the disk says now (bytes, Unix seconds). */
  disk: FileVersion
}

/** Connection caps (./connections.ts) and node:http's time limits, in seconds. */
export interface ConnectionSettings extends ConnectionLimits {
  /** Time a client has to send a complete request header, from connecting or from the end of the previous answer (s). */
  headerTimeoutSeconds: number
  /** Time an idle keep-alive connection is kept open (s). */
  keepAliveTimeoutSeconds: number
}

/** The defaults of {@link ConnectionSettings} (the `serve:` keys' defaults). */
const DEFAULT_CONNECTION_SETTINGS: ConnectionSettings = {
  maxConnections: defaultMaxConnections(openFileLimit()),
  maxConnectionsPerClient: 64,
  headerTimeoutSeconds: 10,
  keepAliveTimeoutSeconds: 5,
}

/** Shortest time limit on a whole request (node:http's `requestTimeout`), in ms. */
const REQUEST_TIMEOUT_MS = 30_000

/**
 * What a reload (SIGHUP) may change in a running server: each field replaces the current one
 * for the requests that start afterwards.
 */
export interface ServerSettings {
  selectOptions: SelectOptions
  trustedProxies: TrustedProxies
  geo: GeoResolver
  linkCount: number
  countryQuery: CountryQueryTrust | undefined
  connections: ConnectionSettings
  verify: VerifyOptions | undefined
}

/** Everything a route handler needs about one request. */
export interface RequestContext {
  req: http.IncomingMessage
  res: http.ServerResponse
  /**
   * Decoded origin-relative path ('' = root), no leading or trailing slash; for an indexed
   * file reached through a symlink, the file's canonical path (the link's target).
   */
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
  /** The redirect rule matching this request: null when none does, undefined until asked ({@link MirrorServer.matchRule}). */
  rule?: RuleMatch | null
  /** The retry attempt of a redirected or origin-delivered download (./retry.ts); 0 when none was decided. */
  attempt: number
  /** The mirror this request retries away from (a new attempt after a redirect there), for `mb_mirror_retries_total`. */
  retriedFrom: string | undefined
}

/**
 * What the server offers its routes: the lookups a route may make and the answers it may
 * send, each reporting the request once. {@link MirrorServer} implements it; a route gets it
 * when it is created, so that it never reads the server's options or private state.
 */
export interface RouteServices {
  /** The realpath of the origin root (known once the server listens). */
  readonly root: string
  /** The client with GeoIP data, a trusted client's `?country=` applied; undefined when that `?country=` is invalid (answer 400). */
  clientInfo(ctx: RequestContext): ClientInfo | undefined
  /** Selects mirrors for `file` and `client` from the request's snapshot; `explain` also lists the exclusions. */
  selectMirrors(ctx: RequestContext, client: ClientInfo, file: FileEntry, explain: boolean): Selection
  /** Realpath of root-relative `path` when it exists inside the root, with its stat (see {@link OnDisk}), else undefined. */
  resolveOnDisk(path: string): Promise<OnDisk | undefined>
  /**
   * `file` as the disk has it now: itself while the disk holds the indexed version (or the
   * file is gone from disk), else an entry with the disk's size and mtime, no mirrors and no
   * hashes, which the origin serves until the index and a scan catch up.
   */
  currentFile(ctx: RequestContext, file: FileEntry): FileEntry
  /** Answers as if no route matched: a directory (301 or index), a file on disk, or 404. */
  serveDefault(ctx: RequestContext): Promise<void>
  /** Delivers the file at `ctx.path` (or `knownReal`) from the origin, `reason` in `X-MB-Origin-Reason`. */
  deliver(ctx: RequestContext, reason: string, knownReal?: string): Promise<void>
  /** Writes a short plain-text answer and reports it. */
  plain(ctx: RequestContext, status: number, outcome: Outcome, text: string, headers?: Record<string, string>): void
  /** Reports a request the route answered itself (status, outcome, and fields such as bytesSent). */
  finish(ctx: RequestContext, status: number, outcome: Outcome, extra?: Partial<RequestOutcome>): void
}

/** A path inside the origin root as {@link MirrorServer.resolveOnDisk} found it on disk. */
export interface OnDisk {
  /** Its realpath (absolute). */
  real: string
  directory: boolean
  /** Bytes; 0 for a directory. */
  size: number
  /** Last modification, whole Unix seconds (UTC), as the index stores it. */
  mtime: number
}

/** The answer (400) to a `?country=` that is not a country code, when the request may set one (`serve.country_query`). */
export const BAD_COUNTRY_QUERY = 'Bad request: ?country= must be an ISO 3166-1 alpha-2 code such as DE.'

/**
 * An extra route, tried in registration order before the default file handling. `match`
 * must be cheap (a suffix or query test) and returns what `handle` needs (or undefined
 * when the route does not apply); `handle` answers the request and reports it once, through
 * the {@link RouteServices} the route was created with.
 */
export interface Route<T> {
  name: string
  match(ctx: RequestContext): T | undefined
  handle(ctx: RequestContext, value: T): void | Promise<void>
}

/**
 * Adds headers to a `302 Found`: pushes a name and a value (or a name and an array of
 * values: one header line each) onto `headers`, the flat list `writeHead` takes. Called on
 * the hot path with the request, its indexed file, its client and the selection (at least
 * one ranked mirror): it must be synchronous and cheap, and must not allocate more than the
 * values it adds.
 */
export type RedirectHeaderProvider = (headers: Array<string | string[]>, ctx: RequestContext, file: FileEntry, client: ClientInfo, selection: Selection) => void

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

/**
 * The provider of `Link: <url>; rel=duplicate; pri=K; geo=cc` (RFC 6249 §3, §6): one header
 * line per alternative, for the first `count` ranked mirrors (the Location is the first).
 * @param count a number, or a function read per redirect (a reload may change it)
 */
export function duplicateLinks(count: number | (() => number)): RedirectHeaderProvider {
  const limit = typeof count === 'number' ? () => count : count
  return (headers, _ctx, _file, _client, selection) => {
    const ranked = selection.ranked
    const links = Math.min(ranked.length, limit())
    if (links <= 0) return
    const duplicates: string[] = new Array(links)
    for (let i = 0; i < links; i++) {
      const c = ranked[i]
      const cc = c.mirror.country
      // Header-safe as built: a compiled mirror's base URL is, and so is an encoded path.
      duplicates[i] = `<${c.url}>; rel=duplicate; pri=${i + 1}${cc ? geoParameter(cc) : ''}`
    }
    // One name with an array of values: node writes one `Link:` line per value and checks
    // the name once.
    headers.push('Link', duplicates)
  }
}

/**
 * Statuses for requests node's parser refuses before they reach a handler, by error code:
 * 431 for oversized headers (RFC 6585 §5), 408 for a request that took too long
 * (RFC 9110 §15.5.9), 501 for a method node does not know (RFC 9110 §15.6.2); 400 otherwise.
 */
const CLIENT_ERROR_STATUS: Record<string, number> = {HPE_HEADER_OVERFLOW: 431, ERR_HTTP_REQUEST_TIMEOUT: 408, HPE_INVALID_METHOD: 501}

/** Writes a bodiless `status` answer (plus `extra` header lines, each ending in CRLF) on a raw socket and closes it. */
function answerRaw(socket: Duplex, status: number, extra = ''): void {
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${extra}Connection: close\r\nContent-Length: 0\r\n\r\n`)
}

/** A `302 Found` built and not written yet: its request, file, chosen mirror and header lines. */
interface PendingRedirect {
  ctx: RequestContext
  file: FileEntry
  best: Candidate
  headers: Array<string | string[]>
}

/** The server. Create, `listen()`, and `close()` on shutdown. */
export class MirrorServer implements RouteServices {
  readonly http: http.Server
  private readonly routes: Array<Route<unknown>> = []
  private readonly redirectHeaders: RedirectHeaderProvider[] = []
  private readonly observers: RequestObserver[] = []
  private trusted: TrustedProxies
  private rootReal = ''
  private countryQuery: CountryQueryTrust | undefined
  private selectLimit: number
  private selectOptions: SelectOptions
  private geo: GeoResolver
  private readonly connections: ConnectionGuard
  private readonly serverHeader: string | undefined
  /** The `302 Found` answers of this event-loop turn, written and reported together (./turn-batch.ts). */
  private readonly redirects = new TurnBatch<PendingRedirect>(
    (pending) => this.writeRedirect(pending),
    (pending, error) => this.fail(pending.ctx, error),
  )
  /** The checks of verified redirects; undefined when verification is off (nothing is checked). */
  private verifier: Verifier | undefined
  private disk: DiskVersions | undefined
  private vary = 'X-Forwarded-For, X-Forwarded-Proto'
  /** Recent answers, so that a client's retry reaches the next mirror (./retry.ts). */
  readonly retries: Retries

  constructor(private readonly options: ServerOptions) {
    this.verifier = options.verify === undefined ? undefined : new Verifier(options.verify)
    this.trusted = options.trustedProxies instanceof TrustedProxies ? options.trustedProxies : new TrustedProxies(options.trustedProxies)
    this.countryQuery = options.countryQuery
    this.selectLimit = Math.max(1, options.linkCount ?? options.selectOptions.maxAlternatives ?? 5)
    this.selectOptions = options.selectOptions
    this.geo = options.geo
    this.retries = new Retries(options.selectOptions)
    this.serverHeader = options.version === undefined ? undefined : `mb/${headerSafe(options.version)}`
    const limits = options.connections ?? DEFAULT_CONNECTION_SETTINGS
    // Time limits are checked every second (node's default is every 30 s).
    this.http = http.createServer({maxHeaderSize: 16_384, connectionsCheckingInterval: 1000}, (req, res) => this.handle(req, res))
    this.applyTimeouts(limits)
    this.connections = new ConnectionGuard(this.http, limits, this.trusted)
    this.http.on('clientError', (error: NodeJS.ErrnoException, socket) => {
      // Malformed requests and oversized headers/targets never reach handle(); answer cleanly.
      if (!socket.writable) return socket.destroy()
      answerRaw(socket, CLIENT_ERROR_STATUS[error.code ?? ''] ?? 400)
    })
    // node hands CONNECT to this event, not to handle(), and drops the socket when nobody
    // listens: answer it like any other method mb does not serve.
    this.http.on('connect', (_req: http.IncomingMessage, socket: Duplex) => {
      if (!socket.writable) return socket.destroy()
      answerRaw(socket, 405, 'Allow: GET, HEAD\r\n')
    })
  }

  /** Candidates a redirect ranks (Location and the `Link: rel=duplicate` alternatives). */
  get linkCount(): number {
    return this.selectLimit
  }

  /** Mirror URLs a metalink lists at most (`select.metalink_max_mirrors`, as last reloaded). */
  get metalinkMaxMirrors(): number {
    return this.selectOptions.metalinkMaxMirrors
  }

  /**
   * Applies reloaded settings (SIGHUP): requests that start afterwards use them; requests
   * in flight finish with the ones they started with. Connection caps apply to new
   * connections.
   */
  reconfigure(settings: ServerSettings): void {
    this.selectOptions = settings.selectOptions
    this.retries.configure(settings.selectOptions)
    this.trusted = settings.trustedProxies
    this.geo = settings.geo
    this.selectLimit = Math.max(1, settings.linkCount)
    this.countryQuery = settings.countryQuery
    this.connections.setLimits(settings.connections)
    this.connections.setTrusted(settings.trustedProxies)
    this.applyTimeouts(settings.connections)
    if (this.verifier?.options !== settings.verify) {
      void this.verifier?.close()
      this.verifier = settings.verify === undefined ? undefined : new Verifier(settings.verify)
    }
  }

  /** node:http's time limits from `c` (the header limit also bounds the whole request from below). */
  private applyTimeouts(c: ConnectionSettings): void {
    this.http.headersTimeout = c.headerTimeoutSeconds * 1000
    this.http.requestTimeout = Math.max(REQUEST_TIMEOUT_MS, this.http.headersTimeout)
    this.http.keepAliveTimeout = c.keepAliveTimeoutSeconds * 1000
  }

  /** Adds a route tried before the default file handling (see {@link Route}). */
  addRoute<T>(route: Route<T>): void {
    this.routes.push(route)
  }

  /**
   * Names a request header that changes which answer a URL gets, for `Vary` on redirects
   * (RFC 9110 §12.5.5): a route that answers by `Accept` calls this with `Accept`.
   */
  varyOn(header: string): void {
    if (!this.vary.split(', ').includes(header)) this.vary = `${header}, ${this.vary}`
  }

  /** Adds a provider of headers for every redirect, applied in registration order (see {@link RedirectHeaderProvider}). */
  addRedirectHeaders(provider: RedirectHeaderProvider): void {
    this.redirectHeaders.push(provider)
  }

  /** Registers an observer, called once per answered request (must not block). */
  addObserver(observer: RequestObserver): void {
    this.observers.push(observer)
  }

  /** The realpath of the root (after `listen()`). */
  get root(): string {
    return this.rootReal
  }

  /** Resolves the root and starts listening. Port 0 picks a free port. */
  async listen(host: string, port: number): Promise<AddressInfo> {
    this.rootReal = await realpath(this.options.root)
    const check = this.options.diskCheckSeconds ?? 1
    this.disk = check > 0 ? new DiskVersions(this.rootReal, check) : undefined
    return listenOn(this.http, host, port)
  }

  /**
   * Stops accepting connections and drains the open ones (./connections.ts): every answer
   * from now on says `Connection: close`, connections idle for 1 s are closed, and what is
   * still open after `forceMs` (default 5 s) is cut. Resolves when every connection has closed.
   */
  async close(forceMs = 5000): Promise<void> {
    // net.Server's close, not http.Server's: the latter also closes idle keep-alive
    // connections at once, which resets a client whose next request is already on the way.
    const closed = new Promise<void>((resolve) => net.Server.prototype.close.call(this.http, () => resolve()))
    await this.connections.drain(forceMs)
    await closed
    await this.verifier?.close()
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
   * The client with GeoIP location and AS (memoised on ctx), `?country=` applied when
   * `countryQuery` allows this client; from any other client the parameter is ignored.
   * @returns undefined when an allowed `?country=` is invalid (the caller answers 400)
   */
  clientInfo(ctx: RequestContext): ClientInfo | undefined {
    if (ctx.info !== undefined) return ctx.info
    const c = this.client(ctx)
    let country: string | undefined
    if (this.countryQuery !== undefined && ctx.query.length > 0 && ctx.query.includes('country=') && this.countryQuery.allows(c)) {
      const cc = queryParam(ctx.query, 'country')
      if (cc !== undefined) {
        country = cc.toUpperCase()
        if (!isCountryCode(country)) return undefined
      }
    }
    const headers = ctx.req.headers
    ctx.info = clientInfo({ip: c.ip, address: c.address, https: c.https, userAgent: headers['user-agent'], range: headers.range !== undefined, country}, this.geo)
    return ctx.info
  }

  /**
   * Selects mirrors for `file` and `client` from the request's snapshot: the one place the
   * server calls the selection (src/lib/select).
   * @param limit rank no more than this many candidates (the redirect uses only the first few)
   */
  selectMirrors(ctx: RequestContext, client: ClientInfo, file: FileEntry, explain: boolean, limit = Infinity): Selection {
    return selectUnderRule(this.matchRule(ctx, client, file.path), client, file, ctx.snapshot.mirrors, this.selectOptions, explain, limit)
  }

  /** The first redirect rule of the request's snapshot matching `path` and `client` (memoised on ctx; one test when there are none). */
  matchRule(ctx: RequestContext, client: ClientInfo, path: string): RuleMatch | undefined {
    if (ctx.rule === undefined) {
      const rules = ctx.snapshot.rules
      ctx.rule = rules.empty ? null : (rules.match(path, client) ?? null)
    }
    return ctx.rule ?? undefined
  }

  /**
   * Answers a request a `url` or `origin` rule decided: a redirect with the rule's status to
   * its URL (RFC 9110 §15.4; per-client, so `private, no-store` as for mirror redirects), or
   * local delivery with `X-MB-Origin-Reason: rule`.
   */
  private answerRule(ctx: RequestContext, rule: RuleMatch, file: FileEntry): void {
    if (rule.target === 'origin') {
      ctx.res.setHeader('X-MB-Rule', rule.name)
      this.deliver(ctx, 'rule').catch((error) => this.fail(ctx, error))
      return
    }
    this.redirectByRule(ctx, rule, file.path, file.size)
  }

  /**
   * A `url` rule on a path that is no indexed file (a directory, a page outside the download
   * tree, a file not indexed yet): redirected as on a file, so a rule sending a country to
   * another store works for every page. `origin` and `mirrors` rules need the indexed file:
   * without one the request goes on as if no rule matched. False when no `url` rule applies.
   */
  private ruleOffIndex(ctx: RequestContext): boolean {
    const client = this.clientInfo(ctx)
    if (client === undefined) return false
    // Not memoised on ctx unless it answers: a rule that does not decide is not counted as a hit.
    const rule = ctx.snapshot.rules.match(ctx.path, client)
    if (rule === undefined || rule.target !== 'url') return false
    ctx.rule = rule
    this.redirectByRule(ctx, rule, ctx.path)
    return true
  }

  /** The redirect of a `url` rule for `path`; `fileSize` in bytes when it is an indexed file. */
  private redirectByRule(ctx: RequestContext, rule: RuleMatch, path: string, fileSize?: number): void {
    const status = rule.rule.record.status
    const headers: Record<string, string> = {
      Location: headerSafe(ruleLocation(rule.rule, path)),
      'X-MB-Rule': rule.name,
      'Cache-Control': 'private, no-store',
      Vary: 'X-Forwarded-For, X-Forwarded-Proto',
      'Content-Length': '0',
      ...this.serverHeaders(),
    }
    ctx.res.writeHead(status, headers)
    ctx.res.end()
    this.finish(ctx, status, 'rule_redirect', fileSize === undefined ? undefined : {fileSize})
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
    return this.observers.length > 0 || this.options.logger?.isLevelEnabled('debug') === true
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
      country: ctx.info?.geoCountry,
      bytesSent: 0,
      userAgent: headers['user-agent'],
      referer: headers.referer,
      durationSeconds: (performance.now() - ctx.startedAt) / 1000,
      // Every optional field present: one object shape for all records.
      mirrorId: undefined,
      mirrorIdentifier: undefined,
      realm: undefined,
      rule: ctx.rule?.name,
      fileSize: undefined,
      rangeStart: undefined,
      attempt: ctx.attempt === 0 ? undefined : ctx.attempt,
      retriedFrom: ctx.retriedFrom,
    }
  }

  /** Hands a finished record to the debug log and every observer. */
  private report(record: RequestOutcome): void {
    const observers = this.observers
    const logger = this.options.logger
    if (logger?.isLevelEnabled('debug')) {
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

  /** `{Server: 'mb/VERSION'}`, or nothing when no version was given. */
  private serverHeaders(): Record<string, string> {
    return this.serverHeader === undefined ? {} : {Server: this.serverHeader}
  }

  /**
   * Answers `304 Not Modified` instead of a redirect when the request's `If-Modified-Since`
   * (RFC 9110 §13.1.3) is at or after the indexed version's mtime, as Mirrorbits does for
   * redirected files: a caching proxy that holds the file then needs no round trip to a
   * mirror. A newer version keeps the redirect. With `If-None-Match` the date is ignored
   * (RFC 9110 §13.2.2) and the redirect stays: mb has no entity tag of its own for a version
   * that mirrors serve (each mirror sends its own). False when it did not answer.
   */
  private notModified(ctx: RequestContext, file: FileEntry): boolean {
    const headers = ctx.req.headers
    const since = headers['if-modified-since']
    if (since === undefined || headers['if-none-match'] !== undefined) return false
    const date = Date.parse(since)
    if (Number.isNaN(date) || Math.floor(date / 1000) < file.mtime) return false
    ctx.res.writeHead(304, {'Last-Modified': new Date(file.mtime * 1000).toUTCString(), 'Cache-Control': 'private, no-store', Vary: 'X-Forwarded-For, X-Forwarded-Proto', ...this.serverHeaders()})
    ctx.res.end()
    this.finish(ctx, 304, 'not_modified', {fileSize: file.size})
    return true
  }

  /** Writes a short plain-text answer and reports it. */
  plain(ctx: RequestContext, status: number, outcome: Outcome, text: string, headers: Record<string, string> = {}): void {
    const body = `${text}\n`
    ctx.res.writeHead(status, {'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(body), 'Cache-Control': 'no-store', ...this.serverHeaders(), ...headers})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.finish(ctx, status, outcome)
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const startedAt = performance.now()
    const method = req.method
    const parsed = parseTarget(req.url ?? '/')
    const snapshot = this.options.keeper.current
    const ctx: RequestContext = {
      req,
      res,
      path: parsed.ok ? parsed.path : '',
      slash: parsed.ok ? parsed.slash : false,
      query: parsed.ok ? parsed.query : '',
      snapshot,
      file: undefined,
      startedAt,
      startedMs: Date.now(),
      attempt: 0,
      retriedFrom: undefined,
    }
    try {
      if (method !== 'GET' && method !== 'HEAD') {
        this.plain(ctx, 405, 'bad_request', 'Method not allowed: use GET or HEAD.', {Allow: 'GET, HEAD'})
        return
      }
      if (!parsed.ok) {
        this.plain(ctx, parsed.status, 'bad_request', `Bad request: ${parsed.reason}.`)
        return
      }
      if (!ctx.slash) {
        ctx.file = snapshot.files.get(ctx.path)
        // Only on a miss: a path through a symlink is served as its canonical path.
        if (ctx.file === undefined && snapshot.links.size > 0) {
          ctx.file = snapshot.lookup(ctx.path)
          if (ctx.file !== undefined) ctx.path = ctx.file.path
        }
      }
      for (let i = 0; i < this.routes.length; i++) {
        const route = this.routes[i]
        const value = route.match(ctx)
        if (value !== undefined) {
          const result = route.handle(ctx, value)
          if (result) result.catch((error) => this.fail(ctx, error))
          return
        }
      }
      if (ctx.file !== undefined) {
        this.redirectOrDeliver(ctx, ctx.file)
        return
      }
      if (!snapshot.rules.empty && this.ruleOffIndex(ctx)) return
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

  /**
   * {@link RouteServices.currentFile}: a stat at most `diskCheckSeconds` old vouches for a
   * match; a mismatch is confirmed by a stat of its own (the snapshot may have caught up with
   * the disk since the cached stat).
   */
  currentFile(ctx: RequestContext, file: FileEntry): FileEntry {
    const versions = this.disk
    if (versions === undefined) return file
    const cached = versions.version(file.path, ctx.startedMs)
    if (cached === null || (cached.size === file.size && cached.mtime === file.mtime)) return file
    versions.forget(file.path)
    const disk = versions.version(file.path, ctx.startedMs)
    if (disk === null || (disk.size === file.size && disk.mtime === file.mtime)) return file
    return this.indexStale(ctx, file, {size: disk.size, mtime: disk.mtime})
  }

  /**
   * The indexed `file` differs from the disk: logs `origin index stale: PATH`, puts an entry
   * with the disk's version and no mirrors into the snapshot (so that later requests, the
   * metalinks and the mirror list see it without another stat), and reports it to
   * `onIndexStale` (which counts it and re-indexes the file). A snapshot refresh of the row
   * replaces the entry.
   */
  private indexStale(ctx: RequestContext, file: FileEntry, disk: FileVersion): FileEntry {
    const entry = unindexedVersion(file, disk)
    const files = ctx.snapshot.files
    files.replaceIfCurrent(file.path, file, entry)
    const stale: IndexStale = {path: file.path, indexed: {size: file.size, mtime: file.mtime}, disk}
    this.options.logger?.warn(stale, `origin index stale: ${file.path}`)
    try {
      this.options.onIndexStale?.(stale)
    } catch (error) {
      this.options.logger?.error({err: error instanceof Error ? error.message : String(error), path: file.path}, 'handling a stale index entry failed')
    }
    return entry
  }

  /** Indexed file: select a mirror and redirect, or deliver it from the origin. */
  private redirectOrDeliver(ctx: RequestContext, indexed: FileEntry): void {
    const file = this.currentFile(ctx, indexed)
    if (file !== indexed) {
      // Changed on disk since it was indexed: no mirror holds this version yet.
      ctx.file = file
      this.deliver(ctx, 'index_stale').catch((error) => this.fail(ctx, error))
      return
    }
    const client = this.clientInfo(ctx)
    if (client === undefined) {
      this.plain(ctx, 400, 'bad_request', BAD_COUNTRY_QUERY)
      return
    }
    const rule = this.matchRule(ctx, client, file.path)
    if (rule !== undefined && rule.target !== 'mirrors') {
      this.answerRule(ctx, rule, file)
      return
    }
    const step = this.retries.enabled ? this.retryStep(ctx, file) : undefined
    // Only the first `linkCount` candidates from the attempt's rank on are used (Location is the first): rank no more.
    const all = this.selectMirrors(ctx, client, file, false, step === undefined ? this.selectLimit : this.selectLimit + step.attempt - 1)
    if (step !== undefined && all.ranked.length > 0) {
      const rank = rankOfAttempt(step.attempt, all.ranked.length)
      this.retries.answered(step, rank < 0 ? 0 : all.ranked[rank].mirror.id)
    }
    const selection = step === undefined || all.ranked.length === 0 ? all : selectionForAttempt(all, step.attempt)
    if (selection === undefined) {
      ctx.res.setHeader('X-MB-Attempt', attemptText(step!.attempt))
      this.deliver(ctx, 'retry', undefined, `retry ${step!.attempt}: the ${all.ranked.length} ranked mirror(s) were tried`).catch((error) => this.fail(ctx, error))
      return
    }
    const ranked = selection.ranked
    if (ranked.length === 0) {
      const reason = selection.origin?.reason ?? 'no_mirror'
      // No mirror: the origin pays for the bytes anyway, so explaining why (which rule
      // excluded the holders) costs little next to it.
      const detail = reason === 'no_mirror' ? this.selectMirrors(ctx, client, file, true).origin?.detail : undefined
      this.deliver(ctx, reason, undefined, detail).catch((error) => this.fail(ctx, error))
      return
    }
    if (this.notModified(ctx, file)) return
    const verifier = this.verifier
    if (verifier?.applies(file)) {
      this.verifyThenRedirect(ctx, file, client, selection, verifier).catch((error) => this.fail(ctx, error))
      return
    }
    this.redirect(ctx, file, client, selection, rule)
  }

  /**
   * The retry step of a download of `file` (./retry.ts), noted on `ctx` for the request's
   * record: its attempt, and the mirror it retries away from.
   */
  private retryStep(ctx: RequestContext, file: FileEntry): RetryStep | undefined {
    const req = ctx.req
    const headers = req.headers
    const conditional = headers['if-modified-since'] !== undefined || headers['if-none-match'] !== undefined
    const step = this.retries.step(this.client(ctx).ip, file.path, req.method, headers.range, ctx.startedMs, conditional)
    if (step === undefined) return undefined
    ctx.attempt = step.attempt
    if (step.retriedFrom !== 0) ctx.retriedFrom = ctx.snapshot.mirrors.byId[step.retriedFrom]?.identifier
    return step
  }

  /**
   * Checks the ranked mirrors with a HEAD (src/lib/verify) and redirects to the first that
   * passes, without the failed ones in the alternatives; `X-MB-Escalated` lists each failed
   * mirror and why. When none passes within the budget, the origin delivers
   * (`X-MB-Origin-Reason: verify_failed`).
   */
  private async verifyThenRedirect(ctx: RequestContext, file: FileEntry, client: ClientInfo, selection: Selection, verifier: Verifier): Promise<void> {
    const choice = await verifier.choose(selection.ranked, file.path)
    const escalated = choice.failed.length > 0 ? headerSafe(escalationHeader(choice.failed)) : undefined
    if (choice.chosen === undefined) {
      if (escalated !== undefined) ctx.res.setHeader('X-MB-Escalated', escalated)
      return this.deliver(ctx, 'verify_failed')
    }
    const failed = new Set(choice.failed.map((f) => f.candidate.mirror.id))
    const ranked = failed.size === 0 ? selection.ranked : selection.ranked.filter((c) => !failed.has(c.mirror.id))
    this.redirect(ctx, file, client, failed.size === 0 ? selection : {...selection, ranked, realm: ranked[0].realm}, ctx.rule ?? undefined, escalated)
  }

  /**
   * Writes the `302 Found` to the first ranked mirror of `selection` (at least one) and
   * reports it; `X-MB-Rule` names a `mirrors` rule, `X-MB-Escalated` the failed checks.
   */
  private redirect(ctx: RequestContext, file: FileEntry, client: ClientInfo, selection: Selection, rule: RuleMatch | undefined, escalated?: string): void {
    const ranked = selection.ranked
    const best = ranked[0]
    const headers: Array<string | string[]> = [
      // The URL is header-safe as built (select/mirror.ts compiles the base URL so); the
      // identifier comes from the registry as it is, and headerSafe keeps a row that breaks
      // its rules (one edited in SQL, say) from making node refuse the response.
      'Location',
      best.url,
      'X-MB-Mirror',
      headerSafe(best.mirror.identifier),
      'X-MB-Realm',
      best.realm,
      'Cache-Control',
      'private, no-store',
      'Vary',
      this.vary,
      'Content-Length',
      '0',
    ]
    if (this.serverHeader !== undefined) headers.push('Server', this.serverHeader)
    if (rule !== undefined) headers.push('X-MB-Rule', rule.name)
    if (escalated !== undefined) headers.push('X-MB-Escalated', escalated)
    if (ctx.attempt !== 0) headers.push('X-MB-Attempt', attemptText(ctx.attempt))
    const providers = this.redirectHeaders
    for (let i = 0; i < providers.length; i++) providers[i](headers, ctx, file, client, selection)
    this.redirects.add({ctx, file, best, headers})
  }

  /** Writes a redirect queued by {@link redirect} and reports it. */
  private writeRedirect({ctx, file, best, headers}: PendingRedirect): void {
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

  /** {@link RouteServices.serveDefault}. */
  serveDefault(ctx: RequestContext): Promise<void> {
    return this.fromDisk(ctx)
  }

  /** Not in the index: a directory, a file on disk not indexed yet, or 404. */
  private async fromDisk(ctx: RequestContext): Promise<void> {
    const target = await this.resolveOnDisk(ctx.path)
    if (target === undefined) return this.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}`)
    if (target.directory) return this.directory(ctx, target.real)
    if (ctx.slash) return this.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}/ (a file, not a directory)`)
    return this.deliver(ctx, 'not_indexed', target.real)
  }

  /**
   * Realpath of root-relative `path` when it exists inside the root, else undefined; a path
   * with a symlink on it only when the index's links lead it there (`Snapshot.links`).
   */
  async resolveOnDisk(path: string): Promise<OnDisk | undefined> {
    let real: string
    try {
      real = await realpath(path ? `${this.rootReal}${sep}${path}` : this.rootReal)
    } catch {
      return undefined
    }
    if (real !== this.rootReal && !real.startsWith(this.rootReal + sep)) return undefined
    // A symlink on the path is followed only as the index recorded it (origin/links.ts): one
    // that loops back into its own ancestry, or that the index has not seen, is not.
    if (path && real !== `${this.rootReal}${sep}${path}` && !this.linksTo(path, real)) return undefined
    try {
      const st = await stat(real)
      if (st.isDirectory()) return {real, directory: true, size: 0, mtime: mtimeSeconds(st)}
      if (st.isFile()) return {real, directory: false, size: st.size, mtime: mtimeSeconds(st)}
    } catch {
      /* vanished */
    }
    return undefined
  }

  /** True when the snapshot's symlinks lead from root-relative `path` to the realpath `real`. */
  private linksTo(path: string, real: string): boolean {
    const canonical = resolveLinks(this.options.keeper.current.links, path)
    return canonical !== undefined && real === `${this.rootReal}${sep}${canonical}`
  }

  private async directory(ctx: RequestContext, real: string): Promise<void> {
    if (!ctx.slash) {
      const q = ctx.query ? `?${ctx.query}` : ''
      const location = `/${encodePath(ctx.path)}/${q}`
      ctx.res.writeHead(301, {Location: location, 'Content-Length': '0', 'Cache-Control': 'public, max-age=300', ...this.serverHeaders()})
      ctx.res.end()
      this.finish(ctx, 301, 'directory')
      return
    }
    const entries = await listDirectory(real, this.rootReal)
    const files = ctx.snapshot.files
    const body = Buffer.from(renderIndex(ctx.path, entries, (name) => files.has(ctx.path ? `${ctx.path}/${name}` : name)))
    ctx.res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8', 'Content-Length': body.length, 'Cache-Control': 'public, max-age=60', ...this.serverHeaders()})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.finish(ctx, 200, 'directory', {bytesSent: ctx.req.method === 'HEAD' ? 0 : body.length})
  }

  /**
   * Delivers a file from the origin with `send` (Content-Length, Last-Modified, ETag,
   * Range -> 206/416, If-Modified-Since/If-None-Match -> 304, HEAD).
   * @param reason why the origin serves it (sent as `X-MB-Origin-Reason`)
   * @param knownReal the file's realpath when already resolved
   * @param detail why, in words (sent as `X-MB-Origin-Detail`; `no_mirror` says which rules excluded the mirrors holding it)
   */
  async deliver(ctx: RequestContext, reason: string, knownReal?: string, detail?: string): Promise<void> {
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
      if (detail !== undefined) response.setHeader('X-MB-Origin-Detail', headerSafe(detail))
      if (this.serverHeader !== undefined) response.setHeader('Server', this.serverHeader)
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
