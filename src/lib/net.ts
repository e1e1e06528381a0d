/**
 * Address and prefix helpers over `ipaddr.js`: parsing, normalisation of IPv4-mapped IPv6
 * addresses (RFC 4291 §2.5.5.2), and CIDR matching.
 */
import ipaddr from 'ipaddr.js'
import {UsageError} from './errors.js'

export type IpAddress = ipaddr.IPv4 | ipaddr.IPv6
/** A parsed prefix: [network address, prefix length in bits]. */
export type Cidr = [IpAddress, number]

/**
 * Parses an IPv4 or IPv6 address in a standard form ({@link parseStandardAddress}); an
 * IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) becomes the IPv4 address, and so does the
 * deprecated IPv4-compatible form `::1.2.3.4` (RFC 4291 §2.5.5.1), which ipaddr.js reads as
 * mapped. Returns undefined
 * for anything else, including legacy IPv4 shorthands such as `1.2.3`, `010.0.0.1` or
 * `0x7f.1`; {@link addressProblem} says why.
 */
export function parseIp(text: string): IpAddress | undefined {
  const address = parseStandardAddress(text)
  if (address === undefined || address.kind() === 'ipv4') return address
  const v6 = address as ipaddr.IPv6
  return v6.isIPv4MappedAddress() ? v6.toIPv4Address() : v6
}

/**
 * Parses an address in one of the standard forms only: a dotted quad for IPv4 (four decimal
 * parts 0-255, no leading zeros) and RFC 4291 §2.2 text for IPv6, whose optional embedded
 * IPv4 part follows the same dotted-quad rule. Zone ids (`fe80::1%eth0`) are refused.
 * IPv4-mapped IPv6 addresses stay IPv6. Undefined for anything else.
 */
function parseStandardAddress(text: string): IpAddress | undefined {
  if (!text.includes(':')) return parseDottedQuad(text)
  if (!isStandardIpv6(text)) return undefined
  try {
    return ipaddr.IPv6.parse(text)
  } catch {
    return undefined
  }
}

/** True for RFC 4291 IPv6 text without a zone id and with a dotted-quad embedded IPv4 part, if any. */
function isStandardIpv6(text: string): boolean {
  if (text.includes('%') || !ipaddr.IPv6.isValid(text)) return false
  if (!text.includes('.')) return true
  return parseDottedQuad(text.slice(text.lastIndexOf(':') + 1)) !== undefined
}

/**
 * Parses a dotted-quad IPv4 address (four decimal octets 0-255, no leading zeros; the only
 * IPv4 form RFC 7239 and proxies emit, and what `ipaddr.IPv4.isValidFourPartDecimal`
 * accepts) without regular expressions: the redirect path parses one per request.
 * Undefined for anything else, including the octal/hex/short forms that inet_aton accepts.
 */
function parseDottedQuad(text: string): ipaddr.IPv4 | undefined {
  const octets = [0, 0, 0, 0]
  let part = 0
  let value = 0
  let digits = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 46 /* . */) {
      if (digits === 0 || part === 3) return undefined
      octets[part++] = value
      value = 0
      digits = 0
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && value === 0) return undefined // leading zero
      value = value * 10 + (c - 48)
      if (value > 255) return undefined
      digits++
    } else {
      return undefined
    }
  }
  if (digits === 0 || part !== 3) return undefined
  octets[3] = value
  return new ipaddr.IPv4(octets)
}

/**
 * Why `text` is not an address in a standard form (see {@link parseStandardAddress}), as a
 * clause for an error message (`leading zeros are not allowed (write 10.0.0.1)`); undefined
 * when it is one.
 */
export function addressProblem(text: string): string | undefined {
  if (parseStandardAddress(text) !== undefined) return undefined
  if (!text.includes(':')) return dottedQuadProblem(text)
  if (text.includes('%')) return 'zone ids (the %… suffix) are not allowed'
  if (text.includes('.')) {
    const problem = dottedQuadProblem(text.slice(text.lastIndexOf(':') + 1))
    if (problem) return `its embedded IPv4 part is wrong: ${problem}`
  }
  return 'not an IPv6 address in RFC 4291 text form (such as 2001:db8::1)'
}

/** Why `text` is not a dotted quad, as a clause; undefined when it is one. */
function dottedQuadProblem(text: string): string | undefined {
  if (parseDottedQuad(text) !== undefined) return undefined
  const parts = text.split('.')
  if (!parts.every((p) => /^[0-9]+$/.test(p))) {
    if (parts.some((p) => /^0x[0-9a-f]*$/i.test(p))) return 'hexadecimal parts are not allowed; write four decimal parts such as 192.0.2.1'
    return 'neither a dotted quad such as 192.0.2.1 nor IPv6 such as 2001:db8::1'
  }
  if (parts.length !== 4) return 'not a full IPv4 address (four parts)'
  if (parts.some((p) => Number(p) > 255)) return 'each part of an IPv4 address is 0-255'
  return `leading zeros are not allowed (write ${parts.map((p) => String(Number(p))).join('.')})`
}

/**
 * Why a URL host written as a number is not a dotted quad, or undefined. A host made only of
 * decimal or `0x` parts and dots (`010.0.0.1`, `0x7f.1`, `1.2.3`, `2130706433`) is never a DNS
 * name (a top-level label is not numeric), yet URL parsers (WHATWG URL §3.5, IPv4 parser)
 * and resolvers (inet_aton) read it as an IPv4 address: such a host must be a dotted quad.
 */
export function numericHostProblem(host: string): string | undefined {
  const text = host.endsWith('.') ? host.slice(0, -1) : host
  if (!/^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+))*$/i.test(text)) return undefined
  return addressProblem(text)
}

/** Canonical text of an address (IPv4-mapped IPv6 shown as IPv4), or undefined. */
export function normalizeIp(text: string): string | undefined {
  return parseIp(text)?.toString()
}

/**
 * Parses a CIDR prefix such as `192.0.2.0/24` or `2001:db8::/32` (RFC 4632 §3.1, RFC 4291
 * §2.3); the address must be in a standard form (see {@link parseStandardAddress}), the
 * length a decimal number up to 32 or 128. A bare address is taken as a host prefix (/32 or
 * /128). Host bits must be zero, as PostgreSQL's `cidr` type requires: a prefix with host
 * bits set is refused, and the error names the network it probably means.
 * @throws UsageError INVALID_CIDR naming the bad value and what is wrong with it
 */
export function parseCidr(text: string): Cidr {
  const value = text.trim()
  const slash = value.indexOf('/')
  const addressText = slash < 0 ? value : value.slice(0, slash)
  const address = parseStandardAddress(addressText)
  if (address === undefined) {
    const problem = addressProblem(addressText)
    throw new UsageError(`Invalid CIDR "${text}": ${problem}; expected an address/prefix-length such as 192.0.2.0/24 or 2001:db8::/32.`, 'INVALID_CIDR')
  }
  const maxBits = address.kind() === 'ipv4' ? 32 : 128
  if (slash < 0) return [address, maxBits]
  const bitsText = value.slice(slash + 1)
  const bits = Number(bitsText)
  if (!/^[0-9]{1,3}$/.test(bitsText) || bits > maxBits) {
    throw new UsageError(`Invalid CIDR "${text}": the prefix length must be a whole number from 0 to ${maxBits}.`, 'INVALID_CIDR')
  }
  const canonical = `${address.toString()}/${bits}`
  const network = address.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(canonical) : ipaddr.IPv6.networkAddressFromCIDR(canonical)
  if (network.toString() !== address.toString()) {
    throw new UsageError(`Invalid CIDR "${text}": host bits are set; did you mean ${network.toString()}/${bits}?`, 'INVALID_CIDR')
  }
  return reduceMappedCidr(address, bits)
}

/**
 * An IPv4-mapped IPv6 prefix (`::ffff:10.0.0.0/104`) as the IPv4 prefix it covers
 * (`10.0.0.0/8`), because {@link parseIp} reduces mapped client addresses to IPv4 and such a
 * prefix would otherwise never match one. Prefixes shorter than /96 cover more than the
 * mapped block and stay IPv6.
 */
function reduceMappedCidr(address: IpAddress, bits: number): Cidr {
  if (address.kind() === 'ipv6' && bits >= 96 && (address as ipaddr.IPv6).isIPv4MappedAddress()) return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96]
  return [address, bits]
}

/**
 * The shortest prefix length of a network that stands for some clients rather than a large
 * part of the Internet, per family: /16 (65,536 IPv4 addresses), /32 (an ISP's IPv6
 * allocation). Mirror prefixes and trusted client networks shorter than this need an
 * explicit override.
 */
export const SHORTEST_NARROW_PREFIX = {ipv4: 16, ipv6: 32} as const

/** True when `cidr` (canonical text) is shorter than {@link SHORTEST_NARROW_PREFIX} for its family, like `0.0.0.0/0` or `::/0`. @throws UsageError when it is not a CIDR */
export function isBroadPrefix(cidr: string): boolean {
  const [address, bits] = parseCidr(cidr)
  return bits < SHORTEST_NARROW_PREFIX[address.kind()]
}

/** Canonical text form of a CIDR (`network/bits`). @throws UsageError */
export function normalizeCidr(text: string): string {
  const [address, bits] = parseCidr(text)
  return `${address.toString()}/${bits}`
}

/** True when `address` lies inside `cidr` (same family only). */
export function cidrContains(cidr: Cidr, address: IpAddress): boolean {
  if (cidr[0].kind() !== address.kind()) return false
  return (address as ipaddr.IPv4).match(cidr as [ipaddr.IPv4, number])
}

/**
 * The ipaddr.js range names (`unicast`, `private`, `loopback`, `linkLocal`, `multicast`,
 * `reserved`, `uniqueLocal`, ...; IANA special-purpose registries, RFC 6890) of the first and
 * the last address of a prefix, without repeats.
 */
export function cidrRanges([address, bits]: Cidr): string[] {
  const text = `${address.toString()}/${bits}`
  const last = address.kind() === 'ipv4' ? ipaddr.IPv4.broadcastAddressFromCIDR(text) : ipaddr.IPv6.broadcastAddressFromCIDR(text)
  return [...new Set([address.range(), last.range()])]
}

/** The ipaddr.js ranges that no client on the Internet can send from (RFC 1918, RFC 4193, loopback, link-local). */
const LOCAL_RANGES = new Set(['private', 'loopback', 'linkLocal', 'uniqueLocal'])

/**
 * True when every address of `cidr` (canonical text) lies in one range that is not routed on
 * the Internet (private, unique local, loopback or link-local), like `10.0.0.0/8`: a proxy
 * fleet there is common, and trusting it lets no outside client choose its own address.
 * @throws UsageError when it is not a CIDR
 */
export function isLocalPrefix(cidr: string): boolean {
  const ranges = cidrRanges(parseCidr(cidr))
  return ranges.length === 1 && LOCAL_RANGES.has(ranges[0])
}

/** True when `text` is an address in a range not routed on the Internet (see {@link isLocalPrefix}); false for anything else, a non-address included. */
export function isLocalAddress(text: string): boolean {
  const address = parseIp(text)
  return address !== undefined && LOCAL_RANGES.has(address.range())
}
