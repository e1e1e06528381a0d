// @store-independent: the content probe against nginx mirrors
/**
 * Content checks end to end through the compiled CLI: an origin indexed with
 * `mb index --hashes`, two nginx mirrors on loopback scanned over their JSON autoindex, one
 * holding copies corrupted in place (same size, same mtime, so every scan still matches them).
 * `mb probe --content --all` finds every corrupt copy in one round; a running `mb serve`
 * stops sending clients there; `mb file lookup`, `mb mirror show` and `/mirrors` name them; a
 * rescan does not bring them back; a copy that changed on the mirror loses its record at the
 * next scan; a repaired copy comes back at the next content check.
 */
import {expect} from 'chai'
import {randomBytes} from 'node:crypto'
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {startNginx, type RunningServer} from '../helpers/servers.js'
import {request, startServe, type ServeProcess} from '../helpers/serve-process.js'

const KiB = 1024
/** Origin files: a.iso has 6 SHA-1 pieces of 256 KiB, b.iso 3, c.iso 1. */
const FILES: Record<string, number> = {'pub/a.iso': 1536 * KiB, 'pub/b.iso': 700 * KiB, 'pub/c.iso': 100 * KiB}
/** Client networks (one address in each of 24 /24 networks): stickiness spreads them over both mirrors. */
const CLIENTS = Array.from({length: 24}, (_, i) => `81.2.${i + 1}.142`)

/** Flips one byte in every 256 KiB piece of `path`, then gives it back its mtime: same size, same mtime, other bytes. */
function corruptInPlace(path: string): void {
  const before = statSync(path)
  const bytes = readFileSync(path)
  for (let offset = 1000; offset < bytes.length; offset += 256 * KiB) bytes[offset] ^= 0xff
  writeFileSync(path, bytes)
  utimesSync(path, before.atime, before.mtime)
}

describe(`e2e: mb probe --content finds corrupt copies (${backend})`, function () {
  this.timeout(300_000)
  let origin: string
  let good: string
  let bad: string
  let tdb: TestDatabase
  let env: Record<string, string>
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    const base = mkdtempSync(join(tmpdir(), 'mb-content-'))
    origin = join(base, 'origin')
    good = join(base, 'good')
    bad = join(base, 'bad')
    mkdirSync(join(origin, 'pub'), {recursive: true})
    const mtime = new Date(Date.UTC(2026, 0, 2, 3, 4, 5))
    for (const [path, size] of Object.entries(FILES)) {
      writeFileSync(join(origin, path), randomBytes(size))
      utimesSync(join(origin, path), mtime, mtime)
    }
    cpSync(origin, good, {recursive: true, preserveTimestamps: true})
    cpSync(origin, bad, {recursive: true, preserveTimestamps: true})
    corruptInPlace(join(bad, 'pub/a.iso'))
    corruptInPlace(join(bad, 'pub/c.iso'))
    const goodServer = await startNginx({root: good, autoindex: 'json'})
    const badServer = await startNginx({root: bad, autoindex: 'json'})
    nginx.push(goodServer, badServer)

    tdb = await createTestDatabase()
    env = {...tdb.env, MB_ROOT: origin}
    const index = await mb(['index', '--hashes', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    for (const [name, server] of [
      ['good.test', goodServer],
      ['bad.test', badServer],
    ] as const) {
      const add = await mb(['mirror', 'add', name, '--http-url', server.url, '--country', 'GB', '--json'], {env})
      expect(add.code, add.stderr).to.equal(0)
    }
    const scan = await mb(['scan', 'good.test', 'bad.test', '--json'], {env})
    expect(scan.code, scan.stdout + scan.stderr).to.equal(0)
    expect(await holders('pub/a.iso')).to.deep.equal(['bad.test', 'good.test'])
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (origin) rmSync(join(origin, '..'), {recursive: true, force: true})
  })

  async function holders(path: string): Promise<string[]> {
    const database = await tdb.open()
    try {
      const rows = await sql<{identifier: string}>`SELECT m.identifier FROM file f JOIN mirror m ON m.id = ANY(f.mirrors) WHERE f.path = ${path} ORDER BY m.identifier`.execute(database.db)
      return rows.rows.map((r) => r.identifier)
    } finally {
      await database.close()
    }
  }

  /** Where `mb serve` sends each client of {@link CLIENTS} for `path`: the set of mirror base URLs. */
  async function redirectTargets(path: string): Promise<Set<string>> {
    const targets = new Set<string>()
    for (const ip of CLIENTS) {
      const res = await request(serve!.port, `/${path}`, {headers: {'X-Forwarded-For': ip}})
      expect(res.status, `${ip}: ${res.body}`).to.equal(302)
      targets.add(String(res.headers.location).replace(path, ''))
    }
    return targets
  }

  async function lookup(path: string) {
    const r = await mb(['file', 'lookup', path, '--client-ip', CLIENTS[0], '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    return r.json().files[0]
  }

  it('before the check, mb serve sends clients to both mirrors', async () => {
    serve = await startServe(['--root', origin, '--trusted-proxy', '127.0.0.1/32'], env)
    expect(await redirectTargets('pub/a.iso')).to.deep.equal(new Set(nginx.map((n) => n.url)))
  })

  it('one round finds every corrupt copy, and mb serve stops sending clients to them', async () => {
    const r = await mb(['probe', '--content', '--all', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const round = r.json()
    const verdicts = (name: string) => Object.fromEntries(round.mirrors.find((m: any) => m.identifier === name).checks.map((c: any) => [c.path, c.verdict]))
    expect(verdicts('good.test')).to.deep.equal({'pub/a.iso': 'ok', 'pub/b.iso': 'ok', 'pub/c.iso': 'ok'})
    expect(verdicts('bad.test')).to.deep.equal({'pub/a.iso': 'corrupt', 'pub/b.iso': 'ok', 'pub/c.iso': 'corrupt'})
    expect(round).to.include({corrupt: 2, marked_bad: 2, cleared: 0})
    expect(await holders('pub/a.iso')).to.deep.equal(['good.test'])
    expect(await holders('pub/b.iso')).to.deep.equal(['bad.test', 'good.test'])
    // The snapshot refresh (NOTIFY, else the poll) takes the copy out of every route.
    const deadline = Date.now() + 15_000
    let targets = await redirectTargets('pub/a.iso')
    while (targets.size > 1 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      targets = await redirectTargets('pub/a.iso')
    }
    expect(targets).to.deep.equal(new Set([nginx[0].url]))
  })

  it('mb file lookup, mb mirror show and /mirrors name the corrupt copies', async () => {
    const file = await lookup('pub/a.iso')
    expect(file.corrupt.map((c: any) => c.identifier)).to.deep.equal(['bad.test'])
    const excluded = file.explain.excluded.find((e: any) => e.mirror === 'bad.test')
    expect(excluded.reason).to.equal('corrupt')
    expect(excluded.detail).to.match(/^piece [0-5] of the copy did not match the index at \d{4}-\d\d-\d\dT/)
    expect(file.explain.ranked.map((c: any) => c.mirror)).to.deep.equal(['good.test'])
    const human = await mb(['file', 'lookup', 'pub/a.iso', '--client-ip', CLIENTS[0]], {env})
    expect(human.stdout).to.match(/bad\.test\s+corrupt\s+piece \d of the copy did not match the index/)
    const show = await mb(['mirror', 'show', 'bad.test', '--json'], {env})
    expect(show.json().bad_copies).to.equal(2)
    const overview = await request(serve!.port, '/mirrors', {headers: {Accept: 'application/json'}})
    const rows = JSON.parse(overview.body.toString()).mirrors
    expect(Object.fromEntries(rows.map((m: any) => [m.name, m.bad_copies]))).to.deep.equal({'bad.test': 2, 'good.test': 0})
  })

  it('a rescan does not bring a corrupt copy back; the next round re-checks it', async () => {
    const scan = await mb(['scan', 'bad.test', '--json'], {env})
    expect(scan.code, scan.stdout + scan.stderr).to.equal(0)
    expect(await holders('pub/a.iso')).to.deep.equal(['good.test'])
    expect(await holders('pub/c.iso')).to.deep.equal(['good.test'])
    const r = await mb(['probe', '--content', 'bad.test', '--json'], {env})
    const checks = r.json().mirrors[0].checks
    expect(checks.filter((c: any) => c.was_bad).map((c: any) => `${c.path}:${c.verdict}`)).to.have.members(['pub/a.iso:corrupt', 'pub/c.iso:corrupt'])
    expect(r.json()).to.include({marked_bad: 0, cleared: 0})
    const human = await mb(['probe', '--content', 'bad.test'], {env})
    expect(human.code, human.stderr).to.equal(0)
    expect(human.stdout).to.match(/bad\.test\s+pub\/a\.iso\s+\d\s+corrupt\s+piece \d: SHA-1 [0-9a-f]{40}, index [0-9a-f]{40}/)
    expect(human.stdout).to.contain('copies checked, 2 corrupt (0 newly taken out of selection), 0 repaired')
  })

  it('a copy that changed on the mirror loses its record at the next scan', async () => {
    const path = join(bad, 'pub/c.iso')
    writeFileSync(path, readFileSync(join(origin, 'pub/c.iso'))) // repaired, with a new mtime
    const scan = await mb(['scan', 'bad.test', '--json'], {env})
    expect(scan.code, scan.stdout + scan.stderr).to.equal(0)
    const file = await lookup('pub/c.iso')
    expect(file.corrupt).to.deep.equal([])
    expect(file.explain.excluded.find((e: any) => e.mirror === 'bad.test').reason).to.equal('stale')
  })

  it('a copy repaired in place (same size and mtime) comes back when a content check passes', async () => {
    const path = join(bad, 'pub/a.iso')
    const before = statSync(path)
    writeFileSync(path, readFileSync(join(origin, 'pub/a.iso')))
    utimesSync(path, before.atime, before.mtime)
    const r = await mb(['probe', '--content', 'bad.test', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const a = r.json().mirrors[0].checks.find((c: any) => c.path === 'pub/a.iso')
    expect(a).to.include({verdict: 'ok', was_bad: true})
    expect(r.json()).to.include({cleared: 1})
    expect(await holders('pub/a.iso')).to.deep.equal(['bad.test', 'good.test'])
    expect((await mb(['mirror', 'show', 'bad.test', '--json'], {env})).json().bad_copies).to.equal(0)
  })
})
