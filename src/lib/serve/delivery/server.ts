/**
 * The HTTP front of `mb serve` on plain `node:http`: the redirect hot path, and the table of
 * routes (./route.ts) that other features (metalinks, hash files, mirror lists) extend.
 *
 * Per request on the hot path: parse the target (./path.ts), look the path up in the
 * in-memory snapshot, resolve the client (./client-address.ts), GeoIP, `select()`, and write
 * `302 Found` (RFC 9110 §15.4.3) with `Location`, `X-MB-Mirror`, `X-MB-Realm` and
 * `Cache-Control: private, no-store` (RFC 9111 §5.2.2) so that shared caches never keep a
 * per-client answer, then the headers of the registered {@link RedirectHeaderProvider}s
 * (./duplicate-links.ts; Metalink/HTTP headers from src/lib/metalink). Nothing on this path
 * waits on the database. A client asking again for a file it was just answered for takes the
 * next mirror of its tier, never the origin (./retry.ts), with `X-MB-Attempt: N`.
 *
 * The origin answers itself (./local.ts) for files the selection leaves to it and files not
 * (yet) indexed. Every answer is reported once (./reporter.ts). Connections are capped and
 * drained on close (./connections.ts); a reload swaps settings in with `reconfigure()`.
 */
import http from 'node:http'
import net, {type AddressInfo} from 'node:net'
import {performance} from 'node:perf_hooks'
import type {TLSSocket} from 'node:tls'
import {isCountryCode} from '../../geo/countries.js'
import type {GeoResolver} from '../../geo/geoip.js'
import type {RuleMatch} from '../../rules/rule.js'
import {escalationHeader, Verifier} from '../../verify/verifier.js'
import {clientInfo, clientNetwork, outsideOwnTier} from '../../select/index.js'
import type {SelectOptions} from '../../select/options.js'
import type {Candidate, ClientInfo, Selection} from '../../select/types.js'
import {headerSafe} from '../../text.js'
import {type CountryQueryTrust, type ResolvedClient, TrustedProxies, resolveClient} from './client-address.js'
import {ConnectionGuard} from './connections.js'
import {type ListenTarget, listenOn} from './listen.js'
import {fileOnDisk, type IndexCheck, openIndexCheck} from './index-check.js'
import {LocalDelivery} from './local.js'
import {parseTarget, queryParam} from './path.js'
import type {FileEntry} from '../snapshot/file-entry.js'
import type {Outcome, RequestObserver, RequestOutcome} from './outcome.js'
import {answerRule, ruleOffIndex} from './rule-answer.js'
import {RequestReporter} from './reporter.js'
import {BAD_COUNTRY_QUERY, type OnDisk, type RedirectHeaderProvider, type RequestContext, type Route, type RouteServices} from './route.js'
import {type ConnectionSettings, DEFAULT_CONNECTION_SETTINGS, REQUEST_TIMEOUT_MS, type ServerOptions, type ServerSettings} from './settings.js'
import {type LaterAnswer, TurnBatch, writeLater} from './turn-batch.js'
import {Retries, attemptText, retryStep, selectionForAttempt} from './retry.js'
import {TIER_CANDIDATES} from '../../select/retry.js'
import {answerRefusals} from './refusals.js'
import {notModified} from './not-modified.js'
import {DEFAULT_ORIGIN_BUDGET, OriginBudget} from './origin-budget.js'
import {ORIGIN_FALLBACK_REASON} from './public-url.js'
import {selectHeld} from './mirror-only.js'
import {dropInvalidIfModifiedSince} from './conditional.js'

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
  private trusted: TrustedProxies
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
  /** The answers routes write at the end of the turn ({@link RouteServices.answerLater}): each request and what writes it. */
  private readonly answers = new TurnBatch<LaterAnswer<RequestContext>>(writeLater, (p, error) => this.fail(p.ctx, error))
  /** {@link RouteServices.answerLater}. */
  readonly answerLater = (ctx: RequestContext, write: () => void): void => this.answers.add({ctx, write})
  /** The checks of verified redirects; undefined when verification is off (nothing is checked). */
  private verifier: Verifier | undefined
  /** The check of indexed files against the disk (./index-check.ts), with its directory watch; undefined when off or before `listen()`. */
  indexCheck: IndexCheck | undefined
  /** Answered requests, to the observers and the debug log (./reporter.ts). */
  private readonly reporter: RequestReporter
  /** What the origin answers itself (./local.ts). */
  private readonly local: LocalDelivery
  private vary = 'X-Forwarded-For, X-Forwarded-Proto'
  /** Recent answers, so that a client's retry reaches the next mirror (./retry.ts). */
  readonly retries: Retries
  /** What the origin may deliver that a mirror could carry (./origin-budget.ts). */
  private readonly budget: OriginBudget

  constructor(private readonly options: ServerOptions) {
    this.verifier = options.verify === undefined ? undefined : new Verifier(options.verify)
    this.trusted = options.trustedProxies instanceof TrustedProxies ? options.trustedProxies : new TrustedProxies(options.trustedProxies)
    this.countryQuery = options.countryQuery
    this.selectLimit = Math.max(1, options.linkCount ?? options.selectOptions.maxAlternatives ?? 5)
    this.selectOptions = options.selectOptions
    this.geo = options.geo
    this.retries = new Retries(options.selectOptions)
    this.budget = new OriginBudget(options.originBudget ?? DEFAULT_ORIGIN_BUDGET, {v4: options.selectOptions.clientPrefixV4, v6: options.selectOptions.clientPrefixV6})
    this.serverHeader = options.version === undefined ? undefined : `mb/${headerSafe(options.version)}`
    this.reporter = new RequestReporter(options.logger, (ctx) => this.client(ctx))
    this.local = new LocalDelivery(options.keeper, this.serverHeader, this, options.indexExclude)
    const limits = options.connections ?? DEFAULT_CONNECTION_SETTINGS
    // Time limits are checked every second (node's default is every 30 s).
    this.http = http.createServer({maxHeaderSize: 16_384, connectionsCheckingInterval: 1000}, (req, res) => this.handle(dropInvalidIfModifiedSince(req), res))
    this.applyTimeouts(limits)
    this.connections = new ConnectionGuard(this.http, limits, this.trusted)
    answerRefusals(this.http)
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
    this.budget.configure(settings.originBudget, {v4: settings.selectOptions.clientPrefixV4, v6: settings.selectOptions.clientPrefixV6})
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
    this.reporter.add(observer)
  }

  /** The realpath of the root (after `listen()`). */
  get root(): string {
    return this.local.rootReal
  }

  /** Resolves the root and starts listening on `target` (./listen.ts). Port 0 picks a free port. */
  async listen(target: ListenTarget): Promise<AddressInfo> {
    await this.local.open(this.options.root)
    this.indexCheck = openIndexCheck(this.local.rootReal, this.options)
    return listenOn(this.http, target)
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
    this.indexCheck?.close()
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
      country = cc?.toUpperCase()
      // Not percent-encoded UTF-8 (null) is refused as an invalid code is, not taken for absent.
      if (cc === null || (country !== undefined && !isCountryCode(country))) return undefined
    }
    const headers = ctx.req.headers
    ctx.info = clientInfo({ip: c.ip, address: c.address, https: c.https, userAgent: headers['user-agent'], range: headers.range !== undefined, country}, this.geo)
    return ctx.info
  }

  /**
   * Selects mirrors for `file` and `client` from the request's snapshot: the one place the
   * server calls the selection (src/lib/select); a mirror-only file gets no origin exception (./mirror-only.ts).
   * @param limit rank no more than this many candidates (the redirect uses only the first few)
   */
  selectMirrors(ctx: RequestContext, client: ClientInfo, file: FileEntry, explain: boolean, limit = Infinity): Selection {
    return selectHeld(this.matchRule(ctx, client, file.path), client, file, ctx.snapshot.mirrors, this.selectOptions, explain, limit, this, ctx)
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
   * Reports an answered request once: to every observer (statistics, access log, metrics)
   * and, at `--log-level debug`, as one JSON log line. The per-request record for operators
   * is the access log (`--access-log`); the JSON line is for debugging.
   */
  finish(ctx: RequestContext, status: number, outcome: Outcome, extra?: Partial<RequestOutcome>): void {
    const reporter = this.reporter
    if (!reporter.active && ctx.bouncedFrom === undefined) return
    const record = reporter.record(ctx, status, outcome)
    if (extra !== undefined) Object.assign(record, extra)
    reporter.report(record)
  }

  /** `{Server: 'mb/VERSION'}`, or nothing when no version was given. */
  serverHeaders(): Record<string, string> {
    return this.serverHeader === undefined ? {} : {Server: this.serverHeader}
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
      if (!snapshot.rules.empty && ruleOffIndex(this, ctx)) return
      this.local.fromDisk(ctx).catch((error) => this.fail(ctx, error))
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

  /** {@link RouteServices.currentFile} (./index-check.ts). */
  readonly currentFile = (ctx: RequestContext, file: FileEntry): FileEntry => (this.indexCheck === undefined ? file : this.indexCheck.current(ctx, file))
  /** {@link RouteServices.fileOnDisk} (./index-check.ts). */
  readonly fileOnDisk = (ctx: RequestContext, path: string): boolean => fileOnDisk(this.indexCheck, this.root, ctx, path)

  /**
   * {@link RouteServices.originFallback}: the origin form `/_origin/PATH` (./origin-form.ts)
   * of an indexed file. The origin delivers it when no eligible mirror holds it, or within
   * `serve.origin_budget` (./origin-budget.ts); over the budget, the request is answered as
   * one for PATH itself: a `302` to the best mirror for the client, under the retry rule.
   */
  originFallback(ctx: RequestContext, file: FileEntry, real: string): Promise<void> | void {
    const client = this.clientInfo(ctx)
    if (client === undefined) return this.plain(ctx, 400, 'bad_request', BAD_COUNTRY_QUERY)
    const held = this.currentFile(ctx, file) === file && this.selectMirrors(ctx, client, file, false, 1).ranked.length > 0
    const bytes = ctx.req.method === 'GET' ? file.size : 0
    if (!held || this.budget.take(client.address, bytes, ctx.startedMs)) return this.deliver(ctx, ORIGIN_FALLBACK_REASON, real)
    ctx.res.setHeader('X-MB-Origin-Budget', 'over')
    this.redirectOrDeliver(ctx, file)
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
      answerRule(this, ctx, rule, file)
      return
    }
    const step = this.retries.enabled ? retryStep(this.retries, ctx, this.client(ctx), file) : undefined
    if (step !== undefined && step.retriedFrom !== 0) this.options.onRetryAway?.(file.path, step.retriedFrom)
    // Only the first `linkCount` candidates are used (Location is the first), the tier is among at least TIER_CANDIDATES: rank no more.
    const all = this.selectMirrors(ctx, client, file, false, step === undefined ? this.selectLimit : Math.max(this.selectLimit, TIER_CANDIDATES))
    const selection = step === undefined || all.ranked.length === 0 ? all : selectionForAttempt(all, step.attempt)
    if (step !== undefined && selection.ranked.length > 0) this.retries.answered(step, selection.ranked[0].mirror.id)
    const ranked = selection.ranked
    if (ranked.length === 0) {
      const reason = selection.origin?.reason ?? 'no_mirror'
      // No mirror: the origin pays for the bytes anyway, so explaining why (which rule
      // excluded the holders) costs little next to it.
      const detail = reason === 'no_mirror' ? this.selectMirrors(ctx, client, file, true).origin?.detail : undefined
      if (reason === 'no_mirror') this.options.onNoMirror?.(file.path, rule?.rule.record.mirrors, clientNetwork(client, this.selectOptions))
      this.deliver(ctx, reason, undefined, detail).catch((error) => this.fail(ctx, error))
      return
    }
    if (notModified(this, ctx, file)) return
    const verifier = this.verifier
    if (verifier?.applies(file)) {
      this.verifyThenRedirect(ctx, file, client, selection, verifier).catch((error) => this.fail(ctx, error))
      return
    }
    this.redirect(ctx, file, client, selection, rule)
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
    if (rule === undefined && this.options.onOutsideTier !== undefined && outsideOwnTier(best.realm))
      this.options.onOutsideTier(file.path, client, ctx.snapshot.mirrors, clientNetwork(client, this.selectOptions))
    const providers = this.redirectHeaders
    for (let i = 0; i < providers.length; i++) providers[i](headers, ctx, file, client, selection)
    this.redirects.add({ctx, file, best, headers})
  }

  /** Writes a redirect queued by {@link redirect} and reports it. */
  private writeRedirect({ctx, file, best, headers}: PendingRedirect): void {
    ctx.res.writeHead(302, headers)
    ctx.res.end()
    const reporter = this.reporter
    // A redirect loop is reported even with no observer: the reporter logs it.
    if (!reporter.active && ctx.bouncedFrom === undefined) return
    // The record's fields set in place (one object shape, no merge of an extra object).
    const record = reporter.record(ctx, 302, 'redirect')
    record.mirrorId = best.mirror.id
    record.mirrorIdentifier = best.mirror.identifier
    record.realm = best.realm
    record.fileSize = file.size
    // A Range not starting at byte 0 (a resumed download) is reported so that stats do not count it again.
    const range = ctx.req.headers.range
    if (range !== undefined) record.rangeStart = /^bytes=0-/.test(range) ? 0 : Number(/^bytes=(\d+)-/.exec(range)?.[1] ?? -1)
    reporter.report(record)
  }

  /** {@link RouteServices.serveDefault}. */
  serveDefault(ctx: RequestContext): Promise<void> {
    return this.local.fromDisk(ctx)
  }

  /** {@link RouteServices.resolveOnDisk} (./local.ts). */
  resolveOnDisk(path: string): Promise<OnDisk | undefined> {
    return this.local.resolveOnDisk(path)
  }

  /**
   * Delivers a file from the origin (./local.ts).
   * @param reason why the origin serves it (sent as `X-MB-Origin-Reason`)
   * @param knownReal the file's realpath when already resolved
   * @param detail why, in words (sent as `X-MB-Origin-Detail`)
   */
  deliver(ctx: RequestContext, reason: string, knownReal?: string, detail?: string): Promise<void> {
    return this.local.deliver(ctx, reason, knownReal, detail)
  }
}
