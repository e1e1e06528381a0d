/**
 * Content-check benchmark (issue 45: "checking is cheap"): what reading whole copies costs mb.
 *
 * - SHA-1 throughput per core: 256 KiB pieces of a buffer hashed one after another, each
 *   piece digested, with node:crypto (OpenSSL) and with hash-wasm, in this process (one core);
 *   MB/s of the faster, against the 400 MB/s target.
 * - CPU per GB checked: the check's own read path (src/lib/probe/http.ts `getWithinOrigin` and
 *   `digestPieces`, as src/lib/probe/content-check.ts uses them) over ranged GETs of at most
 *   64 MiB from a mirror played by a child process (node http, the file in memory: its CPU is
 *   not counted here), this process's CPU time (process.cpuUsage) per GiB received.
 *
 *   npm run bench -- content [--mib N] [--rounds N]
 *
 * Medians of `--rounds` interleaved rounds. Run on a quiet machine for figures; `--mib 16
 * --rounds 1` checks that it runs.
 */
import {spawn} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {createRequire} from 'node:module'
import {parseArgs} from 'node:util'
import {ConfigSchema} from '../src/lib/config/schema.js'
import {digestPieces, getWithinOrigin, ProbeClient} from '../src/lib/probe/http.js'
import {clientOptions} from '../src/lib/probe/run.js'
import {median, verdict} from './lib.js'

const PIECE = 256 * 1024
const REQUEST = 64 * 1024 * 1024
const MiB = 1024 * 1024

/** Seconds `fn` took on the CPU (user + system) of this process. */
async function cpuSeconds(fn: () => Promise<void> | void): Promise<number> {
  const before = process.cpuUsage()
  await fn()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / 1e6
}

/** Hashes `buffer` in {@link PIECE} pieces with node:crypto, each piece digested. */
function nodeSha1(buffer: Buffer): number {
  let n = 0
  for (let at = 0; at < buffer.length; at += PIECE)
    n += createHash('sha1')
      .update(buffer.subarray(at, at + PIECE))
      .digest().length
  return n
}

/** The same with hash-wasm's SHA-1 (one instance, re-initialised per piece). */
async function wasmSha1(): Promise<(buffer: Buffer) => number> {
  const {createSHA1} = createRequire(import.meta.url)('hash-wasm') as {createSHA1(): Promise<{init(): unknown; update(b: Uint8Array): unknown; digest(f: 'binary'): Uint8Array}>}
  const hasher = await createSHA1()
  return (buffer) => {
    let n = 0
    for (let at = 0; at < buffer.length; at += PIECE) {
      hasher.init()
      hasher.update(buffer.subarray(at, at + PIECE))
      n += hasher.digest('binary').length
    }
    return n
  }
}

/** A child process serving `bytes` random bytes at /file with single ranges (RFC 9110 §14.2). */
async function startMirror(bytes: number): Promise<{port: number; stop(): void}> {
  const script = `
    const http = require('node:http'); const body = require('node:crypto').randomBytes(${bytes});
    const server = http.createServer((req, res) => {
      const m = /^bytes=(\\d+)-(\\d+)$/.exec(req.headers.range || '');
      if (!m) { res.writeHead(200, {'content-length': body.length}); return res.end(body) }
      const start = Number(m[1]), end = Math.min(Number(m[2]), body.length - 1);
      res.writeHead(206, {'content-range': 'bytes ' + start + '-' + end + '/' + body.length, 'content-length': end - start + 1});
      res.end(body.subarray(start, end + 1));
    });
    server.listen(0, '127.0.0.1', () => process.stdout.write(String(server.address().port) + '\\n'));`
  const child = spawn(process.execPath, ['-e', script], {stdio: ['ignore', 'pipe', 'inherit']})
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout.once('data', (d: Buffer) => resolve(Number(String(d).trim())))
    child.once('exit', (code) => reject(new Error(`the mirror process exited (${code})`)))
  })
  return {port, stop: () => child.kill()}
}

/** Reads `bytes` of the mirror's /file as a whole-copy check does; returns the pieces hashed. */
async function checkRead(client: ProbeClient, port: number, bytes: number): Promise<number> {
  let pieces = 0
  for (let start = 0; start < bytes; start += REQUEST) {
    const end = Math.min(bytes, start + REQUEST) - 1
    const answer = await getWithinOrigin(
      client,
      'ipv4',
      `http://127.0.0.1:${port}/file`,
      {range: `bytes=${start}-${end}`},
      async (response) => digestPieces(response.body, PIECE, end - start + 1),
      600,
    )
    if ('failure' in answer || answer.bytes !== end - start + 1) throw new Error(`the read failed: ${JSON.stringify(answer)}`)
    pieces += answer.sha1s.length
  }
  return pieces
}

/** Entry point: `npm run bench -- content [--mib N] [--rounds N]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({args: argv, options: {mib: {type: 'string', default: '1024'}, rounds: {type: 'string', default: '3'}}})
  const bytes = Number(values.mib) * MiB
  const rounds = Number(values.rounds)
  const buffer = randomBytes(Math.min(bytes, 256 * MiB))
  const wasm = await wasmSha1()
  const mirror = await startMirror(bytes)
  const client = new ProbeClient(clientOptions(ConfigSchema.parse({}).probe))
  const node: number[] = []
  const hw: number[] = []
  const perGiB: number[] = []
  try {
    nodeSha1(buffer)
    wasm(buffer)
    await checkRead(client, mirror.port, Math.min(bytes, REQUEST)) // warm: connections, JIT
    for (let r = 0; r < rounds; r++) {
      node.push(buffer.length / 1e6 / (await cpuSeconds(() => void nodeSha1(buffer))))
      hw.push(buffer.length / 1e6 / (await cpuSeconds(() => void wasm(buffer))))
      let pieces = 0
      const seconds = await cpuSeconds(async () => {
        pieces = await checkRead(client, mirror.port, bytes)
      })
      if (pieces !== Math.ceil(bytes / PIECE)) throw new Error(`${pieces} pieces hashed of ${Math.ceil(bytes / PIECE)}`)
      perGiB.push(seconds / (bytes / 1024 ** 3))
    }
  } finally {
    await client.close()
    mirror.stop()
  }
  console.log(`SHA-1 in 256 KiB pieces, one core: node:crypto ${median(node).toFixed(0)} MB/s, hash-wasm ${median(hw).toFixed(0)} MB/s (${rounds} round(s) of ${(buffer.length / MiB).toFixed(0)} MiB)`)
  console.log(`whole-copy check read path (ranged GETs of 64 MiB, SHA-1 per piece as it streams): ${median(perGiB).toFixed(2)} CPU seconds per GiB checked (${(bytes / MiB).toFixed(0)} MiB per round)`)
  verdict('SHA-1 per core (the faster)', Math.max(median(node), median(hw)), 400, 'MB/s', 'higher')
}
