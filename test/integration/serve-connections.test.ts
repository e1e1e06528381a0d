// @store-independent: connection limits
/**
 * Connection limits of a real `mb serve` at the usual limit of 1,024 open files (issue 14,
 * item 8): one client (127.0.0.1) opens 2,000 idle connections, and another client
 * (127.0.0.2) is still served.
 * - With the defaults, the per-client cap (64) refuses the first client's connections
 *   beyond it with a 503.
 * - With a high per-client cap, the total cap closes the longest-idle connections to make
 *   room for the other client.
 * - A trusted proxy (set by a reload) is exempt from the per-client cap.
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import net from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

interface Hog {
  /** Connections still open. */
  open(): number
  /** Connections the server answered 503. */
  refused(): number
  /** Connections that ended (refused, closed by the server, or failed to connect). */
  closed(): number
  destroy(): void
}

/** Opens `n` connections from `from` (127.0.0.1) that never send a request, 100 at a time. */
async function hog(port: number, n: number, from = '127.0.0.1'): Promise<Hog> {
  const sockets: net.Socket[] = []
  let refused = 0
  let closed = 0
  for (let i = 0; i < n; i += 100) {
    await Promise.all(
      Array.from({length: Math.min(100, n - i)}, () => {
        const socket = net.connect({host: '127.0.0.1', port, localAddress: from})
        sockets.push(socket)
        let answer = ''
        socket.on('data', (d) => {
          answer += d
        })
        socket.on('end', () => {
          if (answer.startsWith('HTTP/1.1 503 ') && answer.endsWith('retry in a second.\n')) refused += 1
        })
        socket.on('error', () => {})
        return new Promise<void>((resolve) => {
          socket.once('connect', () => resolve())
          socket.once('close', () => {
            closed += 1
            resolve()
          })
        })
      }),
    )
  }
  // Let the server's answers to the last ones arrive.
  await sleep(500)
  return {
    open: () => sockets.filter((s) => !s.destroyed && s.readyState === 'open').length,
    refused: () => refused,
    closed: () => closed,
    destroy: () => {
      for (const s of sockets) s.destroy()
    },
  }
}

/** `n` requests from 127.0.0.2, each on a new connection; the statuses. */
async function otherClient(port: number, n: number): Promise<number[]> {
  const statuses: number[] = []
  for (let i = 0; i < n; i++) {
    statuses.push(
      await new Promise<number>((resolve, reject) => {
        const req = http.get({host: '127.0.0.1', port, path: '/a.iso', localAddress: '127.0.0.2', agent: false, timeout: 5000}, (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode!))
        })
        req.on('timeout', () => req.destroy(new Error('timeout')))
        req.on('error', reject)
      }),
    )
  }
  return statuses
}

describe(`mb serve connection limits (${backend})`, function () {
  this.timeout(240_000)
  let tdb: TestDatabase
  let dir: string
  let root: string
  let serve: ServeProcess | undefined
  let hogged: Hog | undefined

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-serve-connections-'))
    root = join(dir, 'root')
    mkdirSync(root)
    const database = await tdb.open()
    try {
      await database.db.insertInto('mirror').values({id: 1, identifier: 'm.example', http_url: 'http://m.example/'}).execute()
      await database.db
        .insertInto('file')
        .values({path: 'a.iso', size: 8000, mtime: 0, mirrors: [1]})
        .execute()
    } finally {
      await database.close()
    }
  })

  afterEach(async () => {
    hogged?.destroy()
    hogged = undefined
    await serve?.stop()
    serve = undefined
  })

  after(async () => {
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  /** Starts mb serve under `ulimit -n 1024` with `serve:` settings (YAML lines). */
  async function start(settings: string): Promise<ServeProcess> {
    const config = join(dir, 'mb.yaml')
    // A long header timeout: the idle connections must outlive the test, not time out.
    writeFileSync(config, `serve:\n  header_timeout: 300\n${settings}`)
    return startServe(['--root', root, '--config', config], tdb.env, {fileLimit: 1024})
  }

  it('2,000 idle connections from one address: the per-client cap (64) refuses the rest, another client is served', async () => {
    serve = await start('')
    hogged = await hog(serve.port, 2000)
    expect(hogged.open()).to.equal(64)
    expect(hogged.refused()).to.equal(2000 - 64)
    const statuses = await otherClient(serve.port, 50)
    expect(statuses).to.deep.equal(Array(50).fill(302))
    // The capped client itself gets a 503, not a hang.
    const res = await fetch(`http://127.0.0.1:${serve.port}/a.iso`, {redirect: 'manual'})
    expect(res.status).to.equal(503)
    expect(res.headers.get('retry-after')).to.equal('1')
    expect(serve.child.exitCode).to.equal(null)
  })

  it('a trusted proxy is exempt from the per-client cap (it carries many clients)', async () => {
    serve = await start('  max_connections_per_client: 5\n')
    const config = join(dir, 'mb.yaml')
    writeFileSync(config, `trusted_proxies: [127.0.0.1/32]\nserve:\n  header_timeout: 300\n  max_connections_per_client: 5\n`)
    serve.child.kill('SIGHUP')
    const s = serve
    for (let i = 0; i < 400 && !s.output().includes('"msg":"reloaded"'); i++) await sleep(50)
    hogged = await hog(serve.port, 100)
    expect(hogged.open()).to.equal(100)
    // Another address is not a proxy: capped at 5.
    const other = await hog(serve.port, 10, '127.0.0.2')
    expect([other.open(), other.refused()]).to.deep.equal([5, 5])
    other.destroy()
  })

  it('2,000 idle connections under a high per-client cap: the total cap closes the longest idle ones, another client is served', async () => {
    serve = await start('  max_connections: 300\n  max_connections_per_client: 100000\n')
    hogged = await hog(serve.port, 2000)
    expect(hogged.open()).to.equal(300)
    expect(hogged.closed()).to.equal(1700)
    const statuses = await otherClient(serve.port, 50)
    expect(statuses).to.deep.equal(Array(50).fill(302))
    await sleep(200)
    // Each of the other client's connections took the place of an idle one.
    expect(hogged.open()).to.be.at.most(300 - 1)
    expect(serve.child.exitCode).to.equal(null)
  })
})
