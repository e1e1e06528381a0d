// @store-independent: the CLI's quiet and usage-error behaviour
/**
 * mb from cron and scripts, on the configured test store: `--quiet` prints errors only (a
 * `--json` document is still printed), `mb scan --all --protocol P` skips the mirrors without
 * a P URL and says so, and `mb serve` with an access log or socket path it cannot open is a
 * usage error (exit 2) before it opens the store or listens.
 */
import {expect} from 'chai'
import {existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx, startVsftpd} from '../helpers/servers.js'

describe(`mb for cron and scripts (${backend})`, () => {
  let tdb: TestDatabase
  let dir: string
  let root: string
  let env: Record<string, string>
  let nginx: RunningServer
  let ftp: RunningServer

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'vsftpd', 'vsftpd')
    dir = mkdtempSync(join(tmpdir(), 'mb-cron-'))
    root = join(dir, 'root')
    mkdirSync(join(root, 'pub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'a.iso'), Buffer.alloc(9000, 1))
    writeFileSync(join(root, 'pub', 'b.iso'), Buffer.alloc(9100, 2))
    nginx = await startNginx({root, autoindex: 'html'})
    ftp = await startVsftpd({root})
    tdb = await createTestDatabase()
    env = {...tdb.env, MB_ROOT: root}
    const index = await mb(['index', '--quiet'], {env})
    expect(index.code, index.stderr).to.equal(0)
    expect(index.stdout + index.stderr).to.equal('')
  })

  after(async () => {
    await nginx?.stop()
    await ftp?.stop()
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('--quiet prints nothing on success, the error on failure, and --json output still', async () => {
    const add = await mb(['mirror', 'add', '--no-locate', 'web.example', '--http-url', nginx.url, '--quiet'], {env})
    expect(add.code, add.stderr).to.equal(0)
    expect(add.stdout + add.stderr).to.equal('')
    const list = await mb(['mirror', 'list', '-q'], {env})
    expect(list.code).to.equal(0)
    expect(list.stdout + list.stderr).to.equal('')
    const json = await mb(['mirror', 'list', '--quiet', '--json'], {env})
    expect(json.json().map((m: {identifier: string}) => m.identifier)).to.deep.equal(['web.example'])
    const missing = await mb(['mirror', 'show', 'nope.example', '--quiet'], {env})
    expect(missing.code).to.equal(1)
    expect(missing.stdout).to.equal('')
    expect(missing.stderr).to.match(/^Error: .*nope\.example/)
  })

  it('scan --all --protocol P skips the mirrors without a P URL and says so (exit 0)', async () => {
    const add = await mb(['mirror', 'add', '--no-locate', 'ftp.example', '--ftp-url', ftp.url, '--http-url', nginx.url], {env})
    expect(add.code, add.stderr).to.equal(0)
    const human = await mb(['scan', '--all', '--protocol', 'ftp'], {env})
    expect(human.code, human.stderr).to.equal(0)
    expect(human.stdout).to.match(/^web\.example: skipped, no ftp URL$/m)
    expect(human.stdout).to.match(/^ftp\.example: ok via ftp, 2 files, 2 matched/m)
    const json = await mb(['scan', '--all', '--protocol', 'ftp', '--json'], {env})
    expect(json.code, json.stderr).to.equal(0)
    const result = json.json()
    expect(result.skipped).to.deep.equal([{mirror: 'web.example', reason: 'no ftp URL'}])
    expect(result.mirrors.map((m: {mirror: string; ok: boolean; protocol: string}) => [m.mirror, m.ok, m.protocol])).to.deep.equal([['ftp.example', true, 'ftp']])
    const quiet = await mb(['scan', '--all', '--protocol', 'ftp', '--quiet'], {env})
    expect(quiet.code, quiet.stderr).to.equal(0)
    expect(quiet.stdout + quiet.stderr).to.equal('')
  })

  it('scan --all --protocol P with no mirror having a P URL is a usage error', async () => {
    const r = await mb(['scan', '--all', '--protocol', 'rsync'], {env})
    expect(r.code).to.equal(2)
    expect(r.stderr).to.contain('None of the 2 enabled mirror(s) has a rsync URL to scan')
  })

  it('serve with an access log in a missing directory exits 2 before it opens the store or listens', async () => {
    const data = join(dir, 'fresh-store')
    const log = join(dir, 'no-such-dir', 'access.log')
    const r = await mb(['serve', '--listen', '127.0.0.1:0', '--access-log', log, ...(backend === 'pglite' ? ['--data-dir', data] : [])], {env, timeoutMs: 60_000})
    expect(r.code).to.equal(2)
    expect(r.stderr).to.contain(`The access log ${log} cannot be created: the directory ${join(dir, 'no-such-dir')} does not exist`)
    expect(r.stdout).to.not.contain('listening')
    expect(existsSync(data)).to.equal(false)
    expect(existsSync(join(dir, 'no-such-dir'))).to.equal(false)
    const isDir = await mb(['serve', '--listen', '127.0.0.1:0', '--access-log', dir], {env, timeoutMs: 60_000})
    expect(isDir.code).to.equal(2)
    expect(isDir.stderr).to.contain(`The access log ${dir} is a directory`)
  })

  it('serve on an embedded store whose socket path is too long exits 2', async () => {
    // The socket exists on the embedded store only, so this runs on one whatever the test backend.
    const deep = join(dir, 'x'.repeat(120))
    const r = await mb(['serve', '--listen', '127.0.0.1:0'], {env: {MB_ROOT: root, MB_DATA_DIR: deep, MB_DATABASE_URL: undefined}, timeoutMs: 60_000})
    expect(r.code).to.equal(2)
    expect(r.stderr).to.contain('more than the 107 a Unix socket path may have')
    expect(readdirSync(dir)).to.not.include('x'.repeat(120))
  })
})
