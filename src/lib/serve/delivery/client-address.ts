/**
 * Who is the client? The socket peer, unless the peer is a trusted reverse proxy: then the
 * right-most `X-Forwarded-For` entry that is not itself a trusted proxy (the de-facto
 * standard of nginx `real_ip_recursive on` and MDN's "right-most untrusted" rule; RFC 7239
 * §5.2 for the semantics of the list). `X-Forwarded-Proto` from a trusted peer, read from the
 * right in step with that walk, says whether the client used HTTPS. IPv4-mapped IPv6 addresses (RFC 4291 §2.5.5.2) are reduced to IPv4.
 *
 * Pure: no I/O, no clock. Never throws; bad header values fall back to the nearest address
 * that can be believed (a safe default), never to an address the client made up.
 *
 * Also here: which resolved clients may steer selection with `?country=` ({@link CountryQueryTrust}).
 */
import type ipaddr from 'ipaddr.js'
import {type Cidr, type IpAddress, cidrContains, parseCidr, parseIp} from '../../net.js'

/** The resolved client: canonical address text, parsed address and the scheme it used. */
export interface ResolvedClient {
  /** Canonical text (IPv4 dotted quad, IPv6 RFC 5952 form); '' when even the peer is unknown. */
  ip: string
  address?: IpAddress
  https: boolean
  /** True when the address came from `X-Forwarded-For` (the peer is a trusted proxy). */
  forwarded: boolean
}

/**
 * A compiled set of trusted proxy prefixes with a small memo of peer decisions (peers are
 * few: the proxies in front of `mb serve`), so the per-request cost is a Map lookup.
 */
export class TrustedProxies {
  readonly cidrs: readonly Cidr[]
  private readonly peerMemo = new Map<string, {address?: IpAddress; ip: string; trusted: boolean}>()

  /** @param cidrs CIDR texts (`127.0.0.1/32`, `::1/128`, bare addresses allowed). @throws UsageError on a bad CIDR */
  constructor(cidrs: readonly (string | Cidr)[] = []) {
    this.cidrs = cidrs.map((c) => (typeof c === 'string' ? parseCidr(c) : c))
  }

  /** True when `address` lies in one of the trusted prefixes. */
  contains(address: IpAddress): boolean {
    for (const cidr of this.cidrs) if (cidrContains(cidr, address)) return true
    return false
  }

  /** Parses and classifies a socket peer address (memoised; bounded to 4096 entries). */
  peer(text: string): {address?: IpAddress; ip: string; trusted: boolean} {
    let entry = this.peerMemo.get(text)
    if (entry === undefined) {
      const address = parseIp(text)
      entry = {address, ip: address ? address.toString() : text, trusted: address !== undefined && this.contains(address)}
      if (this.peerMemo.size >= 4096) this.peerMemo.clear()
      this.peerMemo.set(text, entry)
    }
    return entry
  }
}

/**
 * Parses one `X-Forwarded-For` element: an address, optionally with a port
 * (`192.0.2.1:5678`, `[2001:db8::1]:80`) or in brackets, or quoted. Undefined when it is
 * not an address (`unknown`, garbage, an obfuscated identifier).
 */
export function parseForwardedElement(raw: string): IpAddress | undefined {
  let text = raw.trim()
  if (text.length === 0 || text.length > 64) return undefined
  if (text.charCodeAt(0) === 34 /* " */ && text.endsWith('"')) text = text.slice(1, -1)
  if (text.charCodeAt(0) === 91 /* [ */) {
    const close = text.indexOf(']')
    if (close < 0) return undefined
    text = text.slice(1, close)
  } else {
    const colon = text.indexOf(':')
    // Exactly one colon: IPv4 with a port.
    if (colon > 0 && text.indexOf(':', colon + 1) < 0) text = text.slice(0, colon)
  }
  return parseIp(text)
}

function ipv4Text(address: ipaddr.IPv4): string {
  const o = address.octets
  return `${o[0]}.${o[1]}.${o[2]}.${o[3]}`
}

/**
 * The scheme of the client's connection from a trusted peer's `X-Forwarded-Proto`. Each
 * proxy that appends adds the scheme it was reached by, so the right-most value is the
 * peer's own and the client's is `hops` values further left, `hops` being the trusted
 * proxies between the client and the peer (the entries the `X-Forwarded-For` walk passed).
 * Values left of that were sent by the client and are not believed; when the list is
 * shorter (a proxy that sets instead of appending), its left-most value counts. Neither
 * `http` nor `https` there (or no header): the connection's own scheme, `tls`.
 * @param forwardedProto the header value(s), comma-separated, or undefined
 * @returns true for HTTPS
 */
function forwardedScheme(forwardedProto: string | string[] | undefined, hops: number, tls: boolean): boolean {
  if (forwardedProto === undefined) return tls
  const values = (Array.isArray(forwardedProto) ? forwardedProto.join(',') : forwardedProto).split(',')
  const value = values[Math.max(values.length - 1 - hops, 0)].trim().toLowerCase()
  if (value === 'https') return true
  if (value === 'http') return false
  return tls
}

/**
 * Resolves the client of one request.
 *
 * @param peer            `socket.remoteAddress` (may be undefined on a destroyed socket)
 * @param forwardedFor    the `X-Forwarded-For` header value(s), comma-separated, or undefined
 * @param forwardedProto  the `X-Forwarded-Proto` header value, or undefined
 * @param tls             the connection itself is TLS
 * @param trusted         the trusted proxies
 *
 * Rules: headers count only when the peer is trusted. Walking `X-Forwarded-For` from the
 * right, trusted proxies are skipped; the first untrusted entry is the client. An
 * unparsable entry stops the walk and the last believed hop (a trusted proxy) is the client:
 * entries left of garbage cannot be trusted. When every entry is trusted, the left-most is
 * the client. `X-Forwarded-Proto` is read the same way: see {@link forwardedScheme}.
 */
export function resolveClient(
  peer: string | undefined,
  forwardedFor: string | string[] | undefined,
  forwardedProto: string | string[] | undefined,
  tls: boolean,
  trusted: TrustedProxies,
): ResolvedClient {
  if (peer === undefined) return {ip: '', https: tls, forwarded: false}
  const p = trusted.peer(peer)
  if (!p.trusted) return {ip: p.ip, address: p.address, https: tls, forwarded: false}

  if (forwardedFor === undefined) return {ip: p.ip, address: p.address, https: forwardedScheme(forwardedProto, 0, tls), forwarded: false}
  const header = Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor
  let address: IpAddress | undefined = p.address
  let found = false
  let hops = 0
  let end = header.length
  while (end > 0) {
    const start = header.lastIndexOf(',', end - 1)
    const element = header.slice(start + 1, end)
    end = Math.max(start, 0)
    if (element.trim().length === 0) continue
    const parsed = parseForwardedElement(element)
    if (parsed === undefined) break // garbage: keep the last believed hop
    address = parsed
    found = true
    if (!trusted.contains(parsed)) break
    hops++
  }
  const https = forwardedScheme(forwardedProto, hops, tls)
  if (!found || address === undefined) return {ip: p.ip, address: p.address, https, forwarded: false}
  return {ip: address.kind() === 'ipv4' ? ipv4Text(address as ipaddr.IPv4) : address.toString(), address, https, forwarded: true}
}

/**
 * Who may steer selection with `?country=XX` (`serve.country_query: trusted`): a client
 * whose resolved address (after the `X-Forwarded-For` walk of {@link resolveClient}) is
 * itself a trusted proxy, or lies in one of the configured client networks
 * (`serve.country_query_clients`). The peer being a trusted proxy is not enough: behind a
 * reverse proxy every request comes from it, and the query string is the client's.
 */
export class CountryQueryTrust {
  readonly clients: readonly Cidr[]

  /**
   * @param proxies the trusted proxies (their own addresses may test)
   * @param clients CIDR texts of the networks that may test. @throws UsageError on a bad CIDR
   */
  constructor(
    private readonly proxies: TrustedProxies,
    clients: readonly (string | Cidr)[] = [],
  ) {
    this.clients = clients.map((c) => (typeof c === 'string' ? parseCidr(c) : c))
  }

  /** True when `client`'s `?country=` is honoured; false without a parsed address. */
  allows(client: ResolvedClient): boolean {
    const address = client.address
    if (address === undefined) return false
    if (this.proxies.contains(address)) return true
    for (const cidr of this.clients) if (cidrContains(cidr, address)) return true
    return false
  }
}
