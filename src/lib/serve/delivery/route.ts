/**
 * The route contract of `mb serve`'s HTTP front: what a route sees of one request
 * ({@link RequestContext}), what the server offers it ({@link RouteServices}), the route
 * itself ({@link Route}) and the headers it may add to a redirect
 * ({@link RedirectHeaderProvider}). The route folders (metalink/, yum/, apt/, the /mirrors
 * page) import this file, never the server that implements it (./server.ts).
 */
import type http from 'node:http'
import type {RuleMatch} from '../../rules/rule.js'
import type {ClientInfo, Selection} from '../../select/types.js'
import type {FileEntry} from '../snapshot/file-entry.js'
import type {Snapshot} from '../snapshot/snapshot.js'
import type {ResolvedClient} from './client-address.js'
import type {Outcome, RequestOutcome} from './outcome.js'

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
  /** Resolved client (computed lazily by `MirrorServer.client` (./server.ts)). */
  resolved?: ResolvedClient
  /** Client with GeoIP data (computed lazily by `MirrorServer.clientInfo` (./server.ts)). */
  info?: ClientInfo
  /** The redirect rule matching this request: null when none does, undefined until asked (`MirrorServer.matchRule` (./server.ts)). */
  rule?: RuleMatch | null
  /** The retry attempt of a redirected or origin-delivered download (./retry.ts); 0 when none was decided. */
  attempt: number
  /** The mirror this request retries away from (a new attempt after a redirect there), for `mb_mirror_retries_total`. */
  retriedFrom: string | undefined
  /** The mirror that redirected the client straight back to mb (a redirect loop, ./retry.ts), for `mb_redirect_loops_total`. */
  bouncedFrom?: string
}

/**
 * What the server offers its routes: the lookups a route may make and the answers it may
 * send, each reporting the request once. `MirrorServer` (./server.ts) implements it; a route gets it
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
  /**
   * Whether root-relative `path` is a regular file on disk (or a link to one), from a stat at
   * most `serve.disk_check_seconds` old as in {@link currentFile} (a fresh one each time when
   * the check is off); inside the root or not is for {@link resolveOnDisk} to say.
   */
  fileOnDisk(ctx: RequestContext, path: string): boolean
  /** Answers as if no route matched: a directory (301 or index), a file on disk, or 404. */
  serveDefault(ctx: RequestContext): Promise<void>
  /** Delivers the file at `ctx.path` (or `knownReal`) from the origin, `reason` in `X-MB-Origin-Reason`. */
  deliver(ctx: RequestContext, reason: string, knownReal?: string): Promise<void>
  /**
   * Answers the origin form of indexed `file` (realpath `real`): delivered by the origin when
   * no eligible mirror holds it or within the origin's budget, else redirected as a request
   * for the file itself (`MirrorServer.originFallback`, ./server.ts).
   */
  originFallback(ctx: RequestContext, file: FileEntry, real: string): Promise<void> | void
  /** Writes a short plain-text answer and reports it. */
  plain(ctx: RequestContext, status: number, outcome: Outcome, text: string, headers?: Record<string, string>): void
  /** Reports a request the route answered itself (status, outcome, and fields such as bytesSent). */
  finish(ctx: RequestContext, status: number, outcome: Outcome, extra?: Partial<RequestOutcome>): void
  /**
   * Runs `write`, which writes the whole answer to `ctx` and reports it, at the end of this
   * event-loop turn together with the turn's other answers, as the redirects are
   * (./turn-batch.ts: back-to-back writes find the client awake, which costs less system
   * time than one write per request). A `write` that throws answers 500.
   */
  answerLater(ctx: RequestContext, write: () => void): void
}

/** A path inside the origin root as `MirrorServer.resolveOnDisk` (./server.ts) found it on disk. */
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
