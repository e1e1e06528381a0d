import {expect} from 'chai'
import {sql} from 'kysely'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {mb} from '../helpers/cli.js'

describe(`database (${backend})`, () => {
  let tdb: TestDatabase
  before(async () => {
    tdb = await createTestDatabase()
  })
  after(async () => tdb?.drop())

  it('reports an up-to-date schema with db status --json', async () => {
    const result = await mb(['db', 'status', '--json'], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    const status = result.json()
    expect(status.kind).to.equal(backend)
    expect(status.current).to.equal(true)
    expect(status.migrations.map((m: {name: string}) => m.name)).to.include('0001_init')
  })

  it('round-trips bigint sizes as numbers and arrays as arrays', async () => {
    const database = await tdb.open()
    try {
      await database.db.insertInto('file').values({path: 'big.iso', size: 5_000_000_000, mtime: 1_700_000_000, mirrors: [3, 1]}).execute()
      const row = await database.db.selectFrom('file').selectAll().where('path', '=', 'big.iso').executeTakeFirstOrThrow()
      expect(row.size).to.equal(5_000_000_000)
      expect(row.mtime).to.equal(1_700_000_000)
      expect(row.mirrors).to.deep.equal([3, 1])
    } finally {
      await database.close()
    }
  })

  it('leaves free space in stats_daily pages for HOT updates of the counts (fillfactor 70)', async () => {
    const database = await tdb.open()
    try {
      const {rows} = await sql<{reloptions: string[] | string | null}>`SELECT reloptions FROM pg_class WHERE relname = 'stats_daily'`.execute(database.db)
      const options = rows[0].reloptions
      expect(Array.isArray(options) ? options : String(options).replace(/[{}]/g, '').split(',')).to.deep.equal(['fillfactor=70'])
    } finally {
      await database.close()
    }
  })

  it('exits 2 with a JSON error on an unknown flag', async () => {
    const result = await mb(['db', 'status', '--json', '--bogus'], {env: tdb.env})
    expect(result.code).to.equal(2)
    expect(result.json().error.code).to.equal('USAGE')
  })
})

describe('database errors', () => {
  it('refuses an unreachable PostgreSQL with a clear message and exit 1', async () => {
    const result = await mb(['db', 'status'], {env: {MB_DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none', MB_DATA_DIR: undefined}})
    expect(result.code).to.equal(1)
    expect(result.stderr).to.match(/Cannot connect to PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none/)
    expect(result.stderr).not.to.contain('secret')
  })
})

// Only the embedded store has a single-process lock, so this suite exists on PGlite runs only.
if (backend === 'pglite') describe('embedded store shared by a running process', function () {
  let tdb: TestDatabase
  before(async function () {
    tdb = await createTestDatabase()
  })
  after(async () => tdb?.drop())

  it('lets another mb process read and write through the holder\'s socket', async () => {
    const holder = await tdb.open()
    try {
      await holder.share()
      const added = await mb(['mirror', 'add', 'shared.example.org', '--http-url', 'http://shared.example.org/pub/', '--country', 'de', '--json'], {env: tdb.env})
      expect(added.code, added.stderr).to.equal(0)
      const status = await mb(['db', 'status', '--json'], {env: tdb.env})
      expect(status.json().database).to.contain('shared by process')
      const row = await holder.db.selectFrom('mirror').select(['identifier', 'country', 'continent']).where('identifier', '=', 'shared.example.org').executeTakeFirst()
      expect(row).to.deep.equal({identifier: 'shared.example.org', country: 'DE', continent: 'EU'})
    } finally {
      await holder.close()
    }
  })
})
