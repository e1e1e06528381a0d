/**
 * Pieces of the "bad mirror world" e2e test (test/e2e/bad-mirror-world.test.ts) that are not
 * about one client: an nginx from a config body, faults made in place on a mirror's tree.
 */
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {createHash} from 'node:crypto'
import {existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {freePort, nginxConf} from './servers.js'

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

/** The server binary (nginx-light), named once. */
const NGINX = 'nginx'

/** The SHA-256 of `bytes`, hex. */
export const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')

/**
 * An nginx (foreground, one worker) from the `http { }` body that `render` writes on free
 * ports, each drawn by one call of `port()`; stopped by its PID. nginx writes its pid file only
 * once every `listen` is bound, so that file, not a connection (which another process holding
 * the port would also accept), says it is up. A port taken between its draw and nginx's bind
 * (files run in parallel) makes nginx exit: the body is rendered again on new ports, up to
 * four times; then the last error is thrown, with nginx's output.
 */
export async function startNginxWith(dir: string, render: (port: () => Promise<number>) => Promise<string>): Promise<{stop(): Promise<void>}> {
  mkdirSync(join(dir, 'tmp'), {recursive: true})
  let lastError: Error | undefined
  for (let attempt = 0; attempt < 4; attempt++) {
    rmSync(join(dir, 'nginx.pid'), {force: true})
    writeFileSync(join(dir, 'nginx.conf'), nginxConf(dir, `types { text/xml xml; }\n  ${await render(freePort)}`))
    const child: ChildProcess = spawn(NGINX, ['-p', dir, '-c', join(dir, 'nginx.conf')], {stdio: ['ignore', 'pipe', 'pipe'], env: {...process.env, TZ: 'UTC'}})
    let out = ''
    child.stdout?.on('data', (d) => (out += d))
    child.stderr?.on('data', (d) => (out += d))
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    for (let i = 0; i < 200 && child.exitCode === null && !existsSync(join(dir, 'nginx.pid')); i++) await new Promise((r) => setTimeout(r, 50))
    if (child.exitCode === null && existsSync(join(dir, 'nginx.pid'))) {
      return {
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return
          child.kill('SIGTERM')
          const t = setTimeout(() => child.kill('SIGKILL'), 5000)
          await exited
          clearTimeout(t)
        },
      }
    }
    child.kill('SIGKILL')
    await exited
    lastError = new Error(`nginx did not start: ${out}${existsSync(join(dir, 'error.log')) ? readFileSync(join(dir, 'error.log'), 'utf8') : ''}`)
  }
  throw lastError
}

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
