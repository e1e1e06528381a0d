/**
 * Signals of a real `mb serve` under load (issue 14, item 4):
 * - SIGHUP reloads without a failed request, with and without `--access-log` and with
 *   `--workers 2` (PostgreSQL): a GeoIP file replaced on disk takes effect, a corrupt one is
 *   refused and the old one kept, a changed setting in the config file takes effect, a
 *   restart-only one is named, the access log is reopened, and the process lives on.
 * - SIGUSR2 with `--workers 2` (PostgreSQL) replaces the workers with new ones running the
 *   code now on disk: a copy of the install whose package.json says a new version stands in
 *   for an upgrade. Not one request fails meanwhile, and afterwards every answer carries
 *   `Server: mb/<new version>`.
 */
import {copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import http from 'node:http'
import {dirname, join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {BIN, mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {startLoad} from '../helpers/load.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geoip/', import.meta.url))
/** Unknown to GeoLite2-City-Test, US in GeoIP2-Country-Test (MaxMind's test data). */
const CLIENT = '214.78.120.1'
const HEADERS = {'X-Forwarded-For': CLIENT}
/** Bytes of a file no mirror holds: delivered from the origin, larger than socket buffers. */
const BIG = 32 * 1024 * 1024

/** Occurrences of `"msg":"<msg>"` in the output. */
function count(output: string, msg: string): number {
  return output.split(`"msg":"${msg}"`).length - 1
}

async function waitFor(what: string, serve: ServeProcess, predicate: () => boolean, ms = 60_000): Promise<void> {
  for (let waited = 0; !predicate(); waited += 50) {
    if (waited > ms) throw new Error(`timed out waiting for ${what}:\n${serve.output()}`)
    if (serve.child.exitCode !== null || serve.child.signalCode !== null)
      throw new Error(`mb serve exited (${serve.child.exitCode ?? serve.child.signalCode}) while waiting for ${what}:\n${serve.output()}`)
    await sleep(50)
  }
}

/** Writes `path` as a whole: a temporary file renamed over it (what geoipupdate and editors do). */
function replaceFile(path: string, content: Buffer | string): void {
  writeFileSync(`${path}.tmp`, content)
  renameSync(`${path}.tmp`, path)
}

/** The realms of `n` answers to `/a.iso`, each on a new connection (spread over the workers). */
async function realms(port: number, n: number): Promise<string[]> {
  const out: string[] = []
  for (let i = 0; i < n; i++) {
    const res = await request(port, '/a.iso', {headers: HEADERS})
    out.push(res.status === 302 ? String(res.headers['x-mb-realm']) : `status ${res.status}`)
  }
  return out
}

describe(`mb serve signals (${backend})`, function () {
  /** Downloads per file counted so far (`mb stats`; the earlier tests count too). */
  async function downloadsByFile(): Promise<Record<string, number>> {
    const stats = (await mb(['stats', '--by', 'file', '--json'], {env: tdb.env})).json()
    return Object.fromEntries(stats.rows.map((r: {key: string; downloads: number}) => [r.key, r.downloads]))
  }

  this.timeout(240_000)
  let tdb: TestDatabase
  let dir: string
  let root: string
  let serve: ServeProcess | undefined

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-serve-signals-'))
    root = join(dir, 'root')
    mkdirSync(root)
    writeFileSync(join(root, 'a.iso'), Buffer.alloc(8000, 1))
    writeFileSync(join(root, 'big.bin'), Buffer.alloc(BIG, 2))
    // The index row says mtime 0: so does the disk (a differing file would be served by the origin).
    for (const f of ['a.iso', 'big.bin']) utimesSync(join(root, f), 0, 0)
    const database = await tdb.open()
    try {
      await database.db.insertInto('mirror').values({id: 1, identifier: 'us.example', http_url: 'http://us.example/', country: 'US', continent: 'NA'}).execute()
      await database.db
        .insertInto('file')
        .values([
          {path: 'a.iso', size: 8000, mtime: 0, mirrors: [1]},
          {path: 'big.bin', size: BIG, mtime: 0, mirrors: []},
        ])
        .execute()
    } finally {
      await database.close()
    }
  })

  afterEach(async () => {
    await serve?.stop()
    serve = undefined
  })

  after(async () => {
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const variants: Array<{name: string; workers: number; accessLog: boolean}> = [
    {name: 'one process, no --access-log', workers: 1, accessLog: false},
    {name: 'one process, --access-log', workers: 1, accessLog: true},
  ]
  if (backend === 'postgres') variants.push({name: '--workers 2, --access-log', workers: 2, accessLog: true})

  for (const variant of variants) {
    it(`SIGHUP under load (${variant.name}): reloads GeoIP and the config file, refuses a corrupt GeoIP file, no request fails`, async () => {
      const geo = join(dir, `geo-${variant.workers}-${variant.accessLog}.mmdb`)
      const config = join(dir, `mb-${variant.workers}-${variant.accessLog}.yaml`)
      const log = join(dir, `access-${variant.workers}.log`)
      copyFileSync(join(FIXTURES, 'GeoLite2-City-Test.mmdb'), geo)
      writeFileSync(config, `trusted_proxies: [127.0.0.1/32]\ngeoip: [${geo}]\n`)
      const args = ['--root', root, '--config', config, ...(variant.workers > 1 ? ['--workers', String(variant.workers)] : []), ...(variant.accessLog ? ['--access-log', log] : [])]
      serve = await startServe(args, tdb.env)
      const s = serve
      const workers = variant.workers
      await waitFor('every worker listening', s, () => count(s.output(), 'listening') >= workers)
      // The client is unknown to the first GeoIP file: its mirror is not in its country.
      expect(await realms(s.port, 4)).to.not.include('country')

      const load = startLoad(s.port, '/a.iso', {headers: HEADERS, concurrency: 6})
      await sleep(300)

      // 1. geoipupdate replaces the file; SIGHUP: the client is now located in the US.
      replaceFile(geo, readFileSync(join(FIXTURES, 'GeoIP2-Country-Test.mmdb')))
      if (variant.accessLog) renameSync(log, `${log}.1`) // logrotate moves the log away first
      s.child.kill('SIGHUP')
      await waitFor('the first reload', s, () => count(s.output(), 'reloaded') >= workers)
      expect(await realms(s.port, 6)).to.deep.equal(Array(6).fill('country'))

      // 2. A corrupt file is refused: the databases in use are kept.
      replaceFile(geo, 'this is not a MaxMind database\n'.repeat(100))
      s.child.kill('SIGHUP')
      await waitFor('the second reload', s, () => count(s.output(), 'reloaded') >= 2 * workers)
      expect(s.output()).to.include('reload: a GeoIP/ASN database cannot be opened; the databases in use are kept')
      expect(s.output()).to.include('cannot be read as a MaxMind DB')
      expect(await realms(s.port, 6)).to.deep.equal(Array(6).fill('country'))

      // 3. A setting in the config file: *.iso is now delivered from the origin. The poll
      //    interval needs a restart, and the reload says so.
      writeFileSync(config, `trusted_proxies: [127.0.0.1/32]\ngeoip: [${geo}]\nselect:\n  origin_only: ['*.iso']\nserve:\n  poll_seconds: 3\n`)
      s.child.kill('SIGHUP')
      await waitFor('the third reload', s, () => count(s.output(), 'reloaded') >= 3 * workers)
      for (let i = 0; i < 6; i++) {
        const res = await request(s.port, '/a.iso', {headers: HEADERS})
        expect(res.status).to.equal(200)
        expect(res.headers['x-mb-origin-reason']).to.equal('origin_only')
        expect(res.body.length).to.equal(8000)
      }
      expect(s.output()).to.match(/"settings":\["serve.poll_seconds"\].*"msg":"reload: these changed settings take effect only after a restart"/)

      // 4. A config file that no longer validates keeps the running settings.
      writeFileSync(config, 'select:\n  min_size: lots\n')
      s.child.kill('SIGHUP')
      await waitFor('the fourth reload', s, () => count(s.output(), 'reloaded') >= 4 * workers)
      expect(s.output()).to.include('reload: the configuration cannot be read; the running settings stay in effect')
      expect(s.output()).to.include('Invalid setting select.min_size')
      expect((await request(s.port, '/a.iso', {headers: HEADERS})).headers['x-mb-origin-reason']).to.equal('origin_only')

      await sleep(300)
      const result = await load.stop()
      console.log(`      ${result.total} requests under load during four reloads (${variant.name})`)
      expect(result.errors, result.errors.slice(0, 5).join('; ')).to.deep.equal([])
      expect(Object.keys(result.statuses).sort()).to.deep.equal(['200', '302'])
      expect(result.total).to.be.greaterThan(100)
      expect(s.child.exitCode).to.equal(null)
      expect(s.child.signalCode).to.equal(null)

      if (variant.accessLog) {
        // The reload reopened the log at its path: the requests after the move are in a new file.
        await sleep(600)
        expect(existsSync(log)).to.equal(true)
        expect(readFileSync(log, 'utf8')).to.match(/"GET \/a\.iso HTTP\/1\.1" 200 8000 /)
        expect(readFileSync(`${log}.1`, 'utf8')).to.match(/"GET \/a\.iso HTTP\/1\.1" 302 - /)
      }
      await s.stop()
      expect(s.child.exitCode).to.equal(0)
    })
  }

  if (backend === 'postgres') {
    it('SIGUSR2 under load (--workers 2): the workers are replaced by the upgraded code, no request fails', async () => {
      // A copy of the install: bin, dist, package.json, the manifest; node_modules linked.
      const home = join(dirname(BIN), '..')
      const install = join(dir, 'install')
      for (const part of ['bin', 'dist', 'migrations', 'package.json', 'oclif.manifest.json']) if (existsSync(join(home, part))) cpSync(join(home, part), join(install, part), {recursive: true})
      symlinkSync(join(home, 'node_modules'), join(install, 'node_modules'))
      const pkg = JSON.parse(readFileSync(join(install, 'package.json'), 'utf8'))
      const oldVersion = pkg.version as string

      serve = await startServe(['--root', root, '--workers', '2'], tdb.env, {bin: join(install, 'bin', 'run.js')})
      const s = serve
      await waitFor('both workers listening', s, () => count(s.output(), 'listening') >= 2)
      expect((await request(s.port, '/a.iso')).headers.server).to.equal(`mb/${oldVersion}`)

      // The upgrade: new code on disk, as `npm install -g` of a newer release leaves it.
      const newVersion = '99.0.0-test'
      writeFileSync(join(install, 'package.json'), JSON.stringify({...pkg, version: newVersion}, null, 2))
      const manifestPath = join(install, 'oclif.manifest.json')
      if (existsSync(manifestPath)) writeFileSync(manifestPath, JSON.stringify({...JSON.parse(readFileSync(manifestPath, 'utf8')), version: newVersion}))

      const load = startLoad(s.port, '/a.iso', {concurrency: 6})
      await sleep(300)
      s.child.kill('SIGUSR2')
      await waitFor('the replacement', s, () => count(s.output(), 'workers replaced') >= 1, 120_000)
      await sleep(300)
      const result = await load.stop()
      console.log(`      ${result.total} requests under load during the replacement: ${JSON.stringify(result.servers)}`)
      expect(result.errors, result.errors.slice(0, 5).join('; ')).to.deep.equal([])
      expect(Object.keys(result.statuses)).to.deep.equal(['302'])
      expect(result.servers[`mb/${newVersion}`]).to.be.greaterThan(0)
      expect(count(s.output(), 'worker replaced')).to.equal(2)
      expect(s.output()).to.not.include('worker died')
      // Every worker now runs the new code.
      for (let i = 0; i < 10; i++) expect((await request(s.port, '/a.iso')).headers.server).to.equal(`mb/${newVersion}`)
      expect(s.child.exitCode).to.equal(null)
      await s.stop()
      expect(s.child.exitCode).to.equal(0)
    })
  }

  it('SIGTERM lets a download in flight finish, then writes its count and exits 0', async () => {
    const before = await downloadsByFile()
    // Counts wait in memory for an hour: only the flush at shutdown writes them.
    serve = await startServe(['--root', root, '--stats-flush-interval', '3600'], tdb.env)
    const s = serve
    for (let i = 0; i < 3; i++) expect((await request(s.port, '/a.iso')).status).to.equal(302)
    const {res, body} = await new Promise<{res: http.IncomingMessage; body: Buffer[]}>((resolve, reject) => {
      const req = http.get({host: '127.0.0.1', port: s.port, path: '/big.bin', agent: false}, (r) => {
        const chunks: Buffer[] = []
        r.once('data', (chunk: Buffer) => {
          chunks.push(chunk)
          r.pause()
          resolve({res: r, body: chunks})
        })
      })
      req.on('error', reject)
    })
    const exited = new Promise<number | null>((resolve) => s.child.once('exit', (code) => resolve(code)))
    s.child.kill('SIGTERM')
    await sleep(500)
    // Still draining: the download is not done.
    expect(s.child.exitCode).to.equal(null)
    const done = new Promise<void>((resolve) => res.once('end', () => resolve()))
    res.on('data', (chunk: Buffer) => body.push(chunk))
    res.resume()
    await done
    expect(res.statusCode).to.equal(200)
    expect(Buffer.concat(body).length).to.equal(BIG)
    expect(await exited).to.equal(0)
    const after = await downloadsByFile()
    expect({a: after['a.iso'] - (before['a.iso'] ?? 0), big: after['big.bin'] - (before['big.bin'] ?? 0)}).to.deep.equal({a: 3, big: 1})
  })

  it('SIGUSR2 without --workers is logged and ignored', async () => {
    serve = await startServe(['--root', root], tdb.env)
    const s = serve
    s.child.kill('SIGUSR2')
    await waitFor('the warning', s, () => s.output().includes('SIGUSR2 replaces the workers'))
    expect((await request(s.port, '/a.iso')).status).to.equal(302)
    expect(s.child.exitCode).to.equal(null)
  })
})
