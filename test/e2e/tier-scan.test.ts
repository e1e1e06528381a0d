/**
 * Scans on demand for the client's own tier, end to end (docs/operations.md, "Scans on
 * demand"): a US mirror scanned before a DVD was published syncs it with real rsync, and no
 * scan follows. A US client is first sent to the French mirror (the only holder by the
 * index); that redirect leaves the client's country, so the US mirror's folder is scanned on
 * demand, and within a minute US clients go to the US mirror. Real nginx serves both mirrors.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
/** A US address and a Swedish one in the test database. */
const US_CLIENT = '216.160.83.56'
const SE_CLIENT = '89.160.20.112'

describe(`scans on demand for the client's own tier (${backend})`, function () {
  this.timeout(180_000)
  let tdb: TestDatabase
  let work: string
  let root: string
  let config: string
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined

  const tree = (mirror: string) => join(work, 'mirrors', mirror)
  function sync(mirror: string): void {
    const copied = spawnSync('rsync', ['-a', '--delete', `${root}/`, `${tree(mirror)}/`], {encoding: 'utf8'})
    expect(copied.status, copied.stderr).to.equal(0)
  }
  async function run(args: string[]) {
    const result = await mb([...args, '--config', config], {env: tdb.env})
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0)
    return result
  }
  /** The mirror a HEAD from `client` for `path` is sent to, or `origin` with the reason. */
  async function answer(path: string, client: string): Promise<string> {
    const res = await request(serve!.port, `/${path}`, {method: 'HEAD', headers: {'X-Forwarded-For': client}})
    if (res.status === 302) return String(res.headers['x-mb-mirror'])
    return `origin ${res.headers['x-mb-origin-reason']}`
  }

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'rsync', 'rsync')
    work = mkdtempSync(join(tmpdir(), 'mb-tier-scan-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'pub', '1.0'), {recursive: true})
    mkdirSync(join(work, 'mirrors', 'us.test'), {recursive: true})
    writeFileSync(join(root, 'pub', '1.0', 'old.iso'), Buffer.alloc(100_000, 'o'))
    config = join(work, 'mb.yaml')
    writeFileSync(
      config,
      `root: ${root}\ngeoip: [${GEOIP}]\ntrusted_proxies: [127.0.0.1/32]\nserve:\n  poll_seconds: 0.5\n  allow_broad_trusted_proxies: true\nprobe:\n  timeout: 3\n  connect_timeout: 2\n`,
    )
    tdb = await createTestDatabase()
    await run(['index'])
    // The US mirror holds the old tree; the DVD comes after its scan.
    sync('us.test')
    sync('fr.test')
    for (const [mirror, country] of [
      ['fr.test', 'FR'],
      ['us.test', 'US'],
    ] as const) {
      const server = await startNginx({root: tree(mirror), autoindex: 'json'})
      nginx.push(server)
      await run(['mirror', 'add', mirror, '--http-url', server.url, '--country', country, '--no-probe'])
    }
    await run(['scan', '--all'])
    writeFileSync(join(root, 'pub', '1.0', 'dvd.iso'), Buffer.alloc(300_000, 'd'))
    await run(['index'])
    sync('fr.test')
    await run(['scan', 'fr.test'])
    sync('us.test') // synced, not scanned
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('a US client first goes to France, and within a minute to the US mirror that synced the DVD since its scan', async () => {
    serve = await startServe(['--config', config, '--metrics-listen', '127.0.0.1:0'], tdb.env)
    expect(await answer('pub/1.0/dvd.iso', US_CLIENT)).to.equal('fr.test')
    const seen: string[] = []
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline) {
      const who = await answer('pub/1.0/dvd.iso', US_CLIENT)
      seen.push(who)
      if (who === 'us.test') break
      await new Promise((r) => setTimeout(r, 250))
    }
    expect(seen[seen.length - 1], seen.join(', ')).to.equal('us.test')
    const lookup = await run(['file', 'lookup', 'pub/1.0/dvd.iso', '--json'])
    expect(
      lookup
        .json()
        .files[0].mirrors.map((m: any) => m.identifier)
        .sort(),
    ).to.deep.equal(['fr.test', 'us.test'])
    // A European client stays in Europe, on the French mirror.
    expect(await answer('pub/1.0/dvd.iso', SE_CLIENT)).to.equal('fr.test')
  })
})
