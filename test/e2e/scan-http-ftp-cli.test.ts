// @store-independent: the FTP and HTTP listers through the CLI; reconcile is in integration/scan-reconcile
/**
 * End to end through the compiled CLI: `mb index` over the shared mirror tree, then `mb scan`
 * of mirrors that only have FTP and HTTP URLs (real vsftpd, nginx and lighttpd on loopback):
 * the FTP lister is used before HTTP, a refusing FTP server falls back to HTTP, and failures
 * (FTP 550, an HTTP base redirecting to ftp://) are recorded with their reason while the
 * previous records stay intact.
 */
import {expect} from 'chai'
import {writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {sql} from 'kysely'
import {mb, requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {createMirrorTree, expectedFileSet, type MirrorTree} from '../helpers/mirror-tree.js'
import {refusedPort, startLighttpd, startNginx, startVsftpd, type RunningServer} from '../helpers/servers.js'

describe('e2e: mb scan over FTP and HTTP (CLI)', function () {
  this.timeout(300_000)
  let tree: MirrorTree
  let tdb: TestDatabase
  let env: Record<string, string>
  let ftp: RunningServer
  let nginx: RunningServer
  let lighttpd: RunningServer
  /** Origin paths the mirror serves with the origin's size: what every good scan must match. */
  let servable: string[]

  before(async function () {
    requireBinary(this, 'vsftpd', 'vsftpd')
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'lighttpd', 'lighttpd')
    tree = await createMirrorTree({bulkFiles: 1000})
    ftp = await startVsftpd({root: tree.root})
    nginx = await startNginx({root: tree.root, autoindex: 'html', serverConfig: 'location = /to-ftp/ { return 301 ftp://127.0.0.1/pub/; }'})
    lighttpd = await startLighttpd({root: tree.root})
    tdb = await createTestDatabase()
    const config = join(tree.root, '..', 'mb.yaml')
    writeFileSync(config, 'scan:\n  connect_timeout: 3\n  io_timeout: 5\n')
    env = {...tdb.env, MB_CONFIG: config, MB_ROOT: tree.root}
    const index = await mb(['index', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    const database = await tdb.open()
    try {
      const origin = (await sql<{path: string}>`SELECT path FROM file ORDER BY path`.execute(database.db)).rows.map((r) => r.path)
      const served = await expectedFileSet(tree.root)
      servable = origin.filter((p) => served.has(p))
    } finally {
      await database.close()
    }
    expect(servable.length).to.be.greaterThan(1000)
    const add = async (name: string, ...urls: string[]) => {
      const r = await mb(['mirror', 'add', '--no-locate', name, ...urls, '--json'], {env})
      expect(r.code, r.stderr).to.equal(0)
    }
    await add('ftp-first', '--ftp-url', ftp.url, '--http-url', `http://127.0.0.1:${await refusedPort()}/`)
    await add('falls-back', '--ftp-url', `ftp://127.0.0.1:${await refusedPort()}/`, '--http-url', nginx.url)
    await add('lighty', '--http-url', lighttpd.url)
  })

  after(async () => {
    await ftp?.stop()
    await nginx?.stop()
    await lighttpd?.stop()
    await tdb?.drop()
    await tree?.cleanup()
  })

  async function holders(name: string): Promise<string[]> {
    const database = await tdb.open()
    try {
      const rows = await sql<{path: string}>`SELECT f.path FROM file f JOIN mirror m ON m.id = ANY(f.mirrors) WHERE m.identifier = ${name} ORDER BY f.path`.execute(database.db)
      return rows.rows.map((r) => r.path)
    } finally {
      await database.close()
    }
  }

  async function lastError(name: string): Promise<string | null> {
    const database = await tdb.open()
    try {
      const row = await database.db.selectFrom('mirror').select(['last_scan_error']).where('identifier', '=', name).executeTakeFirstOrThrow()
      return row.last_scan_error as string | null
    } finally {
      await database.close()
    }
  }

  it('scans over FTP before HTTP, falls back from a refusing FTP server to HTTP, and reads lighttpd indexes', async () => {
    const r = await mb(['scan', 'ftp-first', 'falls-back', 'lighty', '--json'], {env})
    expect(r.code, r.stdout + r.stderr).to.equal(0)
    const out = r.json()
    const by = (n: string) => out.mirrors.find((m: any) => m.mirror === n)
    expect(by('ftp-first')).to.deep.include({ok: true, protocol: 'ftp', matched: servable.length, stale: 0})
    expect(by('falls-back')).to.deep.include({ok: true, protocol: 'http', matched: servable.length, stale: 0})
    expect(by('falls-back').attempts[0].protocol).to.equal('ftp')
    expect(by('falls-back').attempts[0].error).to.match(/refused \(ECONNREFUSED\)/)
    expect(by('lighty')).to.deep.include({ok: true, protocol: 'http', matched: servable.length, stale: 0})
    for (const name of ['ftp-first', 'falls-back', 'lighty']) expect(await holders(name), name).to.deep.equal(servable)
  })

  it('an FTP base directory that does not exist (550) fails with the reason and keeps the records', async () => {
    const before = await holders('ftp-first')
    expect((await mb(['mirror', 'edit', 'ftp-first', '--ftp-url', ftp.url + 'nope/'], {env})).code).to.equal(0)
    const r = await mb(['scan', 'ftp-first', '--protocol', 'ftp', '--json'], {env})
    expect(r.code).to.equal(1)
    expect(r.json().mirrors[0].error).to.match(/^ftp: FTP base directory \/nope does not exist on 127\.0\.0\.1:\d+ \(550 /)
    expect(await lastError('ftp-first')).to.match(/FTP base directory \/nope does not exist/)
    expect(await holders('ftp-first')).to.deep.equal(before)
  })

  it('an HTTP base that redirects to ftp:// fails with the reason and keeps the records', async () => {
    const before = await holders('falls-back')
    expect(before).to.have.length(servable.length)
    expect((await mb(['mirror', 'edit', 'falls-back', '--http-url', nginx.url + 'to-ftp/'], {env})).code).to.equal(0)
    const r = await mb(['scan', 'falls-back', '--json'], {env})
    expect(r.code).to.equal(1)
    const error = r.json().mirrors[0].error as string
    expect(error).to.match(/ftp: FTP connection to 127\.0\.0\.1:\d+ refused/)
    expect(error).to.match(/http: HTTP base URL http:\/\/127\.0\.0\.1:\d+\/to-ftp\/ redirects to ftp:\/\/127\.0\.0\.1\/pub\/; refusing to scan/)
    expect(await holders('falls-back')).to.deep.equal(before)
  })
})
