/**
 * Connection limits of `mb serve`: a cap on open connections per client and in total, so that
 * one client holding thousands of idle sockets cannot use up the process's file descriptors
 * and lock everyone else out.
 *
 * - A client is the TCP peer address (never `X-Forwarded-For`, which the client writes
 *   itself), IPv4 as is, IPv6 by its /64 prefix (RFC 4291 §2.5.4: one subscriber usually gets
 *   a /64 or more). Peers in `trusted_proxies` carry many clients and are exempt from the
 *   per-client cap; the total cap still holds for them.
 * - A connection beyond the per-client cap is answered `503 Service Unavailable` with
 *   `Retry-After` (RFC 9110 §15.6.4, §10.2.3) and closed at once.
 * - At the total cap, the connection that has been idle longest (a keep-alive connection
 *   between requests, or one that has sent nothing yet) is closed to make room; only when no
 *   connection is idle is the new one answered 503.
 * - While draining (shutdown, or a worker being replaced), every response carries
 *   `Connection: close` and connections idle for {@link DRAIN_IDLE_GRACE_MS} are closed, so
 *   a busy keep-alive client sees a clean close after an answer instead of a reset.
 *
 * Time limits (`serve.header_timeout`, `serve.keep_alive_timeout`) are node:http's own
 * (`headersTimeout`, `keepAliveTimeout`), checked every second.
 */
import type http from 'node:http'
import type {Socket} from 'node:net'
import type ipaddr from 'ipaddr.js'
import {readFileSync} from 'node:fs'
import type {TrustedProxies} from './client-address.js'

/** The connection settings (the `serve:` keys of the same names). Counts; seconds. */
export interface ConnectionLimits {
  /** Open connections at most, in this process (>= 1). */
  maxConnections: number
  /** Open connections per client address at most (>= 1). */
  maxConnectionsPerClient: number
}

/** A keep-alive connection that stays idle this long while draining is closed (ms). */
const DRAIN_IDLE_GRACE_MS = 1000

const REFUSAL_BODY = 'Too many connections from your address or in total: retry in a second.\n'

/** The answer to a connection over a cap (the socket is closed after it). */
const REFUSAL = `HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ${REFUSAL_BODY.length}\r\n\r\n${REFUSAL_BODY}`

/**
 * The soft limit on open files of this process (`Max open files` in /proc/self/limits), or
 * undefined where that file does not exist (not Linux) or says "unlimited".
 */
export function openFileLimit(): number | undefined {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    return m ? Number(m[1]) : undefined
  } catch {
    return undefined
  }
}

/**
 * The default of `serve.max_connections`: half the open-file limit (a connection that
 * delivers a file from the origin holds a second descriptor for it), at least 64; 4096 when
 * the limit is unknown.
 * @param limit the open-file limit ({@link openFileLimit}), undefined when unknown
 */
export function defaultMaxConnections(limit: number | undefined): number {
  return limit === undefined ? 4096 : Math.max(64, Math.floor(limit / 2))
}

/** What the guard knows of one open connection. */
interface Tracked {
  /** The per-client key, or undefined for an exempt peer (a trusted proxy). */
  key: string | undefined
  /** Requests being answered on it now. */
  busy: number
}

/**
 * The per-client key of a peer: IPv4 text, or the /64 prefix of an IPv6 address (one
 * subscriber, whatever temporary addresses it takes, RFC 8981). Also the retry memory's
 * client (./retry.ts).
 */
export function clientKey(address: ipaddr.IPv4 | ipaddr.IPv6 | undefined, text: string): string {
  if (address === undefined) return text
  if (address.kind() === 'ipv4') return address.toString()
  const parts = (address as ipaddr.IPv6).parts
  return `${parts
    .slice(0, 4)
    .map((p) => p.toString(16))
    .join(':')}::/64`
}

/**
 * Enforces {@link ConnectionLimits} on an `http.Server` (see the module doc). Create it once
 * per server; {@link setLimits} and {@link setTrusted} apply new settings to the next
 * connections (a reload never closes a connection it already accepted).
 */
export class ConnectionGuard {
  private readonly open = new Map<Socket, Tracked>()
  /** Idle connections, the longest idle first (a Map keeps insertion order). */
  private readonly idle = new Map<Socket, number>()
  private readonly perClient = new Map<string, number>()
  private draining = false
  /** Connections refused so far (over a cap), and idle ones closed to make room. */
  refused = 0
  evicted = 0

  constructor(
    server: http.Server,
    private limits: ConnectionLimits,
    private trusted: TrustedProxies,
  ) {
    server.on('connection', (socket: Socket) => this.accept(socket))
    // Before the request handler, so that a draining answer is sent with `Connection: close`.
    server.prependListener('request', (req: http.IncomingMessage, res: http.ServerResponse) => this.started(req.socket as Socket, res))
  }

  /** Open connections now. */
  get size(): number {
    return this.open.size
  }

  /** Applies new caps to the connections accepted from now on. */
  setLimits(limits: ConnectionLimits): void {
    this.limits = limits
  }

  /** Applies a new set of trusted proxies (exempt from the per-client cap) to new connections. */
  setTrusted(trusted: TrustedProxies): void {
    this.trusted = trusted
  }

  private accept(socket: Socket): void {
    const peer = this.trusted.peer(socket.remoteAddress ?? '')
    const key = peer.trusted ? undefined : clientKey(peer.address, peer.ip)
    const overClient = key !== undefined && (this.perClient.get(key) ?? 0) >= this.limits.maxConnectionsPerClient
    if (overClient || (this.open.size >= this.limits.maxConnections && !this.evictIdle())) {
      this.refuse(socket)
      return
    }
    this.open.set(socket, {key, busy: 0})
    this.idle.set(socket, Date.now())
    if (key !== undefined) this.perClient.set(key, (this.perClient.get(key) ?? 0) + 1)
    socket.once('close', () => this.forget(socket))
  }

  /** Answers 503 on a connection over a cap and closes it as soon as the answer is written. */
  private refuse(socket: Socket): void {
    this.refused += 1
    socket.on('error', () => {})
    socket.end(REFUSAL, () => socket.destroy())
  }

  /** Closes the connection idle longest; false when none is idle. */
  private evictIdle(): boolean {
    for (const socket of this.idle.keys()) {
      this.idle.delete(socket)
      this.evicted += 1
      socket.destroy()
      // Counted as closed now: its 'close' event comes later.
      this.forget(socket)
      return true
    }
    return false
  }

  private forget(socket: Socket): void {
    const tracked = this.open.get(socket)
    if (tracked === undefined) return
    this.open.delete(socket)
    this.idle.delete(socket)
    if (tracked.key !== undefined) {
      const n = (this.perClient.get(tracked.key) ?? 1) - 1
      if (n <= 0) this.perClient.delete(tracked.key)
      else this.perClient.set(tracked.key, n)
    }
  }

  private started(socket: Socket, res: http.ServerResponse): void {
    const tracked = this.open.get(socket)
    if (this.draining) res.shouldKeepAlive = false
    if (tracked === undefined) return
    tracked.busy += 1
    this.idle.delete(socket)
    res.once('close', () => {
      tracked.busy -= 1
      if (tracked.busy === 0 && this.open.has(socket) && !socket.destroyed) this.idle.set(socket, Date.now())
    })
  }

  /**
   * Stops keeping connections alive (every answer from now on says `Connection: close`) and
   * resolves once every connection has closed: connections idle for
   * {@link DRAIN_IDLE_GRACE_MS} are closed, and whatever is still open after `forceMs` is cut.
   * The caller has stopped listening before.
   */
  async drain(forceMs: number): Promise<void> {
    this.draining = true
    const started = Date.now()
    while (this.open.size > 0) {
      const now = Date.now()
      if (now - started >= forceMs) {
        for (const socket of this.open.keys()) socket.destroy()
        break
      }
      for (const [socket, since] of this.idle) if (now - Math.max(since, started) >= DRAIN_IDLE_GRACE_MS) socket.destroy()
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}
