/**
 * Starts `mb serve` (the compiled CLI) as a child process on a free loopback port and waits
 * for its "listening" log line; raw HTTP requests with exact targets and headers.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import http from 'node:http'
import {BIN, hermeticEnv, NO_CONFIG} from './cli.js'

export interface ServeProcess {
  child: ChildProcess
  url: string
  port: number
  /** Everything the process wrote so far. */
  output(): string
  stop(): Promise<void>
}

/**
 * Spawns `mb serve --listen 127.0.0.1:0 --retry-window 0 --content-interval 0 ARGS` (retries
 * and background content checks off unless ARGS set `--retry-window` or `--content-interval`)
 * with `env`; rejects on early exit or after 120 s.
 * @param options.bin the CLI entry point (default: this tree's bin/run.js)
 * @param options.fileLimit run under `ulimit -n` this many open files (through bash; the
 *        child is still mb itself: bash `exec`s it)
 */
export async function startServe(args: string[], env: Record<string, string | undefined>, options: {bin?: string; fileLimit?: number} = {}): Promise<ServeProcess> {
  // A config file is named with --config; MB_CONFIG from `env` is not used.
  const fullEnv = hermeticEnv({...env, MB_CONFIG: NO_CONFIG})
  // Retries off unless the test asks (`--retry-window`): every request of a test comes from
  // 127.0.0.1, and repeated requests for one file would otherwise walk the ranking.
  const retries = args.includes('--retry-window') ? [] : ['--retry-window', '0']
  // Content checks off unless the test asks (`--content-interval`): a round at start would
  // fetch pieces from the test's mirrors beside the requests the test counts.
  const contentChecks = args.includes('--content-interval') ? [] : ['--content-interval', '0']
  const argv = [options.bin ?? BIN, 'serve', '--listen', '127.0.0.1:0', ...retries, ...contentChecks, ...args]
  const child =
    options.fileLimit === undefined
      ? spawn(process.execPath, argv, {env: fullEnv, stdio: ['ignore', 'pipe', 'pipe']})
      : spawn('bash', ['-c', `ulimit -n ${options.fileLimit} && exec "$0" "$@"`, process.execPath, ...argv], {env: fullEnv, stdio: ['ignore', 'pipe', 'pipe']})
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (out += d))
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mb serve did not start within 120 s:\n${out}`)), 120_000)
    const check = () => {
      const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)".*"msg":"listening"/.exec(out)
      if (m) {
        clearTimeout(timer)
        child.stdout!.off('data', check)
        resolve(m[1])
      }
    }
    child.stdout!.on('data', check)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`mb serve exited with ${code} before listening:\n${out}`))
    })
  })
  return {
    child,
    url,
    port: Number(new URL(url).port),
    output: () => out,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return
      const exited = new Promise((r) => child.once('exit', r))
      child.kill('SIGTERM')
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000)
      await exited
      clearTimeout(t)
    },
  }
}

/**
 * The environment that runs a child process's `Date.now()` `speed` times as fast as real time
 * (./fast-clock.mjs): a test clock for windows of minutes.
 */
export function fastClockEnv(speed: number): Record<string, string> {
  return {NODE_OPTIONS: `--import=${new URL('./fast-clock.mjs', import.meta.url).pathname}`, MB_TEST_CLOCK_SPEED: String(speed)}
}

export interface RawResponse {
  status: number
  headers: http.IncomingHttpHeaders
  /** Header lines as sent, for repeated headers such as Link. */
  rawHeaders: string[]
  body: Buffer
}

/** Sends one request with the exact target (no normalisation) and returns the full answer. */
export function request(port: number, target: string, options: {method?: string; headers?: Record<string, string>} = {}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, path: target, method: options.method ?? 'GET', headers: options.headers, agent: false}, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({status: res.statusCode!, headers: res.headers, rawHeaders: res.rawHeaders, body: Buffer.concat(chunks)}))
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end()
  })
}

/** Values of every header line named `name` (case-insensitive), in order. */
export function headerLines(res: RawResponse, name: string): string[] {
  const out: string[] = []
  for (let i = 0; i < res.rawHeaders.length; i += 2) if (res.rawHeaders[i].toLowerCase() === name.toLowerCase()) out.push(res.rawHeaders[i + 1])
  return out
}
