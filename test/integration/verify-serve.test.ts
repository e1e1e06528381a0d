// @store-independent: verified redirects: HEAD checks against nginx mirrors
/**
 * Verified redirects through a real `mb serve` with real nginx mirrors (their access logs
 * count the HEADs), a TCP server that accepts and never answers, and a refused port:
 * - the first-ranked mirror answers 404 for a verified path: the client goes to the second;
 * - the first-ranked mirror hangs: the check times out and the client goes to the second;
 * - every mirror fails: the origin delivers;
 * - a cached verdict spares the next request its HEADs;
 * - a path that is not verified costs no HEAD.
 */
import {mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'
import {refusedPort, type RunningServer, startNginx, startSilentServer} from '../helpers/servers.js'

const GEOIP = fileURLToPath(new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url))
/** A GB client (MaxMind test data): GB mirrors rank first (country pool), the US ones after (world). */
const GB = '81.2.69.142'
const SIZE = 65_536

async function get(base: string, path: string): Promise<{status: number; location: string | null; mirror: string | null; escalated: string | null; origin: string | null; bytes: number}> {
  const res = await fetch(`${base}/${path}`, {redirect: 'manual', headers: {'X-Forwarded-For': GB}})
  const body = await res.arrayBuffer()
  return {
    status: res.status,
    location: res.headers.get('location'),
    mirror: res.headers.get('x-mb-mirror'),
    escalated: res.headers.get('x-mb-escalated'),
    origin: res.headers.get('x-mb-origin-reason'),
    bytes: body.byteLength,
  }
}

/** The HEAD requests for `path` in an nginx access log. */
function heads(server: RunningServer, path: string): number {
  let text = ''
  try {
    text = readFileSync(join(server.dir, 'access.log'), 'utf8')
  } catch {
    return 0
  }
  return text.split('\n').filter((line) => line.includes(`"HEAD /${path} HTTP/1.1"`)).length
}

describe('verified redirects through mb serve', function () {
  this.timeout(240_000)
  let t: TestDatabase
  let dir: string
  let a: RunningServer | undefined
  let b: RunningServer | undefined
  let hang: Awaited<ReturnType<typeof startSilentServer>> | undefined
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-verify-'))
    const files = ['latest/a.iso', 'latest/h.iso', 'latest/gone.iso', 'iso/plain.iso']
    for (const tree of ['origin', 'a', 'b']) {
      mkdirSync(join(dir, tree, 'latest'), {recursive: true})
      mkdirSync(join(dir, tree, 'iso'), {recursive: true})
    }
    for (const f of files) writeFileSync(join(dir, 'origin', f), Buffer.alloc(SIZE, 7))
    // Mirror a lacks every file (404); b has them all.
    for (const f of files) writeFileSync(join(dir, 'b', f), Buffer.alloc(SIZE, 7))
    a = await startNginxWithLog(join(dir, 'a'))
    b = await startNginxWithLog(join(dir, 'b'))
    hang = await startSilentServer()
    const refused = await refusedPort()
    const database = await t.open()
    try {
      await database.db
        .insertInto('mirror')
        .values([
          {identifier: 'a.gb', http_url: a.url, country: 'GB', continent: 'EU'},
          {identifier: 'hang.gb', http_url: hang.url('http'), country: 'GB', continent: 'EU'},
          {identifier: 'b.us', http_url: b.url, country: 'US', continent: 'NA'},
          {identifier: 'refused.us', http_url: `http://127.0.0.1:${refused}/`, country: 'US', continent: 'NA'},
        ])
        .execute()
      const id = Object.fromEntries((await database.db.selectFrom('mirror').select(['id', 'identifier']).execute()).map((r) => [r.identifier, r.id]))
      const old = Math.floor(Date.now() / 1000) - 86_400
      // The origin's files carry the indexed mtime, or mb serve would see them changed on disk.
      for (const f of files) utimesSync(join(dir, 'origin', f), old, old)
      await database.db
        .insertInto('file')
        .values([
          {path: 'latest/a.iso', size: SIZE, mtime: old, mirrors: [id['a.gb'], id['b.us']]},
          {path: 'latest/h.iso', size: SIZE, mtime: old, mirrors: [id['hang.gb'], id['b.us']]},
          {path: 'latest/gone.iso', size: SIZE, mtime: old, mirrors: [id['a.gb'], id['refused.us']]},
          {path: 'iso/plain.iso', size: SIZE, mtime: old, mirrors: [id['a.gb'], id['b.us']]},
        ])
        .execute()
    } finally {
      await database.close()
    }
    const config = join(dir, 'mb.yaml')
    // Generous times: the machine running the tests is loaded; the hang still times out.
    writeFileSync(config, 'select:\n  verify_paths: ["latest/**"]\n  verify_budget_ms: 4000\n  verify_timeout_ms: 1500\n  verify_cache_seconds: 600\n')
    serve = await startServe(['--config', config, '--root', join(dir, 'origin'), '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'info'], t.env)
  })

  after(async () => {
    await serve?.stop()
    await a?.stop()
    await b?.stop()
    await hang?.stop()
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  /** nginx with an access log in its own directory. */
  async function startNginxWithLog(root: string): Promise<RunningServer> {
    const logDir = mkdtempSync(join(dir, 'log-'))
    const server = await startNginx({root, serverConfig: `access_log ${join(logDir, 'access.log')};`})
    return {...server, dir: logDir, stop: async () => server.stop()}
  }

  it('sends the client to the second mirror when the first answers 404', async () => {
    const first = await get(serve!.url, 'latest/a.iso')
    expect(first).to.deep.equal({status: 302, location: `${b!.url}latest/a.iso`, mirror: 'b.us', escalated: 'a.gb 404', origin: null, bytes: 0})
    expect([heads(a!, 'latest/a.iso'), heads(b!, 'latest/a.iso')]).to.deep.equal([1, 1])
  })

  it('a cached verdict spares the next request its HEADs', async () => {
    const again = await get(serve!.url, 'latest/a.iso')
    expect(again).to.deep.equal({status: 302, location: `${b!.url}latest/a.iso`, mirror: 'b.us', escalated: 'a.gb 404 (cached)', origin: null, bytes: 0})
    expect([heads(a!, 'latest/a.iso'), heads(b!, 'latest/a.iso')]).to.deep.equal([1, 1])
  })

  it('moves on from a mirror that hangs, within the budget', async () => {
    const started = Date.now()
    const res = await get(serve!.url, 'latest/h.iso')
    const took = Date.now() - started
    expect(res).to.deep.equal({status: 302, location: `${b!.url}latest/h.iso`, mirror: 'b.us', escalated: 'hang.gb timeout', origin: null, bytes: 0})
    expect(heads(b!, 'latest/h.iso')).to.equal(1)
    // Bounded by the budget (4 s) plus the time to answer, never by the hanging mirror.
    expect(took).to.be.below(30_000)
  })

  it('lets the origin deliver when every mirror fails', async () => {
    const res = await get(serve!.url, 'latest/gone.iso')
    expect(res).to.deep.equal({status: 200, location: null, mirror: null, escalated: 'a.gb 404, refused.us error: ECONNREFUSED', origin: 'verify_failed', bytes: SIZE})
  })

  it('checks nothing for a path that is not verified', async () => {
    const res = await get(serve!.url, 'iso/plain.iso')
    expect(res).to.deep.equal({status: 302, location: `${a!.url}iso/plain.iso`, mirror: 'a.gb', escalated: null, origin: null, bytes: 0})
    expect([heads(a!, 'iso/plain.iso'), heads(b!, 'iso/plain.iso')]).to.deep.equal([0, 0])
  })
})
