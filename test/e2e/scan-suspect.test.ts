// @store-independent: the scan safety check against an rsync daemon
/**
 * End to end: a mirror whose tree is wiped. Its next scan (a real `rsync --daemon`) is refused
 * by the safety check (`scan.min_ratio`), which keeps the earlier file set but makes the mirror
 * suspect: a running `mb serve` stops redirecting to it (`scan_refused`), `mb mirror show`,
 * `mb mirror list` and `mb file lookup --client-ip` say why, and `mb mirror edit --trust-scan`
 * or a good scan brings it back.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RawResponse, request, type ServeProcess, startServe} from '../helpers/serve-process.js'
import {freePort, waitForPort} from '../helpers/servers.js'

const T = 1_700_000_000
const FILES = ['a.iso', 'b.iso', 'sub/c.iso', 'sub/d.iso']

function write(root: string, rel: string, content: string): void {
  const full = join(root, rel)
  mkdirSync(join(full, '..'), {recursive: true})
  writeFileSync(full, content)
  utimesSync(full, T, T)
}

/** Requests `path` until `ok` accepts the answer (the snapshot follows the store within seconds), at most 30 s. */
async function eventually(port: number, path: string, ok: (r: RawResponse) => boolean): Promise<RawResponse> {
  let last: RawResponse | undefined
  for (let i = 0; i < 150; i++) {
    last = await request(port, path)
    if (ok(last)) return last
    await new Promise((r) => setTimeout(r, 200))
  }
  return last!
}

describe(`a suspect mirror: its scan refused by the safety check (e2e, ${backend})`, function () {
  this.timeout(300_000)
  let dir: string
  let origin: string
  let mirror: string
  let tdb: TestDatabase
  let env: Record<string, string>
  let daemon: ChildProcess | undefined
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'rsync', 'rsync')
    dir = mkdtempSync(join(tmpdir(), 'mb-e2e-suspect-'))
    origin = join(dir, 'origin')
    mirror = join(dir, 'mirror')
    for (const f of FILES) write(origin, f, f.repeat(2000))
    cpSync(origin, mirror, {recursive: true, preserveTimestamps: true})
    const port = await freePort()
    writeFileSync(
      join(dir, 'rsyncd.conf'),
      ['use chroot = no', 'uid = root', 'gid = root', `pid file = ${join(dir, 'rsyncd.pid')}`, `log file = ${join(dir, 'rsyncd.log')}`, '[pub]', `path = ${mirror}`, 'read only = yes', ''].join('\n'),
    )
    daemon = spawn('rsync', ['--daemon', '--no-detach', `--config=${join(dir, 'rsyncd.conf')}`, `--port=${port}`, '--address=127.0.0.1'], {stdio: 'ignore'})
    tdb = await createTestDatabase()
    writeFileSync(join(dir, 'mb.yaml'), 'scan:\n  connect_timeout: 5\n  io_timeout: 5\nserve:\n  poll_seconds: 1\n')
    env = {...tdb.env, MB_CONFIG: join(dir, 'mb.yaml'), MB_ROOT: origin}
    const add = await mb(['mirror', 'add', 'wiped.example', '--http-url', 'http://wiped.example/pub/', '--rsync-url', `rsync://127.0.0.1:${port}/pub/`, '--no-probe', '--no-locate', '--json'], {env})
    expect(add.code, add.stderr).to.equal(0)
    const index = await mb(['index', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    await waitForPort(port)
    const scan = await mb(['scan', 'wiped.example', '--protocol', 'rsync', '--json'], {env})
    expect(scan.code, scan.stdout + scan.stderr).to.equal(0)
    expect(scan.json().mirrors[0]).to.deep.include({ok: true, matched: 4})
    serve = await startServe(['--root', origin], env)
  })

  after(async () => {
    await serve?.stop()
    if (daemon?.pid) daemon.kill('SIGTERM')
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('redirects to the mirror while its scans are good', async () => {
    const r = await request(serve!.port, '/sub/c.iso')
    expect(r.status).to.equal(302)
    expect(r.headers.location).to.equal('http://wiped.example/pub/sub/c.iso')
  })

  it('a refused scan makes it suspect: no redirects, and every view says why', async () => {
    rmSync(mirror, {recursive: true, force: true})
    mkdirSync(mirror)
    write(mirror, 'a.iso', 'a.iso'.repeat(2000)) // one file of four left: below min_ratio 0.5
    const scan = await mb(['scan', 'wiped.example', '--protocol', 'rsync', '--json'], {env})
    expect(scan.code).to.equal(1)
    expect(scan.json().mirrors[0]).to.deep.include({
      ok: false,
      error:
        'rsync: Scan of wiped.example matched only 1 file(s) where it matched 4 before (less than scan.min_ratio 0.5); nothing was changed. If the mirror really lost them, lower scan.min_ratio for this run.',
    })

    const r = await eventually(serve!.port, '/sub/c.iso', (x) => x.status !== 302)
    expect(r.status).to.equal(200)
    expect(r.headers['x-mb-origin-reason']).to.equal('no_mirror')
    expect((await request(serve!.port, '/a.iso')).status).to.equal(200)

    const show = await mb(['mirror', 'show', 'wiped.example', '--json'], {env})
    const row = show.json()
    expect(row.scan_refused_at).to.be.a('string')
    const since = row.scan_refused_at.replace(/\.\d{3}Z$/, 'Z')
    const text = await mb(['mirror', 'show', 'wiped.example'], {env})
    const line = text.stdout.split('\n').find((l) => l.startsWith('suspect:'))
    expect(line?.replace(/^suspect: +/, '')).to.equal(
      `yes, since ${since}: the last scan was refused by the safety check, so no client is sent here (scan_refused) until a good \`mb scan wiped.example\` or \`mb mirror edit wiped.example --trust-scan\``,
    )
    const list = await mb(['mirror', 'list'], {env})
    expect(list.stdout).to.include('refused, suspect: rsync: Scan of wiped.example matched only 1 file(s) where it matched 4 before')

    const lookup = await mb(['file', 'lookup', 'sub/c.iso', '--client-ip', '81.2.69.142', '--json'], {env})
    expect(lookup.code, lookup.stderr).to.equal(0)
    const explain = lookup.json().files[0].explain
    expect(explain.origin.reason).to.equal('no_mirror')
    expect(explain.excluded).to.deep.equal([
      {
        mirror: 'wiped.example',
        reason: 'scan_refused',
        detail: `suspect: its last scan, at ${since}, was refused by the safety check (far fewer files than before: a wiped or truncated tree); a good \`mb scan wiped.example\` or \`mb mirror edit wiped.example --trust-scan\` brings it back`,
      },
    ])
    // The earlier file set is kept.
    expect(lookup.json().files[0].mirrors.map((m: {identifier: string}) => m.identifier)).to.deep.equal(['wiped.example'])
  })

  it('mb mirror edit --trust-scan brings it back with its earlier files', async () => {
    const edit = await mb(['mirror', 'edit', 'wiped.example', '--trust-scan', '--json'], {env})
    expect(edit.code, edit.stderr).to.equal(0)
    expect(edit.json().scan_refused_at).to.equal(null)
    const r = await eventually(serve!.port, '/sub/c.iso', (x) => x.status === 302)
    expect(r.status).to.equal(302)
    expect(r.headers.location).to.equal('http://wiped.example/pub/sub/c.iso')
    const again = await mb(['mirror', 'edit', 'wiped.example', '--trust-scan'], {env})
    expect(again.code).to.equal(0)
    expect(again.stdout.split('\n')[0]).to.equal('Mirror wiped.example unchanged (the values given are already set).')
  })

  it('a good scan after a refused one clears the mark', async () => {
    const refused = await mb(['scan', 'wiped.example', '--protocol', 'rsync', '--json'], {env})
    expect(refused.code).to.equal(1)
    await eventually(serve!.port, '/sub/c.iso', (x) => x.status !== 302)
    for (const f of FILES) write(mirror, f, f.repeat(2000))
    const scan = await mb(['scan', 'wiped.example', '--protocol', 'rsync', '--json'], {env})
    expect(scan.code, scan.stdout).to.equal(0)
    expect((await mb(['mirror', 'show', 'wiped.example', '--json'], {env})).json().scan_refused_at).to.equal(null)
    const r = await eventually(serve!.port, '/sub/c.iso', (x) => x.status === 302)
    expect(r.headers.location).to.equal('http://wiped.example/pub/sub/c.iso')
  })
})
