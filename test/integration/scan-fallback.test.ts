import net from 'node:net'
import {expect} from 'chai'
import type {Database} from '../../src/lib/db/index.js'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {upsertOriginFiles} from '../../src/lib/origin/index.js'
import {scanMirror, scanUrls} from '../../src/lib/scan/scan.js'
import type {Lister, ListingEntry, ListOptions} from '../../src/lib/scan/types.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'

const T = 1_700_000_000

describe('scan orchestration: protocol order, fallback, time budget', function () {
  let tdb: TestDatabase
  let database: Database
  let closedPort: number
  const calls: string[] = []

  const fakeHttp: Lister = {
    protocol: 'http',
    async *list(baseUrl: string, options: ListOptions): AsyncIterable<ListingEntry> {
      calls.push(`http ${baseUrl} ${options.subdir ?? ''}`)
      yield {path: 'a.iso', type: 'file', size: 100, mtime: T - (T % 60), mtimePrecision: 60}
      yield {path: 'b.iso', type: 'file', size: 200, mtime: T - (T % 60), mtimePrecision: 60}
    },
  }
  const hangingFtp: Lister = {
    protocol: 'ftp',
    async *list(baseUrl: string, options: ListOptions): AsyncIterable<ListingEntry> {
      calls.push(`ftp ${baseUrl}`)
      yield {path: 'a.iso', type: 'file', size: 100}
      await new Promise((_resolve, reject) => options.signal?.addEventListener('abort', () => reject(new Error('FTP listing aborted')), {once: true}))
    },
  }

  const listers = {http: fakeHttp, ftp: hangingFtp}

  before(async () => {
    closedPort = await new Promise<number>((resolve) => {
      const s = net.createServer().listen(0, '127.0.0.1', () => {
        const {port} = s.address() as net.AddressInfo
        s.close(() => resolve(port))
      })
    })
  })
  beforeEach(async () => {
    calls.length = 0
    tdb = await createTestDatabase()
    database = await tdb.open()
    await upsertOriginFiles(database.db, [
      {path: 'a.iso', size: 100, mtime: T},
      {path: 'b.iso', size: 200, mtime: T},
    ])
  })
  afterEach(async () => {
    await database.close()
    await tdb.drop()
  })

  async function mirror(values: Record<string, unknown>): Promise<MirrorRow> {
    return database.db
      .insertInto('mirror')
      .values({identifier: 'm1', http_url: 'http://m1.example/pub/', ...values} as any)
      .returningAll()
      .executeTakeFirstOrThrow()
  }

  it('orders rsync, ftp, http by the URLs the mirror has', () => {
    expect(scanUrls({rsync_url: 'rsync://h/m/', ftp_url: 'ftp://h/', http_url: 'http://h/', https_url: null}).map((u) => u.protocol)).to.deep.equal(['rsync', 'ftp', 'http'])
    expect(scanUrls({rsync_url: null, ftp_url: null, http_url: null, https_url: 'https://h/'})).to.deep.equal([{protocol: 'http', url: 'https://h/'}])
  })

  it('falls back from a failing rsync to HTTP and says which protocol was used', async () => {
    const m = await mirror({rsync_url: `rsync://127.0.0.1:${closedPort}/pub/`})
    const result = await scanMirror(database, m, {connectTimeoutSeconds: 5, listers})
    expect(result).to.deep.include({ok: true, protocol: 'http', matched: 2, files: 2})
    expect(result.attempts[0].protocol).to.equal('rsync')
    expect(result.attempts[0].error).to.match(/Connection refused/)
    expect(result.attempts[1]).to.deep.equal({protocol: 'http', url: 'http://m1.example/pub/'})
    const row = await database.db.selectFrom('mirror').selectAll().where('id', '=', m.id).executeTakeFirstOrThrow()
    expect(row.last_scan_protocol).to.equal('http')
    expect(row.last_scan_error).to.equal(null)
  })

  it('a listing that outlives the per-mirror budget fails, records the reason, and keeps the records', async () => {
    const m = await mirror({ftp_url: 'ftp://m1.example/pub/'})
    const first = await scanMirror(database, m, {protocol: 'http', listers})
    expect(first.ok).to.equal(true)
    const result = await scanMirror(database, m, {protocol: 'ftp', timeoutSeconds: 1, listers})
    expect(result.ok).to.equal(false)
    expect(result.error).to.match(/^ftp: FTP listing aborted \(the per-mirror time budget of 1 s ran out\)/)
    const files = await database.db.selectFrom('file').select(['path', 'mirrors']).orderBy('path').execute()
    expect(files.map((f) => f.mirrors)).to.deep.equal([[m.id], [m.id]])
    const row = await database.db.selectFrom('mirror').selectAll().where('id', '=', m.id).executeTakeFirstOrThrow()
    expect(row.last_scan_error).to.match(/time budget/)
    expect(row.last_scan_protocol).to.equal('ftp')
    expect(row.last_scan_matched).to.equal(2)
  })

  it('passes --dir to the lister relative to the mirror base_path', async () => {
    const m = await mirror({base_path: 'pub'})
    await scanMirror(database, m, {subdir: 'pub/15.6', minRatio: 0, listers})
    expect(calls).to.deep.equal(['http http://m1.example/pub/ 15.6'])
  })

  it('refuses a protocol the mirror has no URL for (usage error)', async () => {
    const m = await mirror({})
    let error: any
    try {
      await scanMirror(database, m, {protocol: 'rsync', listers})
    } catch (e) {
      error = e
    }
    expect(error.exitCode).to.equal(2)
    expect(error.message).to.match(/has no rsync URL to scan/)
  })
})
