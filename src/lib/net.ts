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
 * Parses an IPv4 or IPv6 address; an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) becomes
 * the IPv4 address. Returns undefined for anything that is not an address, including legacy
 * IPv4 shorthands such as `1.2.3` or `0x7f.1`.
 */
export function parseIp(text: string): IpAddress | undefined {
  // Only the standard forms: dotted quads for IPv4 (no legacy `1.2.3` or octal/hex parts)
  // and RFC 4291 text for IPv6.
  if (!text.includes(':')) return parseDottedQuad(text)
  if (!ipaddr.IPv6.isValid(text)) return undefined
  try {
    const address = ipaddr.IPv6.parse(text)
    return address.isIPv4MappedAddress() ? address.toIPv4Address() : address
  } catch {
    return undefined
  }
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

/** Canonical text of an address (IPv4-mapped IPv6 shown as IPv4), or undefined. */
export function normalizeIp(text: string): string | undefined {
  return parseIp(text)?.toString()
}

/**
 * Parses a CIDR prefix such as `192.0.2.0/24` or `2001:db8::/32`. A bare address is taken as
 * a host prefix (/32 or /128). Host bits must be zero, as PostgreSQL's `cidr` type requires.
 * @throws UsageError naming the bad value
 */
export function parseCidr(text: string): Cidr {
  const value = text.trim()
  try {
    if (!value.includes('/')) {
      const address = ipaddr.parse(value)
      return [address, address.kind() === 'ipv4' ? 32 : 128]
    }
    const [address, bits] = ipaddr.parseCIDR(value)
    const network = address.kind() === 'ipv4' ? ipaddr.IPv4.networkAddressFromCIDR(value) : ipaddr.IPv6.networkAddressFromCIDR(value)
    if (network.toString() !== address.toString()) {
      throw new UsageError(`Invalid CIDR "${text}": host bits are set; did you mean ${network.toString()}/${bits}?`, 'INVALID_CIDR')
    }
    return [address, bits]
  } catch (error) {
    if (error instanceof UsageError) throw error
    throw new UsageError(`Invalid CIDR "${text}": expected an address/prefix-length such as 192.0.2.0/24 or 2001:db8::/32.`, 'INVALID_CIDR')
  }
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
