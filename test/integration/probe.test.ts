import {createHash} from 'node:crypto'
import {expect} from 'chai'
import type {LookupAddress} from 'node:dns'
import {sql} from 'kysely'
import {PROBE_LOCK} from '../../src/lib/db/named-locks.js'
import {ProbeConfigSchema, type ProbeConfig} from '../../src/lib/probe/config.js'
import {probeMirrors} from '../../src/lib/probe/run.js'
import {probeFile} from '../../src/lib/probe/file.js'
import {parseStatus} from '../../src/lib/probe/state.js'
import {probeSummaries, recentTransitions} from '../../src/lib/probe/history.js'
import {startBackgroundProbes} from '../../src/lib/probe/background.js'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {backend, useTestDatabase} from '../helpers/db.js'
import {requireBinary} from '../helpers/cli.js'
import {closedPort, hangingServer, httpServer, selfSignedServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

const FILES = {'pub/small.txt': 'hello', 'pub/big.iso': 'x'.repeat(4096)}

function probeConfig(extra: Record<string, unknown> = {}): ProbeConfig {
  return ProbeConfigSchema.parse({timeout: 2, connect_timeout: 1, ...extra})
}

describe(`probe (${backend})`, function () {
  const store = useTestDatabase()
  const servers: TestServer[] = []
  let counter = 0

  before(async () => {})
  after(async () => {
    await Promise.all(servers.map((s) => s.close()))
  })

  async function serve(server: Promise<TestServer>): Promise<TestServer> {
    const s = await server
    servers.push(s)
    return s
  }

  /** Adds a mirror holding the FILES, returns its id. */
  async function addMirror(urls: {http_url?: string; https_url?: string}, options: {enabled?: boolean; files?: Record<string, string>} = {}): Promise<{id: number; identifier: string}> {
    counter += 1
    const identifier = `m${counter}.test`
    const row = await store.database.db
      .insertInto('mirror')
      .values({identifier, http_url: urls.http_url ?? null, https_url: urls.https_url ?? null, enabled: options.enabled ?? true})
      .returning('id')
      .executeTakeFirstOrThrow()
    for (const [path, content] of Object.entries(options.files ?? FILES)) {
      await sql`INSERT INTO file (path, size, mtime, mirrors) VALUES (${path}, ${Buffer.byteLength(content)}, 1700000000, ARRAY[${row.id}]::smallint[])
                ON CONFLICT (path) DO UPDATE SET mirrors = array_append(file.mirrors, ${row.id}::smallint)`.execute(store.database.db)
    }
    return {id: row.id, identifier}
  }

  async function mirrorRow(id: number) {
    return store.database.db.selectFrom('mirror').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
  }

  async function probeOne(identifier: string, config = probeConfig(), extra: {resolver?: (h: string) => Promise<LookupAddress[]>} = {}) {
    const round = await probeMirrors(store.database.db, config, {names: [identifier], ...extra})
    expect(round.mirrors).to.have.length(1)
    return round.mirrors[0]
  }

  it('records a healthy mirror as up, requesting its smallest known file with a 1-byte range', async () => {
    const s = await serve(httpServer(staticHandler(FILES)))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const result = await probeOne(m.identifier)
    expect(result.request).to.deep.equal({kind: 'file', path: 'pub/small.txt'})
    expect(result.checks).to.have.length(1)
    expect(result.checks[0]).to.include({key: 'http/ipv4', ok: true, reason: 'ok', http_status: 206, url: `http://127.0.0.1:${s.port}/pub/small.txt`})
    expect(s.requests.at(-1)!.headers.range).to.equal('bytes=0-0')
    expect(s.requests.at(-1)!.method).to.equal('GET')
    const row = await mirrorRow(m.id)
    expect(row.up).to.equal(true)
    expect(row.ipv6).to.equal(false) // an IPv4 literal: no IPv6 address
    expect(row.status_reason).to.equal('ok')
    const status = parseStatus(row.status)
    expect(status.checks['http/ipv4']).to.include({up: true, ok_count: 1, fail_count: 0, reason: 'ok'})
    expect(status.probe_path).to.equal('pub/small.txt')
    const history = await store.database.db.selectFrom('mirror_probe').selectAll().where('mirror_id', '=', m.id).execute()
    expect(history).to.have.length(1)
    expect(history[0]).to.include({protocol: 'http', family: 'ipv4', ok: true, http_status: 206, reason: 'ok'})
    expect(history[0].latency_ms).to.be.a('number')
    const summary = (await probeSummaries(store.database.db, [m.id])).get(m.id)!
    expect(summary.state).to.equal('up')
    expect(summary.reason).to.equal('ok')
    expect(summary.last_probe_at).to.be.instanceOf(Date)
  })

  it('marks a mirror that answers 403 to non-browser user agents down with http_403', async () => {
    const s = await serve(httpServer((req, res) => (/Mozilla/.test(req.headers['user-agent'] ?? '') ? staticHandler(FILES)(req, res) : res.writeHead(403).end('go away'))))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({ok: false, reason: 'http_403', http_status: 403})
    const row = await mirrorRow(m.id)
    expect(row.up).to.equal(false)
    expect(row.status_reason).to.equal('http_403')
    expect(s.requests[0].headers['user-agent']).to.match(/^mb-probe/)
  })

  it('sees a 404 on the known file even though / answers 200', async () => {
    const s = await serve(httpServer(staticHandler({})))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({ok: false, reason: 'http_404', http_status: 404})
    expect((await mirrorRow(m.id)).up).to.equal(false)
  })

  it('reports timeout for a server that accepts connections but never answers', async () => {
    const s = await serve(hangingServer())
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const result = await probeOne(m.identifier, probeConfig({timeout: 1}))
    expect(result.checks[0]).to.include({ok: false, reason: 'timeout', http_status: null})
    const row = await mirrorRow(m.id)
    expect(row.up).to.equal(false)
    expect(row.status_reason).to.equal('timeout')
  })

  it('reports refused for a closed port', async () => {
    const port = await closedPort()
    const m = await addMirror({http_url: `http://127.0.0.1:${port}/`})
    const result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({ok: false, reason: 'refused'})
    expect((await mirrorRow(m.id)).status_reason).to.equal('refused')
  })

  it('classifies a redirect to another loopback port by policy: public -> redirect_private, same_origin -> redirect_offsite, any -> followed', async () => {
    const target = await serve(httpServer(staticHandler(FILES)))
    const s = await serve(httpServer((req, res) => res.writeHead(302, {location: `http://127.0.0.1:${target.port}${req.url}`}).end()))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    let result = await probeOne(m.identifier, probeConfig({redirects: 'public'}))
    expect(result.checks[0]).to.include({ok: false, reason: 'redirect_private', http_status: 302})
    expect(target.requests).to.have.length(0)
    result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({
      ok: false,
      reason: 'redirect_offsite',
      detail: `redirects to another host: http://127.0.0.1:${target.port}/pub/small.txt (probe.redirects: same_origin takes it out of selection)`,
    })
    result = await probeOne(m.identifier, probeConfig({redirects: 'any'}))
    expect(result.checks[0]).to.include({ok: true, reason: 'ok', http_status: 206, detail: `redirected to another host: http://127.0.0.1:${target.port}/pub/small.txt`})
    expect(target.requests).to.have.length(1)
    const status = parseStatus((await mirrorRow(m.id)).status)
    expect(status.checks['http/ipv4']).to.include({up: false, ok_count: 1, fail_count: 0})
  })

  it('classifies a redirect to a host name that resolves to a private address as redirect_private, and an unresolvable host as dns', async () => {
    const s = await serve(httpServer((req, res) => res.writeHead(302, {location: `http://internal.test:${req.socket.localPort}/x`}).end()))
    const resolver = async (host: string): Promise<LookupAddress[]> => {
      if (host === 'internal.test') return [{address: '10.11.12.13', family: 4}]
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), {code: 'ENOTFOUND'})
    }
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const result = await probeOne(m.identifier, probeConfig({redirects: 'public'}), {resolver})
    expect(result.checks[0]).to.include({ok: false, reason: 'redirect_private', http_status: 302})
    expect(result.checks[0].detail).to.contain('10.11.12.13')
    const nodns = await addMirror({http_url: 'http://no-such-host.test/'})
    const failed = await probeOne(nodns.identifier, probeConfig(), {resolver})
    expect(failed.checks).to.have.length(1)
    expect(failed.checks[0]).to.include({key: 'http/ipv4', ok: false, reason: 'dns'})
    const row = await mirrorRow(nodns.id)
    expect([row.up, row.status_reason, row.ipv6]).to.deep.equal([false, 'dns', null])
  })

  it('follows a same-origin redirect and detects redirect loops', async () => {
    const s = await serve(
      httpServer((req, res) => {
        if (req.url === '/pub/small.txt') res.writeHead(301, {location: '/real/small.txt'}).end()
        else if (req.url === '/real/small.txt') res.writeHead(206, {'content-range': 'bytes 0-0/5'}).end('h')
        else res.writeHead(404).end()
      }),
    )
    const ok = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    expect((await probeOne(ok.identifier)).checks[0]).to.include({ok: true, reason: 'ok', http_status: 206})

    const loop = await serve(httpServer((req, res) => res.writeHead(302, {location: req.url === '/a' ? '/b' : '/a'}).end()))
    const m = await addMirror({http_url: `http://127.0.0.1:${loop.port}/`})
    const result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({ok: false, reason: 'redirect_loop', http_status: 302})
    expect((await mirrorRow(m.id)).status_reason).to.equal('redirect_loop')
  })

  it('reports tls_error for a self-signed certificate unless insecure_tls is set', async function () {
    requireBinary(this, 'openssl', 'openssl')
    const s = await serve(selfSignedServer(staticHandler(FILES)))
    const m = await addMirror({https_url: `https://127.0.0.1:${s.port}/`})
    let result = await probeOne(m.identifier)
    expect(result.checks[0]).to.include({key: 'https/ipv4', ok: false, reason: 'tls_error', http_status: null})
    expect((await mirrorRow(m.id)).up).to.equal(false)
    result = await probeOne(m.identifier, probeConfig({insecure_tls: true}))
    expect(result.checks[0]).to.include({ok: true, reason: 'ok', http_status: 206})
  })

  it('checks IPv4 and IPv6 separately, keeping the Host header, and records ipv6', async () => {
    const v4 = await serve(httpServer(staticHandler(FILES), '127.0.0.1'))
    const v6 = await serve(httpServer(staticHandler(FILES), '::1', v4.port))
    const resolver = async (host: string): Promise<LookupAddress[]> =>
      host === 'dual.test'
        ? [
            {address: '127.0.0.1', family: 4},
            {address: '::1', family: 6},
          ]
        : []
    const m = await addMirror({http_url: `http://dual.test:${v4.port}/`})
    const result = await probeOne(m.identifier, probeConfig(), {resolver})
    expect(result.checks.map((c) => [c.key, c.address, c.reason])).to.deep.equal([
      ['http/ipv4', '127.0.0.1', 'ok'],
      ['http/ipv6', '::1', 'ok'],
    ])
    expect(v4.requests[0].headers.host).to.equal(`dual.test:${v4.port}`)
    expect(v6.requests[0].headers.host).to.equal(`dual.test:${v4.port}`)
    expect((await mirrorRow(m.id)).ipv6).to.equal(true)

    // The IPv6 side goes away: only that family fails; after the threshold ipv6 is false.
    await v6.close()
    for (let i = 0; i < 2; i++) await probeOne(m.identifier, probeConfig(), {resolver})
    const row = await mirrorRow(m.id)
    const status = parseStatus(row.status)
    expect(status.checks['http/ipv6']).to.include({up: false, reason: 'refused'})
    expect(status.checks['http/ipv4']).to.include({up: true, reason: 'ok'})
    expect(row.up).to.equal(true)
    expect(row.ipv6).to.equal(false)
  })

  it('goes down after fail_threshold failures and up after ok_threshold successes, recording transitions', async () => {
    let healthy = true
    const s = await serve(httpServer((req, res) => (healthy ? staticHandler(FILES)(req, res) : res.writeHead(503).end())))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const config = probeConfig({fail_threshold: 2, ok_threshold: 3})
    const states: boolean[] = []
    const run = async () => {
      const r = await probeOne(m.identifier, config)
      states.push(r.up)
      return r
    }
    await run() // up (first answer)
    healthy = false
    await run() // 1 failure: still up
    const down = await run() // 2 failures: down
    expect(down.transitions).to.deep.include({scope: 'mirror', from: 'up', to: 'down', reason: 'http_503', at: down.transitions[0].at})
    await run() // stays down
    healthy = true
    await run() // 1 ok
    await run() // 2 ok
    const up = await run() // 3 ok: up
    expect(states).to.deep.equal([true, true, false, false, false, false, true])
    expect(up.was_up).to.equal(false)
    expect(up.needs_rescan).to.equal(false) // a short outage
    const status = parseStatus((await mirrorRow(m.id)).status)
    expect(status.checks['http/ipv4']).to.include({up: true, ok_count: 3, fail_count: 0})
    const transitions = await recentTransitions(store.database.db, m.id, 10)
    expect(transitions.filter((t) => t.scope === 'mirror').map((t) => `${t.from}->${t.to}:${t.reason}`)).to.deep.equal(['down->up:ok', 'up->down:http_503'])
    expect(transitions.filter((t) => t.scope === 'http/ipv4').map((t) => `${t.from}->${t.to}`)).to.deep.equal(['down->up', 'up->down', 'unknown->up'])
  })

  it('sets needs_rescan when a mirror comes back after a long outage', async () => {
    let healthy = false
    const s = await serve(httpServer((req, res) => (healthy ? staticHandler(FILES)(req, res) : res.writeHead(500).end())))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const config = probeConfig({rescan_after_seconds: 86400})
    expect((await probeOne(m.identifier, config)).up).to.equal(false)
    // The outage started two days ago.
    await store.database.db
      .updateTable('mirror')
      .set({status_changed_at: new Date(Date.now() - 2 * 86400 * 1000)})
      .where('id', '=', m.id)
      .execute()
    healthy = true
    await probeOne(m.identifier, config)
    const back = await probeOne(m.identifier, config)
    expect(back.up).to.equal(true)
    expect(back.needs_rescan).to.equal(true)
    expect((await mirrorRow(m.id)).needs_rescan).to.equal(true)
  })

  it('keeps only the newest probe.history results per mirror', async () => {
    const s = await serve(httpServer(staticHandler(FILES)))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const config = probeConfig({history: 3})
    for (let i = 0; i < 5; i++) await probeOne(m.identifier, config)
    const rows = await store.database.db.selectFrom('mirror_probe').select('id').where('mirror_id', '=', m.id).orderBy('id').execute()
    expect(rows).to.have.length(3)
  })

  it('uses probe.sentinel when configured, and re-enables disabled mirrors that answer with enable', async () => {
    const s = await serve(httpServer(staticHandler({TIME: '1700000000'})))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/mirror/`}, {enabled: false, files: {}})
    const config = probeConfig({sentinel: '/TIME'})
    const plain = await probeMirrors(store.database.db, config, {})
    expect(plain.mirrors.map((r) => r.identifier)).not.to.include(m.identifier)
    const round = await probeMirrors(store.database.db, config, {enable: true})
    const mine = round.mirrors.find((r) => r.identifier === m.identifier)!
    expect(mine.request).to.deep.equal({kind: 'sentinel', path: 'TIME'})
    expect(mine.checks[0]).to.include({url: `http://127.0.0.1:${s.port}/mirror/TIME`})
    expect(mine.checks[0].reason).to.equal('http_404') // served at /TIME, not below /mirror/
    expect(mine.reenabled).to.equal(false)
    expect((await mirrorRow(m.id)).enabled).to.equal(false)

    await store.database.db
      .updateTable('mirror')
      .set({http_url: `http://127.0.0.1:${s.port}/`})
      .where('id', '=', m.id)
      .execute()
    const again = (await probeMirrors(store.database.db, config, {enable: true})).mirrors.find((r) => r.identifier === m.identifier)!
    expect(again.checks[0]).to.include({ok: true, http_status: 206})
    expect(again.reenabled).to.equal(true)
    expect((await mirrorRow(m.id)).enabled).to.equal(true)
  })

  it('refuses unknown mirror names and probes nothing', async () => {
    try {
      await probeMirrors(store.database.db, probeConfig(), {names: ['no-such-mirror.test']})
      expect.fail('should throw')
    } catch (error) {
      expect((error as Error).message).to.contain('No mirror named "no-such-mirror.test"')
    }
  })

  it('probe file tells right size, stale size and missing copies apart', async () => {
    const path = 'iso/probe-file.iso'
    const right = await serve(httpServer(staticHandler({[path]: 'a'.repeat(1000)})))
    const stale = await serve(httpServer(staticHandler({[path]: 'a'.repeat(600)})))
    const missing = await serve(httpServer(staticHandler({})))
    const a = await addMirror({http_url: `http://127.0.0.1:${right.port}/`}, {files: {}})
    const b = await addMirror({http_url: `http://127.0.0.1:${stale.port}/`}, {files: {}})
    const c = await addMirror({http_url: `http://127.0.0.1:${missing.port}/`}, {files: {}})
    const file = await store.database.db
      .insertInto('file')
      .values({path, size: 1000, mtime: 1700000000, mirrors: [a.id, c.id]})
      .returning('id')
      .executeTakeFirstOrThrow()
    await store.database.db.insertInto('mirror_file_stale').values({mirror_id: b.id, file_id: file.id, size: 600, mtime: 1700000000}).execute()
    const result = await probeFile(store.database.db, probeConfig(), `/${path}`)
    expect(result.size).to.equal(1000)
    const byMirror = Object.fromEntries(result.mirrors.map((r) => [r.mirror, r]))
    expect(byMirror[a.identifier]).to.include({verdict: 'ok', http_status: 206, size: 1000, claim: 'held'})
    expect(byMirror[b.identifier]).to.include({verdict: 'stale', http_status: 206, size: 600, claim: 'stale_record', scanned_size: 600})
    expect(byMirror[c.identifier]).to.include({verdict: 'missing', http_status: 404, size: null, claim: 'held'})
    expect(result.counts).to.deep.include({ok: 1, stale: 1, missing: 1})
  })

  it('probe file --hash fetches each copy of the right size and tells a corrupt one apart by its bytes', async () => {
    const path = 'iso/probe-hash.iso'
    const good = Buffer.alloc(3000, 'g')
    const corrupt = Buffer.from(good)
    corrupt[1500] = 0x21 // the same size, one byte differs
    const goodServer = await serve(httpServer(staticHandler({[path]: good})))
    const corruptServer = await serve(httpServer(staticHandler({[path]: corrupt})))
    const a = await addMirror({http_url: `http://127.0.0.1:${goodServer.port}/`}, {files: {}})
    const b = await addMirror({http_url: `http://127.0.0.1:${corruptServer.port}/`}, {files: {}})
    const sha256 = createHash('sha256').update(good).digest('hex')
    await store.database.db
      .insertInto('file')
      .values({path, size: 3000, mtime: 1700000000, mirrors: [a.id, b.id], sha256, hashed_size: 3000, hashed_mtime: 1700000000})
      .execute()
    const sized = await probeFile(store.database.db, probeConfig(), path)
    expect(sized.mirrors.map((r) => [r.verdict, r.hash])).to.deep.equal([
      ['ok', null],
      ['ok', null],
    ])
    const result = await probeFile(store.database.db, probeConfig(), path, {hash: true})
    expect(result.hash_algorithm).to.equal('sha256')
    const byMirror = Object.fromEntries(result.mirrors.map((r) => [r.mirror, r]))
    expect(byMirror[a.identifier]).to.include({verdict: 'ok', hash: 'match'})
    expect(byMirror[b.identifier]).to.include({verdict: 'corrupt', hash: 'mismatch'})
    expect(byMirror[b.identifier].reason).to.include(`index ${sha256}`)
    expect(result.counts).to.deep.include({ok: 1, corrupt: 1})
    // The whole GET carried no Range.
    expect(corruptServer.requests.filter((r) => r.headers.range === undefined).length).to.equal(1)
    // A hash of another version is no hash of this one.
    await sql`UPDATE file SET mtime = 1700000001 WHERE path = ${path}`.execute(store.database.db)
    const refused = await probeFile(store.database.db, probeConfig(), path, {hash: true}).then(
      () => undefined,
      (error: unknown) => error,
    )
    expect(refused).to.include({code: 'HASH_UNAVAILABLE'})
  })

  it('runs background rounds, reusing pooled connections, and skips a round while another replica holds the lock', async () => {
    const s = await serve(httpServer(staticHandler(FILES)))
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const config = ConfigSchema.parse({probe: {timeout: 2, connect_timeout: 1}})
    const background = startBackgroundProbes(store.database, config, {intervalSeconds: 3600})
    try {
      const first = await background.runOnce()
      expect(first!.mirrors.find((r) => r.identifier === m.identifier)!.up).to.equal(true)
      const before = s.requests.length
      await background.runOnce()
      expect(s.requests.length).to.be.greaterThan(before)
      // Both rounds went over the same pooled connection (same client port).
      const ports = new Set(s.requests.slice(-2).map((r) => r.remotePort))
      expect(ports.size).to.equal(1)
      // Another replica holding the probe lock (another session on PostgreSQL, the same
      // process on the embedded store): the round is skipped, and runs again once it is free.
      await store.database.withLock(
        PROBE_LOCK,
        async () => expect(await background.runOnce()).to.equal(null),
        () => expect.fail('the probe lock was not free'),
      )
      expect(await background.runOnce()).not.to.equal(null)
    } finally {
      await background.stop()
    }
  })

  it('ends a background round under way at stop, at once, and the mirror it was probing keeps its state', async () => {
    const s = await serve(httpServer(() => {})) // takes each request and never answers
    const m = await addMirror({http_url: `http://127.0.0.1:${s.port}/`})
    const before = await mirrorRow(m.id)
    const background = startBackgroundProbes(store.database, ConfigSchema.parse({probe: {timeout: 60, connect_timeout: 5}}), {intervalSeconds: 3600})
    // The first round starts at once; it is under way once the mirror has the request.
    for (const deadline = Date.now() + 20_000; s.requests.length === 0 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50))
    const started = performance.now()
    await background.stop()
    expect(performance.now() - started, 'the stop took the probe timeout').to.be.below(2000)
    expect(s.requests.length).to.be.above(0)
    expect(await mirrorRow(m.id)).to.deep.equal(before)
  })
})
