/**
 * Helpers shared by the benchmarks (bench/*.ts): the PostgreSQL admin URL and database URLs, a
 * free loopback port, a deterministic PRNG, the wrk runner, medians and the one-line target
 * verdict that every benchmark's summary prints.
 */
import {spawnSync} from 'node:child_process'
import {createServer} from 'node:net'

/** The PostgreSQL the benchmarks create their databases on (`MB_BENCH_ADMIN_URL` overrides). */
export const ADMIN_URL = process.env.MB_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'

/** The URL of database `name` on the admin URL's server. */
export function dbUrl(name: string): string {
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  return url.toString()
}

/** A TCP port free on 127.0.0.1 at the time of the call. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as {port: number}).port
      s.close(() => resolve(port))
    })
  })
}

/** Deterministic PRNG (mulberry32) in [0, 1), so datasets of one shape are identical. */
export function rng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** What one wrk run reports: requests/s, latency percentiles (ms), totals and error lines. */
export interface WrkResult {
  rps: number
  p50ms: number
  p99ms: number
  requests: number
  errors: string
  non3xx: number
}

/** wrk's latency text ("812.00us", "1.20ms", "2.01s") in milliseconds; NaN when unreadable. */
function ms(text: string): number {
  const m = /([\d.]+)(us|ms|s)/.exec(text)
  if (!m) return Number.NaN
  const v = Number(m[1])
  return m[2] === 'us' ? v / 1000 : m[2] === 's' ? v * 1000 : v
}

/**
 * Runs wrk (synchronously: the server measured must be another process) against `url` with
 * the Lua request script `script`, `connections` connections on `threads` threads for
 * `seconds`. Throws when wrk fails (not installed: apt-get install wrk).
 */
export function runWrk(url: string, script: string, connections: number, seconds: number, threads: number): WrkResult {
  const r = spawnSync('wrk', [`-t${threads}`, `-c${connections}`, `-d${seconds}s`, '--latency', '--timeout', '5s', '-s', script, url], {encoding: 'utf8', timeout: (seconds + 30) * 1000})
  if (r.status !== 0) throw new Error(`wrk failed: ${r.stderr || r.stdout}`)
  const out = r.stdout
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1])
  const p50 = /^\s+50%\s+(\S+)/m.exec(out)?.[1] ?? ''
  const p99 = /^\s+99%\s+(\S+)/m.exec(out)?.[1] ?? ''
  const requests = Number(/(\d+) requests in/.exec(out)?.[1])
  const errors = /Socket errors:.*$/m.exec(out)?.[0] ?? ''
  const non3xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0)
  return {rps, p50ms: ms(p50), p99ms: ms(p99), requests, errors, non3xx}
}

/** The median of `xs` (the mean of the middle two for an even count); NaN for none. */
export function median(xs: number[]): number {
  if (xs.length === 0) return Number.NaN
  const sorted = [...xs].sort((x, y) => x - y)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/** A target's outcome: the aligned line printed and whether the value met the target. */
export interface Verdict {
  line: string
  pass: boolean
}

/** Figures at the precision a summary line needs: 3 significant digits, no exponent. */
function figure(x: number): string {
  if (!Number.isFinite(x)) return String(x)
  const abs = Math.abs(x)
  return abs >= 100 ? x.toFixed(0) : abs >= 10 ? x.toFixed(1) : x.toFixed(abs >= 1 ? 2 : 3)
}

/**
 * Prints (and returns) one aligned summary line for a target, e.g.
 * `snapshot load, 5M files   target <= 60 s   measured 42.1 s   PASS` (columns padded).
 * `better: 'lower'` passes when `value <= target`, `'higher'` when `value >= target`; a
 * value that is not a finite number (not measured) FAILs. `unit` is printed after both
 * figures ('' for a ratio or a count).
 */
export function verdict(name: string, value: number, target: number, unit: string, better: 'lower' | 'higher'): Verdict {
  const pass = Number.isFinite(value) && (better === 'lower' ? value <= target : value >= target)
  const u = unit ? ` ${unit}` : ''
  const line = `  ${name.padEnd(44)} ${`target ${better === 'lower' ? '<=' : '>='} ${figure(target)}${u}`.padEnd(32)} ${`measured ${figure(value)}${u}`.padEnd(30)} ${pass ? 'PASS' : 'FAIL'}`
  console.log(line)
  return {line, pass}
}
