/**
 * The stable, non-cryptographic hashes behind weighted rendezvous (highest-random-weight)
 * hashing: MurmurHash3's 32-bit finaliser (Austin Appleby, public domain) over the client
 * network's bytes and the mirror id. Pure integer arithmetic (`Math.imul`), so the value is
 * identical on every process, replica and restart.
 */
import type {IpAddress} from '../net.js'

/** MurmurHash3 fmix32. */
function fmix32(h: number): number {
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

function mix(h: number, k: number): number {
  k = Math.imul(k, 0xcc9e2d51)
  k = (k << 15) | (k >>> 17)
  k = Math.imul(k, 0x1b873593)
  h ^= k
  h = (h << 13) | (h >>> 19)
  return (Math.imul(h, 5) + 0xe6546b64) | 0
}

/**
 * A 32-bit key of the client's network: the address masked to `prefixV4` / `prefixV6`
 * bits (the /24 or /48 the client sits in), hashed MurmurHash3-style. IPv4 and IPv6
 * networks use different seeds.
 */
export function clientNetworkKey(address: IpAddress, prefixV4: number, prefixV6: number): number {
  if (address.kind() === 'ipv4') {
    const o = (address as unknown as {octets: number[]}).octets
    let value = ((o[0] << 24) | (o[1] << 16) | (o[2] << 8) | o[3]) >>> 0
    value = prefixV4 <= 0 ? 0 : prefixV4 >= 32 ? value : (value & (~0 << (32 - prefixV4))) >>> 0
    return fmix32(mix(0x3c6ef372, value) ^ 4)
  }
  const parts = (address as unknown as {parts: number[]}).parts
  let h = 0x6a09e667 | 0
  let bits = prefixV6
  for (let i = 0; i < 8; i += 2) {
    let word = ((parts[i] << 16) | parts[i + 1]) >>> 0
    if (bits <= 0) word = 0
    else if (bits < 32) word = (word & (~0 << (32 - bits))) >>> 0
    bits -= 32
    h = mix(h, word)
  }
  return fmix32(h ^ 16)
}

/**
 * The rendezvous key for `select.sticky_key: network+path`: the client network key mixed
 * with the path's {@link fnv1a32}, so one network's files spread over a pool while each file
 * stays on one mirror. Unsigned 32-bit.
 */
export function networkPathKey(networkKey: number, path: string): number {
  return fmix32(mix(mix(networkKey, fnv1a32(path)), 0x7f4a7c15) ^ 8)
}

const TWO_POW_21 = 2 ** 21
const TWO_POW_53 = 2 ** 53

/**
 * A uniform value in (0, 1) from (client network key, mirror id), with 53 bits of
 * resolution: two independent 32-bit mixes form the high 32 and low 21 bits.
 */
export function uniform(networkKey: number, mirrorId: number): number {
  const a = mix(networkKey, mirrorId)
  const hi = fmix32(a ^ 0x2545f491)
  const lo = fmix32(mix(a, 0x9e3779b9) ^ 8) >>> 11
  return (hi * TWO_POW_21 + lo + 0.5) / TWO_POW_53
}

/**
 * Weighted rendezvous key (smaller wins): -ln(U) / weight, the exponential-race form whose
 * winning probabilities are exactly proportional to the weights (Schindelhauer & Schomaker,
 * "Weighted distributed hash tables", SPAA 2005). Weight must be > 0.
 */
export function rendezvousKey(networkKey: number, mirrorId: number, weight: number): number {
  return -Math.log(uniform(networkKey, mirrorId)) / weight
}

/**
 * 32-bit FNV-1a of a string's UTF-16 code units (Fowler, Noll, Vo; public domain): a stable
 * hash of text, identical on every process and restart. Returns an unsigned 32-bit integer.
 */
export function fnv1a32(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193)
  return h >>> 0
}
