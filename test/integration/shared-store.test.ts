/**
 * The embedded store shared through its socket (src/lib/db/session-server.ts), with real pg
 * clients: a client has the session for a whole message group and a whole transaction, nothing
 * of anybody else's runs inside it, a client that leaves mid-transaction is rolled back, and
 * NOTIFY reaches the clients that LISTEN. PGlite-specific: skipped when MB_TEST_DATABASE_URL is
 * set (PostgreSQL has real sessions).
 */
import {connect} from 'node:net'
import {expect} from 'chai'
import {sql} from 'kysely'
import pg from 'pg'
import {type Database, openDatabase} from '../../src/lib/db/index.js'
import {BackendScanner} from '../../src/lib/db/session-server.js'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, seedOneMirror, type TestDatabase} from '../helpers/db.js'
import {startServe} from '../helpers/serve-process.js'

function message(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5)
  head[0] = type.charCodeAt(0)
  head.writeInt32BE(4 + body.length, 1)
  return Buffer.concat([head, body])
}

describe('backend message scanner', () => {
  it('finds the last ReadyForQuery status and whole notifications, however the output is split', () => {
    const notification = message('A', Buffer.concat([Buffer.from([0, 0, 0, 7]), Buffer.from('mb_change\0file\0')]))
    const stream = Buffer.concat([message('D', Buffer.alloc(300, 1)), message('Z', Buffer.from('T')), notification, message('C', Buffer.from('COMMIT\0')), message('Z', Buffer.from('I'))])
    for (const size of [1, 2, 5, 7, 64, stream.length]) {
      const scanner = new BackendScanner()
      for (let i = 0; i < stream.length; i += size) scanner.feed(stream.subarray(i, i + size))
      expect(scanner.ready, `chunks of ${size}`).to.equal('I')
      expect(scanner.notifications.map((n) => n.toString('hex'))).to.deep.equal([notification.toString('hex')])
    }
  })
})

// The embedded store's own behaviour: registered in the PGlite pass only, as db.test.ts does.
const suite = (backend === 'pglite' ? describe : () => undefined) as Mocha.SuiteFunction
suite('embedded store shared through its socket (PGlite pass only)', function () {
  this.timeout(120_000)
  let tdb: TestDatabase
  let database: Database
  const clients: pg.Client[] = []
  const client = async () => {
    const c = new pg.Client({host: tdb.dataDir, port: 5432, user: 'postgres', database: 'postgres'})
    c.on('error', () => {})
    await c.connect()
    clients.push(c)
    return c
  }
  before(async () => {
    tdb = await createTestDatabase()
    database = await openDatabase({dataDir: tdb.dataDir, share: true})
  })
  after(async () => {
    for (const c of clients) await c.end().catch(() => {})
    await database?.close()
    await tdb?.drop()
  })

  it('serves the hosting process through the socket too', () => {
    expect(database.backend).to.equal('pglite-shared')
    expect(database.location).to.contain(`shared by process ${process.pid}`)
  })

  it('never interleaves the extended-protocol groups of concurrent clients', async () => {
    const all = await Promise.all(Array.from({length: 6}, () => client()))
    const results = await Promise.all(
      all.map(async (c, k) => {
        const out: string[] = []
        for (let i = 0; i < 60; i++) {
          const params = Array.from({length: k + 1}, (_, j) => `${k}.${i}.${j}`)
          const text = `SELECT ${params.map((_, j) => `$${j + 1}::text`).join(" || '|' || ")} AS v`
          out.push((await c.query(text, params)).rows[0].v)
        }
        return out
      }),
    )
    results.forEach((out, k) => {
      expect(out).to.have.length(60)
      expect(out).to.deep.equal(Array.from({length: 60}, (_, i) => Array.from({length: k + 1}, (_, j) => `${k}.${i}.${j}`).join('|')))
    })
  })

  it("runs nobody's statements inside another client's transaction: they wait, and survive its rollback", async () => {
    const a = await client()
    await a.query('BEGIN')
    await a.query("INSERT INTO mirror (identifier, http_url) VALUES ('txn-a.example', 'http://txn-a.example/')")
    let bDone = false
    const b = database.db
      .insertInto('mirror')
      .values({identifier: 'txn-b.example', http_url: 'http://txn-b.example/'})
      .execute()
      .then(() => {
        bDone = true
      })
    await new Promise((r) => setTimeout(r, 300))
    expect(bDone, 'the other insert ran inside the open transaction').to.equal(false)
    await a.query('ROLLBACK')
    await b
    const names = (await database.db.selectFrom('mirror').select('identifier').where('identifier', 'like', 'txn-%').orderBy('identifier').execute()).map((r) => r.identifier)
    expect(names).to.deep.equal(['txn-b.example'])
  })

  it('rolls back the open transaction of a client that disconnects, and carries on', async () => {
    const c = await client()
    await c.query('BEGIN')
    await c.query("INSERT INTO mirror (identifier, http_url) VALUES ('gone.example', 'http://gone.example/')")
    ;(c as unknown as {connection: {stream: {destroy(): void}}}).connection.stream.destroy()
    const rows = await database.db.selectFrom('mirror').select('identifier').where('identifier', '=', 'gone.example').execute()
    expect(rows).to.deep.equal([])
  })

  it('ends the unfinished message group of a client that disconnects after Parse', async () => {
    const socket = connect(`${tdb.dataDir}/.s.PGSQL.5432`)
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    const params = Buffer.from('user\0postgres\0database\0postgres\0\0')
    const startup = Buffer.alloc(8 + params.length)
    startup.writeInt32BE(startup.length, 0)
    startup.writeInt32BE(196_608, 4)
    params.copy(startup, 8)
    socket.write(startup)
    await new Promise((r) => setTimeout(r, 100))
    socket.write(message('P', Buffer.from('\0SELECT $1::int, $2::int\0\0\0')))
    await new Promise((r) => setTimeout(r, 100))
    socket.destroy()
    const [{n}] = (await sql<{n: number}>`SELECT ${7}::int AS n`.execute(database.db)).rows
    expect(n).to.equal(7)
  })

  it('delivers a NOTIFY committed by one client to the others that LISTEN', async () => {
    let notified = 0
    const subscription = await database.listen('mb_change', () => notified++)
    try {
      const other = await client()
      await other.query("INSERT INTO mirror (identifier, http_url) VALUES ('notify.example', 'http://notify.example/')")
      for (let i = 0; i < 100 && notified === 0; i++) await new Promise((r) => setTimeout(r, 20))
      expect(notified).to.be.greaterThan(0)
      // UNLISTEN from one client is answered for that client only: the others still hear.
      const quitter = await client()
      await quitter.query('LISTEN mb_change')
      await quitter.query('UNLISTEN mb_change')
      const seen = notified
      await other.query("UPDATE mirror SET comment = 'x' WHERE identifier = 'notify.example'")
      for (let i = 0; i < 100 && notified === seen; i++) await new Promise((r) => setTimeout(r, 20))
      expect(notified).to.be.greaterThan(seen)
    } finally {
      await subscription.close()
    }
  })
})

suite('mb serve on the embedded store: its own probes, flushes and refreshes through the socket (PGlite pass only)', function () {
  this.timeout(180_000)
  it('probe rounds (which hold a session of their own) run beside refreshes, and a CLI write beside them lands', async () => {
    const tdb = await createTestDatabase()
    const root = mkdtempSync(join(tmpdir(), 'mb-shared-serve-'))
    await seedOneMirror(tdb, {path: 'a.iso', size: 10_000, mtime: 1})
    const serve = await startServe(['--root', root, '--probe-interval', '1', '--stats-flush-interval', '1'], tdb.env)
    try {
      for (let i = 0; i < 100 && (serve.output().match(/probe round done/g) ?? []).length < 3; i++) await new Promise((r) => setTimeout(r, 100))
      expect((serve.output().match(/probe round done/g) ?? []).length).to.be.at.least(3)
      const edited = await mb(['mirror', 'edit', 'm.example', '--comment', 'through the socket', '--json'], {env: tdb.env})
      expect(edited.code, edited.stderr).to.equal(0)
      const shown = await mb(['mirror', 'show', 'm.example', '--json'], {env: tdb.env})
      expect(shown.stdout).to.contain('through the socket')
    } finally {
      await serve.stop()
      rmSync(root, {recursive: true, force: true})
      await tdb.drop()
    }
    expect(serve.output()).not.to.match(/probe round failed|shutdown step failed/)
  })
})
