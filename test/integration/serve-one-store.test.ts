// @store-independent: two `mb serve` on one embedded store, which it makes itself on both runs
/**
 * One embedded store, one server (issue 36, item 10). A second `mb serve` on a store that a
 * running one serves used to start as a client of the first, lose every count it made once the
 * first stopped (the socket went with it), and log the loss as `retained: 1` (keys). Now it is
 * refused, naming the first's pid and the store, while the first, under load meanwhile,
 * answers every request; every download a client received is in the statistics after the
 * first stops, and no count is reported lost. A socket file left by a server that died is no
 * second server: beside a holder that shares nothing, the start fails as DB_BUSY, naming it.
 */
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {createEmbeddedTestDatabase, seedOneMirror, type TestDatabase} from '../helpers/db.js'
import {startLoad} from '../helpers/load.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

describe('two mb serve on one embedded store', function () {
  this.timeout(240_000)
  let tdb: TestDatabase
  let root: string
  let first: ServeProcess | undefined

  before(async () => {
    tdb = await createEmbeddedTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-one-store-'))
    await seedOneMirror(tdb, {path: 'a.iso', size: 8000, mtime: 0})
  })

  after(async () => {
    await first?.stop()
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('refuses the second beside the first (naming its pid and the store); every download the clients got is counted', async () => {
    // The environment names the embedded store only, whatever the test backend.
    const env = {...tdb.env, MB_DATABASE_URL: undefined}
    first = await startServe(['--root', root], env)
    const pid = first.child.pid!
    const load = startLoad(first.port, '/a.iso', {concurrency: 4})
    const second = await mb(['serve', '--root', root, '--listen', '127.0.0.1:0', '--json'], {env})
    expect(second.code, second.stderr).to.equal(1)
    const {error} = second.json()
    expect(error.code).to.equal('STORE_SERVED')
    expect(error.message).to.include(`The embedded store at ${tdb.dataDir} is already served by process ${pid}`)
    const loaded = await load.stop()
    await first.stop()
    expect(first.child.exitCode, first.output()).to.equal(0)
    expect(loaded.errors, 'requests that failed').to.deep.equal([])
    expect(Object.keys(loaded.statuses)).to.deep.equal(['302'])
    expect(first.output()).not.to.include('these counts are lost')
    const stats = await mb(['stats', '--by', 'file', '--json'], {env})
    expect(stats.code, stats.stderr).to.equal(0)
    expect(stats.json().total.downloads).to.equal(loaded.statuses[302])
    expect(loaded.statuses[302]).to.be.greaterThan(0)
  })

  it('a socket file left by a server that died, beside a holder that shares nothing, is no second server: DB_BUSY', async () => {
    const holder = await tdb.open()
    const socket = join(tdb.dataDir!, '.s.PGSQL.5432')
    writeFileSync(socket, '')
    try {
      const started = await mb(['serve', '--root', root, '--listen', '127.0.0.1:0', '--json'], {env: {...tdb.env, MB_DATABASE_URL: undefined}})
      expect(started.code, started.stderr).to.equal(1)
      const {error} = started.json()
      expect(error.code).to.equal('DB_BUSY')
      expect(error.message).to.include(`held by process ${process.pid}, and its shared socket does not answer`)
    } finally {
      rmSync(socket, {force: true})
      await holder.close()
    }
  })
})
