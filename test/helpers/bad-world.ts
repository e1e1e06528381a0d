/**
 * Pieces of the "bad mirror world" e2e test (test/e2e/bad-mirror-world.test.ts) that are not
 * about one client: where the mirrors listen, faults made in place on a mirror's tree.
 */
import {spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {readdirSync, readFileSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'

const KiB = 1024

/** Client addresses by country (GeoIP2-City-Test: London, Linköping, Tacoma); one per client, see the module doc. */
export const GB = (n: number) => `81.2.69.${160 + n}`
export const SE = (n: number) => `89.160.20.${128 + n}`
export const US = (n: number) => `216.160.83.${56 + n}`
/** IPv6 client addresses the GeoIP test database places in GB (2a02:d3c0::/29, northern England). */
export const GB6 = (n: number) => `2a02:d3c0::${n.toString(16)}`

/** One mirror of the world: where its nginx listens and where the registry places it. */
export interface MirrorSpec {
  name: string
  /** nginx `listen` address ([::1] for the IPv6 one). */
  address: string
  country: string
  lat: number
  lon: number
  extra?: string
}

/** The world's mirrors (their faults: the table in test/e2e/bad-mirror-world.test.ts). */
export const MIRRORS: MirrorSpec[] = [
  {name: 'corrupt.gb', address: '127.0.0.11', country: 'GB', lat: 50.12, lon: -5.54},
  {name: 'missing.se', address: '127.0.0.12', country: 'SE', lat: 59.33, lon: 18.07},
  {name: 'norange.us', address: '127.0.0.13', country: 'US', lat: 47.6, lon: -122.3, extra: 'max_ranges 0;'},
  {name: 'good.nl', address: '127.0.0.14', country: 'NL', lat: 52.37, lon: 4.9},
  {name: 'good.us', address: '127.0.0.15', country: 'US', lat: 47.3, lon: -122.2},
  {name: 'v6only.gb', address: '[::1]', country: 'GB', lat: 51.5, lon: -0.1},
]

/** The SHA-256 of `bytes`, hex. */
export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')

/** Flips one byte in every 64 KiB of `path`, then gives it back its mtime: same size, same mtime, other bytes. */
export function corruptInPlace(path: string): void {
  const before = statSync(path)
  const bytes = readFileSync(path)
  for (let offset = 100; offset < bytes.length; offset += 64 * KiB) bytes[offset] ^= 0xff
  writeFileSync(path, bytes)
  utimesSync(path, before.atime, before.mtime)
}

export function filesUnder(dir: string, rel = ''): string[] {
  const out: string[] = []
  for (const entry of readdirSync(join(dir, rel), {withFileTypes: true})) {
    const path = rel ? `${rel}/${entry.name}` : entry.name
    if (entry.isDirectory()) out.push(...filesUnder(dir, path))
    else if (entry.isFile()) out.push(path)
  }
  return out
}

export const hasIpv6Loopback = () => spawnSync('sh', ['-c', 'ip -6 addr show dev lo 2>/dev/null | grep -q "inet6 ::1/128"']).status === 0
