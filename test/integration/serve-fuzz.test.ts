// @store-independent: HTTP parsing under hostile input
/**
 * A bounded, seeded fuzz test of `mb serve` (a child process, on the configured backend) over
 * raw sockets: a few thousand requests with hostile targets (traversal in every encoding,
 * NUL, overlong and invalid UTF-8, absolute paths, huge targets), headers (huge, duplicated,
 * malformed Range, forged proxy headers) and methods, some pipelined. It asserts that no
 * answer is a 5xx, that every request is answered or closed within a timeout (no hang), and
 * that no response carries a byte of a secret file that lies next to the served root.
 *
 * The seed is printed; `MB_FUZZ_SEED=N` replays a run, `MB_FUZZ_REQUESTS=N` changes its size.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const SEED = process.env.MB_FUZZ_SEED ? Number(process.env.MB_FUZZ_SEED) : Math.floor(Math.random() * 2 ** 31)
const REQUESTS = process.env.MB_FUZZ_REQUESTS ? Number(process.env.MB_FUZZ_REQUESTS) : 3000
const CONCURRENCY = 16
const TIMEOUT_MS = 10_000
const SECRET = `MB-FUZZ-SECRET-${SEED.toString(36)}-7f3a9c`

/** mulberry32: a small seeded PRNG, uniform in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
  }
}

/** Ways to write `..` and `/`, plain and encoded (single, double, overlong, fullwidth, backslash). */
const DOTDOT = ['..', '%2e%2e', '%2E%2E', '.%2e', '%2e.', '%252e%252e', '%c0%ae%c0%ae', '%e0%80%ae%e0%80%ae', '%ef%bc%8e%ef%bc%8e', '..%00', '..;', '...', '.. ', '%u002e%u002e']
const SLASH = ['/', '%2f', '%2F', '%252f', '\\', '%5c', '%c0%af', '%e0%80%af', '//', '/./', '%00/', ';/']
const SEGMENTS = [
  'pub',
  'pub/',
  'small.txt',
  'big.iso',
  'nope',
  '.',
  '',
  '%00',
  '\u0000',
  'secret.txt',
  '%ff',
  '%fe%ff',
  '%ed%a0%80',
  '%c3',
  '\u00ff',
  'é',
  '%e2%82%ac',
  '~',
  '*',
  '%',
  '%%',
  '%zz',
  '?',
]
const SUFFIXES = ['', '/', '?', '?x=1', '#frag', '%00', '.meta4', '.metalink', '.sha256', '.md5', '.mirrorlist', '.btih', '?mirrorlist', '?country=DE', ';x', '%00.txt']
const METHODS = ['GET', 'GET', 'GET', 'GET', 'HEAD', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'PATCH', 'PROPFIND', 'get', 'BREW', 'G\u0000T', 'GET /x', '']
const VERSIONS = ['HTTP/1.1', 'HTTP/1.1', 'HTTP/1.1', 'HTTP/1.0', 'HTTP/0.9', 'HTTP/2.0', 'HTTP/1.1x', '']

function pick<T>(rand: () => number, items: readonly T[]): T {
  return items[Math.floor(rand() * items.length)]
}

/** A request target aiming at the secret (or elsewhere) through one hostile construction. */
function hostileTarget(rand: () => number, root: string): string {
  const secretPath = join(root, '..', 'secret.txt')
  switch (Math.floor(rand() * 9)) {
    case 0: {
      // /pub/../../secret.txt in mixed encodings
      const depth = 1 + Math.floor(rand() * 6)
      let target = rand() < 0.5 ? '/pub' : ''
      for (let i = 0; i < depth; i++) target += pick(rand, SLASH) + pick(rand, DOTDOT)
      return `${target}${pick(rand, SLASH)}secret.txt${pick(rand, SUFFIXES)}`
    }
    case 1: // absolute paths on the host, in several spellings
      return pick(rand, [`/${secretPath}`, `/${encodeURIComponent(secretPath)}`, `${secretPath}`, `file://${secretPath}`, `/..${secretPath}`, `/%2e%2e${secretPath.replaceAll('/', '%2f')}`])
    case 2: // absolute-form targets
      return `http://${pick(rand, ['127.0.0.1', 'evil.example', 'localhost:1', '[::1]', ''])}/${pick(rand, DOTDOT)}/${pick(rand, DOTDOT)}/secret.txt`
    case 3: {
      // random segments with odd bytes
      const n = 1 + Math.floor(rand() * 8)
      let target = ''
      for (let i = 0; i < n; i++) target += `/${pick(rand, SEGMENTS)}`
      return target + pick(rand, SUFFIXES)
    }
    case 4: {
      // raw random bytes (latin1: every byte value but CR/LF/space)
      const n = 1 + Math.floor(rand() * 64)
      let target = '/'
      for (let i = 0; i < n; i++) {
        const c = Math.floor(rand() * 256)
        target += c === 13 || c === 10 || c === 32 ? '_' : String.fromCharCode(c)
      }
      return target
    }
    case 5: // huge targets
      return `/${pick(rand, ['a', '../', '%2e%2e/', 'pub/'])}`.repeat(500 + Math.floor(rand() * 20_000))
    case 6: // real files, decorated
      return `/pub/${pick(rand, ['small.txt', 'big.iso', 'sub/', ''])}${pick(rand, SUFFIXES)}`
    case 7:
      return pick(rand, ['*', '', '/', '//', '///', 'secret.txt', '../secret.txt', '.', '/%', '/?', '/#', '/\u0000', '/%00', '/.well-known/../../secret.txt'])
    default:
      return `/pub/big.iso${pick(rand, SLASH)}${pick(rand, DOTDOT)}${pick(rand, SLASH)}${pick(rand, DOTDOT)}${pick(rand, SLASH)}secret.txt`
  }
}

/** Extra header lines: hostile values, huge ones, duplicates, malformed framing. */
function hostileHeaders(rand: () => number, framing: boolean): string[] {
  const lines: string[] = []
  const n = Math.floor(rand() * (framing ? 4 : 2))
  for (let i = 0; i < n; i++) {
    const semantic = [
      `Range: ${pick(rand, ['bytes=0-0', 'bytes=-1', 'bytes=5-1', 'bytes=0-0,1-1,2-2', 'bytes=99999999999999999999-', 'bytes=a-b', 'lines=1-2', 'bytes=0-0'.repeat(200)])}`,
      `X-Forwarded-For: ${pick(rand, ['1.2.3', '010.0.0.1', '::ffff:1.2.3.4', 'unknown', '1.1.1.1, 2.2.2.2', '\u00ff', '999.999.999.999', '1.2.3.4'])}`,
      `X-Forwarded-Proto: ${pick(rand, ['https', 'gopher', 'https, http', ''])}`,
      `Accept: ${pick(rand, ['application/metalink4+xml', 'application/metalink+xml', '*/*;q=x', 'text/html'.repeat(100)])}`,
      `If-Modified-Since: ${pick(rand, ['yesterday', 'Thu, 01 Jan 1970 00:00:00 GMT', 'Fri, 01 Jan 2100 00:00:00 GMT'])}`,
      `If-None-Match: ${pick(rand, ['*', '"x"', 'W/'])}`,
      `User-Agent: ${pick(rand, ['curl/8', 'Wget/1.21', '\u00ff\u00fe', ''])}`,
    ]
    if (!framing) {
      lines.push(pick(rand, semantic))
      continue
    }
    lines.push(
      pick(rand, [
        ...semantic,
        `Host: ${pick(rand, ['evil.example', 'a>; rel=x', 'h\u00ff', '', 'x'.repeat(5000)])}`,
        `If-Modified-Since: \u0000`,
        `Content-Length: ${pick(rand, ['0', '-1', 'abc', '0, 0', '1e3', '0x10'])}`,
        `Transfer-Encoding: ${pick(rand, ['x', 'chunked, x', 'identity'])}`,
        `X-Huge: ${'h'.repeat(Math.floor(rand() * 40_000))}`,
        `Cookie: ${'c=1; '.repeat(Math.floor(rand() * 3000))}`,
        `Bad Header: x`,
        `X-Nul: a\u0000b`,
        `: empty-name`,
        `X-Fold: a\r\n folded`,
      ]),
    )
  }
  return lines
}

interface Outcome {
  statuses: number[]
  timedOut: boolean
  leaked: boolean
  bytes: number
}

/** Sends `request` (raw bytes) on a fresh connection and reads until the server closes it. */
function send(port: number, request: Buffer): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      socket.destroy()
    }, TIMEOUT_MS)
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', () => {}) // a reset after a refused request is an allowed end
    socket.on('close', () => {
      clearTimeout(timer)
      const body = Buffer.concat(chunks)
      const text = body.toString('latin1')
      const statuses = [...text.matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]))
      resolve({statuses, timedOut, leaked: body.includes(SECRET), bytes: body.length})
    })
    // No half-close after the request: node's http server then drops answers still in
    // progress (httpAllowHalfOpen is false), which would hide what mb answers.
    socket.write(request)
  })
}

/** One raw request (or two, pipelined) and the method of each. */
interface FuzzRequest {
  bytes: Buffer
  methods: string[]
}

function buildRequest(rand: () => number, root: string, port: number): FuzzRequest {
  const methods: string[] = []
  const one = () => {
    // Most requests are well framed, so that their hostile targets and header values reach
    // mb's routes; the rest are hostile in their framing too (method, version, headers).
    const framing = rand() < 0.35
    const method = framing ? pick(rand, METHODS) : pick(rand, ['GET', 'GET', 'GET', 'HEAD', 'HEAD', 'OPTIONS', 'POST'])
    methods.push(method)
    const version = framing ? pick(rand, VERSIONS) : 'HTTP/1.1'
    const target = hostileTarget(rand, root)
    const host = !framing || rand() < 0.9 ? [`Host: 127.0.0.1:${port}`] : []
    return `${method} ${target} ${version}\r\n${[...host, ...hostileHeaders(rand, framing)].map((line) => `${line}\r\n`).join('')}\r\n`
  }
  const text = rand() < 0.1 ? one() + one() : one()
  // Targets and values are latin1 strings: each char one byte, as a hostile client sends
  // them. The last request asks the server to close, so that an answered exchange ends.
  return {bytes: Buffer.from(`${text.slice(0, -2)}Connection: close\r\n\r\n`, 'latin1'), methods}
}

/**
 * 501 is the answer for a method mb does not implement (RFC 9110 §15.6.2), so it is allowed
 * when the exchange held such a method; any other 5xx is a failure.
 */
function allowed(status: number, methods: string[]): boolean {
  return status < 500 || (status === 501 && methods.some((m) => m !== 'GET' && m !== 'HEAD'))
}

describe(`mb serve: seeded fuzz over raw sockets (${backend})`, function () {
  this.timeout(120_000)
  let database: TestDatabase
  let serve: ServeProcess
  let dir: string
  let root: string

  before(async () => {
    database = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-fuzz-'))
    root = join(dir, 'root')
    mkdirSync(join(root, 'pub', 'sub'), {recursive: true})
    writeFileSync(join(dir, 'secret.txt'), `${SECRET}\n`.repeat(100))
    writeFileSync(join(root, 'pub', 'small.txt'), 'small file\n')
    writeFileSync(join(root, 'pub', 'big.iso'), 'b'.repeat(10_000))
    // The index rows below say mtime 0: so does the disk (a differing file would be served by the origin).
    for (const f of ['small.txt', 'big.iso']) utimesSync(join(root, 'pub', f), 0, 0)
    writeFileSync(join(root, 'pub', 'sub', 'x.txt'), 'x\n')
    const db = await database.open()
    try {
      await db.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: 'http://m.example/'}).execute()
      await db.db
        .insertInto('file')
        .values([
          {path: 'pub/big.iso', size: 10_000, mtime: 0, mirrors: [1]},
          {path: 'pub/small.txt', size: 11, mtime: 0, mirrors: []},
        ])
        .execute()
    } finally {
      await db.close()
    }
    serve = await startServe(['--root', root, '--trusted-proxy', '127.0.0.1/32'], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it(`answers ${REQUESTS} hostile requests below 500, never hangs, and never leaks a byte from outside the root`, async () => {
    console.log(`      fuzz seed ${SEED} (replay with MB_FUZZ_SEED=${SEED})`)
    const rand = prng(SEED)
    const requests = Array.from({length: REQUESTS}, () => buildRequest(rand, root, serve.port))
    const failures: string[] = []
    const counts = new Map<string, number>()
    let next = 0
    const started = performance.now()
    const worker = async () => {
      while (next < requests.length) {
        const i = next++
        const outcome = await send(serve.port, requests[i].bytes)
        const show = () => JSON.stringify(requests[i].bytes.toString('latin1').slice(0, 300))
        if (outcome.timedOut) failures.push(`#${i} no answer and no close within ${TIMEOUT_MS} ms: ${show()}`)
        if (outcome.leaked) failures.push(`#${i} leaked the secret: ${show()}`)
        for (const status of outcome.statuses) if (!allowed(status, requests[i].methods)) failures.push(`#${i} answered ${status}: ${show()}`)
        const key = outcome.statuses.length === 0 ? 'closed' : String(outcome.statuses[0])
        counts.set(key, (counts.get(key) ?? 0) + 1)
      }
    }
    await Promise.all(Array.from({length: CONCURRENCY}, worker))
    const summary = [...counts.entries()]
      .sort()
      .map(([k, v]) => `${k}:${v}`)
      .join(' ')
    console.log(`      ${REQUESTS} requests in ${((performance.now() - started) / 1000).toFixed(1)} s; first answers: ${summary}`)
    expect(serve.child.exitCode, `mb serve exited during the fuzz:\n${serve.output().slice(-3000)}`).to.equal(null)
    expect(failures.slice(0, 20), `seed ${SEED}`).to.deep.equal([])
    // The server is still healthy afterwards, and still serves the root.
    const check = await send(serve.port, Buffer.from(`GET /pub/small.txt HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`))
    expect(check.statuses).to.deep.equal([200])
    const redirect = await send(serve.port, Buffer.from(`GET /pub/big.iso HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`))
    expect(redirect.statuses).to.deep.equal([302])
    // Some requests did get real answers (the fuzz reached the routes, not only the parser).
    expect(counts.get('200') ?? 0).to.be.greaterThan(0)
    expect(counts.get('404') ?? 0).to.be.greaterThan(0)
  })
})
