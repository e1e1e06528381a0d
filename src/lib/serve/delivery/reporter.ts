/**
 * Reports each answered request once: as a record ({@link RequestOutcome}) to every
 * registered observer (statistics, access log, metrics) and, at `--log-level debug`, as one
 * JSON log line. Observers run on the hot path and must only record in memory.
 */
import {performance} from 'node:perf_hooks'
import type {Logger} from 'pino'
import type {ResolvedClient} from './client-address.js'
import type {Outcome, RequestObserver, RequestOutcome} from './outcome.js'
import type {RequestContext} from './route.js'

/** The observers of answered requests and the debug log, with the record they all read. */
export class RequestReporter {
  private readonly observers: RequestObserver[] = []

  /**
   * @param logger the event log (a record is logged at debug level)
   * @param client the request's client after trusted-proxy resolution (memoised on ctx)
   */
  constructor(
    private readonly logger: Logger | undefined,
    private readonly client: (ctx: RequestContext) => ResolvedClient,
  ) {}

  /** Registers an observer, called once per answered request (must not block). */
  add(observer: RequestObserver): void {
    this.observers.push(observer)
  }

  /** Someone reads the request records: an observer, or the debug log. */
  get active(): boolean {
    return this.observers.length > 0 || this.logger?.isLevelEnabled('debug') === true
  }

  /** The record of an answered request, with every optional field present (unset). */
  record(ctx: RequestContext, status: number, outcome: Outcome): RequestOutcome {
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
      bouncedFrom: ctx.bouncedFrom,
    }
  }

  /** When each mirror's redirect loop was last logged, ms since the epoch. */
  private readonly loopsLogged = new Map<string, number>()

  /**
   * Logs a possible redirect loop (a mirror that sent the client straight back to mb, or a
   * client that asked again within a second: the two look alike, ../../select/retry.ts
   * `BOUNCE_SECONDS`), with the mirror's name: at most once a minute per mirror, so that neither
   * a looping mirror nor a busy NAT floods the log.
   */
  private loopLogged(record: RequestOutcome): void {
    const mirror = record.bouncedFrom!
    const now = Date.now()
    if (now - (this.loopsLogged.get(mirror) ?? 0) < 60_000) return
    if (this.loopsLogged.size >= 1000) this.loopsLogged.clear()
    this.loopsLogged.set(mirror, now)
    this.logger?.warn(
      {mirror, url: record.target, client: record.clientIp},
      `possible redirect loop: mirror ${mirror} sent a client straight back for ${record.target}, or the client asked again within a second (a busy NAT does); it goes to the next mirror of its tier (mb_redirect_loops_total: a mirror that draws most of its redirects back redirects to mb)`,
    )
  }

  /** Hands a finished record to the debug log and every observer. */
  report(record: RequestOutcome): void {
    const observers = this.observers
    const logger = this.logger
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
    if (record.bouncedFrom !== undefined) this.loopLogged(record)
    for (let i = 0; i < observers.length; i++) {
      try {
        observers[i](record)
      } catch {
        /* an observer must never break a request */
      }
    }
  }
}
