// @store-independent: the creation of an embedded store, whatever store the pass names
/**
 * A new embedded store is created in a child process (`src/lib/db/store-create.ts`) that exits
 * once the store is migrated (issue 46, item 4: the memory PGlite's creation takes goes with
 * it). Checked here: the store that child makes is the one `hostPglite` then serves, from the
 * sources (the child through tsx) and from the build (`mb serve`); and a creation that fails
 * reports the child's error with exit 1 and leaves no process behind.
 */
import {expect} from 'chai'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {storeExists} from '../../src/lib/db/data-dir.js'
import {hostPglite} from '../../src/lib/db/store-host.js'
import {mb} from '../helpers/cli.js'

const NO_STORE = {MB_DATABASE_URL: undefined, MB_DATA_DIR: undefined, XDG_DATA_HOME: undefined, MB_CONFIG: 'none'}

describe('embedded store: creation in a child process', function () {
  this.timeout(120_000)
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-store-create-'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('creates and migrates the store that this process then hosts and queries', async () => {
    const store = join(dir, 'store')
    const database = await hostPglite(store, {lockWaitSeconds: 5, create: true, quiet: true}, 'auto')
    try {
      expect(storeExists(store)).to.equal(true)
      const {rows} = await sql<{n: number}>`select count(*)::int as n from mirror`.execute(database.db)
      expect(rows[0].n).to.equal(0)
    } finally {
      await database.close()
    }
  })

  it('reports a creation that fails with its cause and exit 1, not a crash', async () => {
    writeFileSync(join(dir, 'file'), 'not a directory\n')
    const root = mkdtempSync(join(dir, 'root-'))
    const result = await mb(['serve', '--listen', '127.0.0.1:0', '--root', root], {env: {...NO_STORE, MB_DATA_DIR: join(dir, 'file', 'store')}, timeoutMs: 60_000})
    expect(result.code, result.stderr).to.equal(1)
    expect(result.stderr).to.match(/ENOTDIR: not a directory, mkdir '.*file\/store'/)
    expect(result.stderr).to.not.match(/TypeError/)
  })
})
