import {createServer} from 'node:http'
import type {AddressInfo} from 'node:net'
import {expect} from 'chai'
import {sql} from 'kysely'
import pg from 'pg'
import {type Database, openDatabase} from '../../src/lib/db/index.js'
import {PROBE_LOCK, scanLock} from '../../src/lib/db/named-locks.js'
import {tableStats} from '../../src/lib/db/table-stats.js'
import {upsertOriginFiles} from '../../src/lib/origin/index.js'
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
      await database.db
        .insertInto('file')
        .values({path: 'big.iso', size: 5_000_000_000, mtime: 1_700_000_000, mirrors: [3, 1]})
        .execute()
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

  it('db stats: every table with rows, sizes, dead rows and last vacuum/analyze; --exact counts; --json', async () => {
    const database = await tdb.open()
    let files: number
    try {
      await database.db
        .insertInto('file')
        .values([0, 1, 2].map((i) => ({path: `stats/${i}.iso`, size: 1000, mtime: 1_700_000_000, mirrors: []})))
        .execute()
      await database.db.deleteFrom('file').where('path', '=', 'stats/2.iso').execute()
      await sql`ANALYZE file`.execute(database.db)
      files = Number(
        (
          await database.db
            .selectFrom('file')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    } finally {
      await database.close()
    }
    const exact = await mb(['db', 'stats', '--exact', '--json'], {env: tdb.env})
    expect(exact.code, exact.stderr).to.equal(0)
    const stats = exact.json()
    expect(stats.kind).to.equal(backend)
    const tables = stats.tables as Array<Record<string, unknown>>
    expect(tables.map((t) => t.table)).to.include.members(['file', 'mirror', 'stats_daily', 'kysely_migration'])
    const file = tables.find((t) => t.table === 'file')!
    expect(file).to.include({rows_exact: true, rows: files})
    expect(file.total_bytes)
      .to.be.a('number')
      .and.at.least(file.table_bytes as number)
    // The embedded store keeps PostgreSQL's cumulative statistics only while a process holds it.
    if (backend === 'postgres') expect(file.last_analyze).to.match(/^\d{4}-\d\d-\d\dT/)
    else expect(file.last_analyze === null || /^\d{4}-\d\d-\d\dT/.test(String(file.last_analyze))).to.equal(true)
    for (const t of tables) expect(Object.keys(t).sort()).to.deep.equal(['dead_rows', 'last_analyze', 'last_vacuum', 'rows', 'rows_exact', 'table', 'table_bytes', 'total_bytes'])
    const human = await mb(['db', 'stats'], {env: tdb.env})
    expect(human.code, human.stderr).to.equal(0)
    expect(human.stdout).to.match(/^table\trows \(est\.\)\tdead rows\tsize\twith indexes\tlast vacuum \(UTC\)\tlast analyze \(UTC\)$/m)
    expect(human.stdout).to.match(/^file\t\d+\t\d+\t/m)
  })

  it('db stats: a table never analyzed shows its rows, counted when small, else guessed by the planner', async () => {
    const fresh = await createTestDatabase()
    try {
      const database = await fresh.open()
      try {
        await database.db
          .insertInto('file')
          .values([0, 1, 2, 3].map((i) => ({path: `fresh/${i}.iso`, size: 1000, mtime: 1_700_000_000, mirrors: []})))
          .execute()
        // Forced past the count: the planner's guess from the table's pages, never 0.
        const guessed = (await tableStats(database.db, false, 0)).find((t) => t.table === 'file')!
        expect(guessed.rows_exact).to.equal(false)
        expect(guessed.rows).to.be.above(0)
      } finally {
        await database.close()
      }
      const result = await mb(['db', 'stats', '--json'], {env: fresh.env})
      expect(result.code, result.stderr).to.equal(0)
      const file = (result.json().tables as Array<Record<string, unknown>>).find((t) => t.table === 'file')!
      expect(file.rows).to.equal(4)
      // The embedded store lost n_live_tup with the process that inserted, so it counted.
      if (backend !== 'postgres') expect(file.rows_exact).to.equal(true)
    } finally {
      await fresh.drop()
    }
  })

  it('exits 2 with a JSON error on an unknown flag', async () => {
    const result = await mb(['db', 'status', '--json', '--bogus'], {env: tdb.env})
    expect(result.code).to.equal(2)
    expect(result.json().error.code).to.equal('USAGE')
  })
})

describe(`store capabilities (${backend})`, () => {
  let tdb: TestDatabase
  let database: Database
  before(async () => {
    tdb = await createTestDatabase()
    database = await tdb.open()
  })
  after(async () => {
    await database?.close()
    await tdb?.drop()
  })

  it('names its backend', () => {
    expect(database.backend).to.equal(backend)
  })

  it('refuses a named lock another session holds, without waiting, and frees it afterwards', async () => {
    const busy = () => 'busy'
    const inner = await database.withLock(scanLock(7), () => database.withLock(scanLock(7), async () => 'ran', busy), busy)
    expect(inner).to.equal('busy')
    // Other names are independent; a held lock is free again once its holder is done.
    expect(await database.withLock(scanLock(7), () => database.withLock(scanLock(8), async () => 'ran', busy), busy)).to.equal('ran')
    expect(await database.withLock(scanLock(7), async () => 'ran', busy)).to.equal('ran')
    await database.withLock(
      PROBE_LOCK,
      async () => expect(await database.session((s) => s.withLock(PROBE_LOCK, async () => 'ran', busy))).to.equal('busy'),
      () => expect.fail('the probe lock was not free'),
    )
    // A holder that fails releases the lock too; onBusy's error becomes the caller's.
    let error: unknown
    await database
      .withLock(
        PROBE_LOCK,
        () =>
          database.withLock(
            PROBE_LOCK,
            async () => 'ran',
            () => Promise.reject(new Error('busy')),
          ),
        busy,
      )
      .catch((e) => (error = e))
    expect((error as Error).message).to.equal('busy')
    expect(await database.withLock(PROBE_LOCK, async () => 'ran', busy)).to.equal('ran')
  })

  it('keeps temp tables for the whole session and rolls a failed transaction back', async () => {
    const count = await database.session(async (session) => {
      await sql`CREATE TEMP TABLE mb_test_session (n int)`.execute(session.db)
      await session.transaction((trx) => sql`INSERT INTO mb_test_session VALUES (1)`.execute(trx))
      await session
        .transaction(async (trx) => {
          await sql`INSERT INTO mb_test_session VALUES (2)`.execute(trx)
          throw new Error('rolled back')
        })
        .catch(() => {})
      const {rows} = await sql<{n: number}>`SELECT count(*)::int AS n FROM mb_test_session`.execute(session.db)
      await sql`DROP TABLE mb_test_session`.execute(session.db)
      return rows[0].n
    })
    expect(count).to.equal(1)
  })

  it('reads one snapshot, also from parallel tasks, in order', async () => {
    await database.db
      .insertInto('file')
      .values([
        {path: 'one', size: 1, mtime: 1},
        {path: 'two', size: 2, mtime: 2},
      ])
      .execute()
    const counts = await database.readSnapshot(async (view) => {
      const [[before]] = await view.query('SELECT count(*)::int FROM file')
      // A commit after the view began stays invisible to it (on PostgreSQL through another connection).
      if (backend === 'postgres') {
        const other = new pg.Client({connectionString: tdb.url})
        await other.connect()
        await other.query(`INSERT INTO file (path, size, mtime) VALUES ('three', 3, 3)`)
        await other.end()
      }
      const halves = await view.parallel([async (v) => (await v.query('SELECT count(*)::int, min(path) FROM file'))[0], async (v) => (await v.query('SELECT $1::int', [42]))[0]])
      return [before, ...halves]
    })
    expect(counts).to.deep.equal([2, [2, 'one'], [42]])
  })

  it('calls a listener on NOTIFY mb_change, and no more after close', async () => {
    let notified = 0
    const subscription = await database.listen('mb_change', () => notified++)
    try {
      await database.db
        .insertInto('mirror')
        .values({identifier: 'notify.example', http_url: 'http://notify.example/'} as any)
        .execute()
      for (let i = 0; i < 100 && notified === 0; i++) await new Promise((r) => setTimeout(r, 20))
      expect(notified).to.be.greaterThan(0)
      await subscription.renew() // connected already: nothing to do
    } finally {
      await subscription.close()
    }
    const seen = notified
    await database.db.deleteFrom('mirror').where('identifier', '=', 'notify.example').execute()
    await new Promise((r) => setTimeout(r, 200))
    expect(notified).to.equal(seen)
  })
  if (backend === 'postgres') {
    it('renews a dropped LISTEN connection, at most once per 2 s', async () => {
      let notified = 0
      const subscription = await database.listen('mb_change', () => notified++)
      const notify = async () => {
        notified = 0
        await sql`SELECT pg_notify('mb_change', 'test')`.execute(database.db)
        for (let i = 0; i < 100 && notified === 0; i++) await new Promise((r) => setTimeout(r, 20))
        return notified > 0
      }
      try {
        expect(await notify()).to.equal(true)
        await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN%'`.execute(database.db)
        await new Promise((r) => setTimeout(r, 200))
        await subscription.renew() // too soon after the drop: no attempt yet
        expect(await notify()).to.equal(false)
        await new Promise((r) => setTimeout(r, 2000))
        await subscription.renew()
        expect(await notify()).to.equal(true)
      } finally {
        await subscription.close()
      }
    })
  }
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
if (backend === 'pglite')
  describe('embedded store shared by a running process', function () {
    let tdb: TestDatabase
    before(async function () {
      tdb = await createTestDatabase()
    })
    after(async () => tdb?.drop())

    it("lets another mb process read and write through the holder's socket", async () => {
      const holder = await openDatabase({dataDir: tdb.dataDir, share: true})
      try {
        const added = await mb(['mirror', 'add', 'shared.example.org', '--http-url', 'http://shared.example.org/pub/', '--country', 'de', '--json'], {env: tdb.env})
        expect(added.code, added.stderr).to.equal(0)
        const status = await mb(['db', 'status', '--json'], {env: tdb.env})
        expect(status.json().database).to.contain('shared by process')
        expect(status.json().kind).to.equal('pglite-shared')
        const row = await holder.db.selectFrom('mirror').select(['identifier', 'country', 'continent']).where('identifier', '=', 'shared.example.org').executeTakeFirst()
        expect(row).to.deep.equal({identifier: 'shared.example.org', country: 'DE', continent: 'EU'})
      } finally {
        await holder.close()
      }
    })

    it("scans through the holder's socket: session, lock and temp tables on the shared store", async () => {
      const listing = JSON.stringify([{name: 'a.iso', type: 'file', mtime: 'Fri, 02 Jan 2026 03:04:05 GMT', size: 100}])
      const server = createServer((_req, res) => res.writeHead(200, {'content-type': 'application/json'}).end(listing))
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      const holder = await openDatabase({dataDir: tdb.dataDir, share: true})
      try {
        await upsertOriginFiles(holder.db, [{path: 'a.iso', size: 100, mtime: Date.UTC(2026, 0, 2, 3, 4, 5) / 1000}])
        const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
        expect((await mb(['mirror', 'add', '--no-locate', 'scan.example.org', '--http-url', url, '--json'], {env: tdb.env})).code).to.equal(0)
        const scanned = await mb(['scan', 'scan.example.org', '--json'], {env: tdb.env})
        expect(scanned.code, scanned.stderr + scanned.stdout).to.equal(0)
        const row = await holder.db.selectFrom('file').select('mirrors').where('path', '=', 'a.iso').executeTakeFirstOrThrow()
        expect(row.mirrors).to.have.length(1)
      } finally {
        await holder.close()
        server.close()
      }
    })
  })
