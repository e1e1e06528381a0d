// @store-independent: the rsync lister through the CLI; reconcile is in integration/scan-reconcile
/**
 * End to end: a real `rsync --daemon` on a random loopback port serving a mirror tree with
 * awkward names, symlinks, a `.~tmp~` directory, an empty directory and 10,000+ files; `mb index`
 * and `mb scan` run as the compiled CLI. Fault cases: a port that refuses connections, a server
 * that accepts and never answers, wrong credentials, and a scan SIGKILLed halfway through its
 * listing. Every failure must leave the previous records intact.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {chmodSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync} from 'node:fs'
import net from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import {addMirror, editMirror} from '../../src/lib/mirrors/registry.js'
import {BIN, hermeticEnv, mb, requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase, withDatabase} from '../helpers/db.js'
import {waitForPort} from '../helpers/servers.js'

const T = 1_700_000_000
const AWKWARD = ['a b#c+d%e:f.txt', 'Grüße 日本.iso', ' leading space', 'new\nline', '100%.txt']
const BULK_DIRS = 100
const BULK_FILES = 101 // per dir: 10,100 files in all
/**
 * Files the rsync listing shows through the mirror's symlinks (it lists with --copy-links) that
 * count: latest.iso. linked-dir/inner.txt is dir/inner.txt seen again through the origin's
 * directory symlink, counted once (src/lib/scan/reconcile.ts).
 */
const LINKED = 1

function write(root: string, rel: string, content: string): void {
  const full = join(root, rel)
  mkdirSync(join(full, '..'), {recursive: true})
  writeFileSync(full, content)
  utimesSync(full, T, T)
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const {port} = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

describe('mb scan over a real rsync daemon (e2e)', function () {
  this.timeout(300_000)
  let dir: string
  let origin: string
  let mirror: string
  let tdb: TestDatabase
  let env: Record<string, string>
  let daemon: ChildProcess | undefined
  let port: number
  const servers: net.Server[] = []
  const sockets: net.Socket[] = []
  let originFiles = 0

  before(async function () {
    requireBinary(this, 'rsync', 'rsync')
    dir = mkdtempSync(join(tmpdir(), 'mb-e2e-rsync-'))
    origin = join(dir, 'origin')
    mirror = join(dir, 'mirror')
    // The origin tree.
    write(origin, 'big.iso', 'x'.repeat(5000))
    write(origin, 'stale.iso', 'origin version')
    write(origin, 'only-on-origin.txt', 'o')
    for (const name of AWKWARD) write(origin, `weird/${name}`, name)
    write(origin, 'dir/inner.txt', 'inner')
    symlinkSync('big.iso', join(origin, 'latest.iso'))
    symlinkSync('dir', join(origin, 'linked-dir'))
    mkdirSync(join(origin, 'empty'))
    for (let d = 0; d < BULK_DIRS; d++) {
      mkdirSync(join(origin, 'bulk', `d${d}`), {recursive: true})
      for (let f = 0; f < BULK_FILES; f++) {
        const full = join(origin, 'bulk', `d${d}`, `f${f}.txt`)
        writeFileSync(full, `${d}/${f}`)
        utimesSync(full, T, T)
      }
    }
    // latest.iso and linked-dir are links in the index (file_link), not files.
    originFiles = 3 + AWKWARD.length + 1 + BULK_DIRS * BULK_FILES
    // The mirror: a copy with one stale file, one missing file and an rsync .~tmp~ staging dir.
    cpSync(origin, mirror, {recursive: true, verbatimSymlinks: true, preserveTimestamps: true})
    write(mirror, 'stale.iso', 'mirror has an older version')
    rmSync(join(mirror, 'only-on-origin.txt'))
    write(mirror, '.~tmp~/big.iso', 'partial')
    write(mirror, 'bulk/d0/.~tmp~/f1.txt', 'partial')

    port = await freePort()
    writeFileSync(join(dir, 'secrets'), 'alice:s3cr3t-pw\n')
    chmodSync(join(dir, 'secrets'), 0o600)
    writeFileSync(
      join(dir, 'rsyncd.conf'),
      [
        'use chroot = no',
        'uid = root',
        'gid = root',
        `pid file = ${join(dir, 'rsyncd.pid')}`,
        `log file = ${join(dir, 'rsyncd.log')}`,
        '[pub]',
        `path = ${mirror}`,
        'read only = yes',
        '[secure]',
        `path = ${mirror}`,
        'read only = yes',
        'auth users = alice',
        `secrets file = ${join(dir, 'secrets')}`,
        'strict modes = no',
        '',
      ].join('\n'),
    )
    daemon = spawn('rsync', ['--daemon', '--no-detach', `--config=${join(dir, 'rsyncd.conf')}`, `--port=${port}`, '--address=127.0.0.1'], {stdio: 'ignore'})
    await waitForPort(port, 100)

    tdb = await createTestDatabase()
    writeFileSync(join(dir, 'mb.yaml'), 'scan:\n  connect_timeout: 3\n  io_timeout: 3\n')
    env = {...tdb.env, MB_CONFIG: join(dir, 'mb.yaml'), MB_ROOT: origin}
    // Registered in-process, as `mb mirror add --no-locate` would (a scan does not look at
    // what the probe after it finds).
    await withDatabase(tdb, async (database) => {
      const add = (name: string, rsyncUrl: string) => addMirror(database.db, {identifier: name, http_url: `http://${name}.example/`, rsync_url: rsyncUrl})
      await add('good', `rsync://127.0.0.1:${port}/pub/`)
      await add('secure', `rsync://alice@127.0.0.1:${port}/secure/`)
      await add('refusing', `rsync://127.0.0.1:${port}/pub/`)
      await add('silent', `rsync://127.0.0.1:${port}/pub/`)
      await add('killed', `rsync://127.0.0.1:${port}/pub/`)
    })
    const index = await mb(['index', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    expect(index.json()).to.deep.include({files: originFiles, added: originFiles, removed: 0, links: 2})
  })

  after(async () => {
    for (const s of sockets) s.destroy()
    for (const s of servers) s.close()
    if (daemon?.pid) daemon.kill('SIGTERM')
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  async function holders(name: string): Promise<string[]> {
    return withDatabase(tdb, async (database) => {
      const rows = await sql<{path: string}>`SELECT f.path FROM file f JOIN mirror m ON m.id = ANY(f.mirrors) WHERE m.identifier = ${name} ORDER BY f.path`.execute(database.db)
      return rows.rows.map((r) => r.path)
    })
  }

  function mirrorRow(name: string) {
    return withDatabase(tdb, (database) => database.db.selectFrom('mirror').selectAll().where('identifier', '=', name).executeTakeFirstOrThrow())
  }

  /** Points a mirror at another rsync URL, in-process, as `mb mirror edit NAME --rsync-url URL` would. */
  async function setRsyncUrl(name: string, url: string): Promise<void> {
    await withDatabase(tdb, (database) => editMirror(database.db, name, {rsync_url: url}))
  }

  it('lists the mirror and records exactly the files it holds at the origin version', async () => {
    const r = await mb(['scan', 'good', 'refusing', 'silent', 'killed', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const out = r.json()
    expect(out.ok).to.equal(true)
    const good = out.mirrors.find((m: any) => m.mirror === 'good')
    // Everything but the stale and the missing file; .~tmp~ entries are not listed.
    expect(good).to.deep.include({ok: true, protocol: 'rsync', files: originFiles - 1 + LINKED, matched: originFiles - 2, stale: 1, missing: 1})
    const held = await holders('good')
    expect(held).to.have.length(originFiles - 2)
    for (const name of AWKWARD) expect(held).to.include(`weird/${name}`)
    expect(held).to.include.members(['big.iso', 'dir/inner.txt', 'bulk/d99/f100.txt'])
    expect(held).to.not.include('latest.iso')
    expect(held).to.not.include('linked-dir/inner.txt')
    expect(held).to.not.include('stale.iso')
    expect(held).to.not.include('only-on-origin.txt')
    expect(held.filter((p) => p.includes('.~tmp~'))).to.deep.equal([])
    const database = await tdb.open()
    try {
      const stale = await sql<{
        path: string
        size: number
      }>`SELECT f.path, s.size FROM mirror_file_stale s JOIN file f ON f.id = s.file_id JOIN mirror m ON m.id = s.mirror_id WHERE m.identifier = 'good'`.execute(database.db)
      expect(stale.rows).to.deep.equal([{path: 'stale.iso', size: 'mirror has an older version'.length}])
    } finally {
      await database.close()
    }
    const row = await mirrorRow('good')
    expect(row).to.deep.include({last_scan_protocol: 'rsync', last_scan_files: originFiles - 1 + LINKED, last_scan_matched: originFiles - 2, last_scan_error: null})
  })

  it('uses credentials from RSYNC_PASSWORD and never prints the password', async () => {
    const ok = await mb(['scan', 'secure', '--json'], {env: {...env, RSYNC_PASSWORD: 's3cr3t-pw'}})
    expect(ok.code, ok.stderr).to.equal(0)
    expect(ok.json().mirrors[0]).to.deep.include({ok: true, matched: originFiles - 2})
    const bad = await mb(['scan', 'secure'], {env: {...env, RSYNC_PASSWORD: 'wrong-pw'}})
    expect(bad.code).to.equal(1)
    expect(bad.stderr).to.match(/secure: FAILED .*exit 5.*auth failed on module secure/)
    expect(bad.stdout + bad.stderr).to.not.include('wrong-pw')
    expect(await holders('secure')).to.have.length(originFiles - 2)
  })

  it('a mirror that refuses connections fails with the reason and keeps its records', async () => {
    const before = await holders('refusing')
    expect(before).to.have.length(originFiles - 2)
    const closed = await freePort()
    await setRsyncUrl('refusing', `rsync://127.0.0.1:${closed}/pub/`)
    const r = await mb(['scan', 'refusing'], {env})
    expect(r.code).to.equal(1)
    expect(r.stderr).to.match(/refusing: FAILED .*rsync: .*Connection refused/)
    expect(await holders('refusing')).to.deep.equal(before)
    const row = await mirrorRow('refusing')
    expect(row.last_scan_error).to.match(/Connection refused/)
    expect(row.last_scan_matched).to.equal(originFiles - 2)
  })

  it('a mirror that accepts and never answers times out with the reason and keeps its records', async () => {
    const before = await holders('silent')
    const server = net.createServer((socket) => {
      sockets.push(socket) // accept, never write
    })
    servers.push(server)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()))
    const silentPort = (server.address() as net.AddressInfo).port
    await setRsyncUrl('silent', `rsync://127.0.0.1:${silentPort}/pub/`)
    const r = await mb(['scan', 'silent', '--timeout', '60', '--json'], {env})
    expect(r.code).to.equal(1)
    const result = r.json().mirrors[0]
    expect(result.ok).to.equal(false)
    expect(result.error).to.match(/rsync: .*(timeout|timed out)/i)
    expect(await holders('silent')).to.deep.equal(before)
    expect((await mirrorRow('silent')).last_scan_error).to.match(/timeout|timed out/i)
  })

  it('a scan killed with SIGKILL halfway through the listing keeps the previous records', async () => {
    const before = await holders('killed')
    expect(before).to.have.length(originFiles - 2)
    const rowBefore = await mirrorRow('killed')
    // A throttling proxy in front of the daemon: the listing arrives slowly; kill mb when part of it has.
    let forwarded = 0
    let onHalf!: () => void
    const half = new Promise<void>((resolve) => (onHalf = resolve))
    const proxy = net.createServer((client) => {
      sockets.push(client)
      const upstream = net.connect(port, '127.0.0.1')
      sockets.push(upstream)
      client.pipe(upstream)
      // Forward at most 4 KiB every 20 ms.
      upstream.on('data', async (chunk: Buffer) => {
        upstream.pause()
        for (let i = 0; i < chunk.length && !client.destroyed; i += 4096) {
          const piece = chunk.subarray(i, i + 4096)
          forwarded += piece.length
          client.write(piece)
          if (forwarded > 40_000) onHalf()
          await new Promise((r) => setTimeout(r, 20))
        }
        upstream.resume()
      })
      upstream.on('error', () => client.destroy())
      client.on('error', () => upstream.destroy())
      client.on('close', () => upstream.destroy())
    })
    servers.push(proxy)
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', () => resolve()))
    const proxyPort = (proxy.address() as net.AddressInfo).port
    await setRsyncUrl('killed', `rsync://127.0.0.1:${proxyPort}/pub/`)
    const child = spawn(process.execPath, [BIN, 'scan', 'killed', '--min-ratio', '0'], {env: hermeticEnv(env), stdio: 'ignore'})
    const exited = new Promise<number | null>((resolve) => child.on('close', (_code, signal) => resolve(signal === 'SIGKILL' ? -9 : _code)))
    await half
    child.kill('SIGKILL')
    expect(await exited).to.equal(-9)
    expect(await holders('killed')).to.deep.equal(before)
    const rowAfter = await mirrorRow('killed')
    expect(rowAfter.last_scan_ok_at).to.deep.equal(rowBefore.last_scan_ok_at)
    expect(rowAfter.last_scan_error).to.equal(null)
    // The store is usable afterwards and a full scan through the proxy completes.
    const again = await mb(['scan', 'killed', '--json'], {env})
    expect(again.code, again.stderr).to.equal(0)
    expect(again.json().mirrors[0]).to.deep.include({ok: true, matched: originFiles - 2})
  })

  it('--dir rescans one subtree; --protocol rsync and usage errors', async () => {
    await setRsyncUrl('refusing', `rsync://127.0.0.1:${port}/pub/`)
    const r = await mb(['scan', 'refusing', '--dir', 'weird', '--protocol', 'rsync', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().mirrors[0]).to.deep.include({ok: true, files: AWKWARD.length, matched: AWKWARD.length})
    expect(await holders('refusing')).to.have.length(originFiles - 2)
    const usage = await mb(['scan'], {env})
    expect(usage.code).to.equal(2)
    expect(usage.stderr).to.match(/Name the mirror\(s\) to scan, or pass --all/)
    const escaping = await mb(['scan', 'good', '--dir', '../etc'], {env})
    expect(escaping.code).to.equal(2)
  })

  it('--dir DIR --no-recursive scans the files directly in one folder and leaves the mirror record alone', async () => {
    const before = await mirrorRow('refusing')
    const r = await mb(['scan', 'refusing', '--dir', '/', '--no-recursive', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    // The top folder: big.iso matches, stale.iso differs, only-on-origin.txt is missing; latest.iso is a link in the index.
    expect(r.json().mirrors[0]).to.deep.include({ok: true, files: 3, matched: 1, stale: 1, missing: 1})
    expect(await holders('refusing')).to.have.length(originFiles - 2)
    const after = await mirrorRow('refusing')
    expect([after.last_scan_at, after.last_scan_files]).to.deep.equal([before.last_scan_at, before.last_scan_files])
    const enabling = await mb(['scan', 'refusing', '--dir', 'dir', '--no-recursive', '--enable'], {env})
    expect(enabling.code).to.equal(2)
  })

  it('--dir of a folder the mirror has not synced yet is an empty folder (exit 0); a wrong rsync path still fails', async () => {
    const r = await mb(['scan', 'refusing', '--dir', 'not-synced-yet', '--no-recursive'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stdout).to.match(/^refusing: ok via rsync, 0 files \(folder not on the mirror\), 0 matched/)
    const recursive = await mb(['scan', 'refusing', '--dir', 'not-synced-yet', '--json'], {env})
    expect(recursive.code, recursive.stderr).to.equal(0)
    expect(recursive.json().mirrors[0]).to.deep.include({ok: true, files: 0, absent: true})
    expect(await holders('refusing')).to.have.length(originFiles - 2)
    await setRsyncUrl('refusing', `rsync://127.0.0.1:${port}/pub/no-such-base/`)
    try {
      const broken = await mb(['scan', 'refusing', '--dir', 'not-synced-yet', '--no-recursive'], {env})
      expect(broken.code).to.equal(1)
      expect(broken.stderr).to.match(/rsync directory not-synced-yet\/ and base rsync:\/\/127\.0\.0\.1:\d+\/pub\/no-such-base\/ do not exist .*check the mirror's rsync URL/)
    } finally {
      await setRsyncUrl('refusing', `rsync://127.0.0.1:${port}/pub/`)
    }
  })
})
