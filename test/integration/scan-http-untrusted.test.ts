/**
 * The HTTP lister against index pages that lie: a close-delimited page cut short (the real
 * nginx, lighttpd and Apache fixtures, 70% of each), a page shorter than its Content-Length,
 * and a page larger than `maxIndexBytes`. Each fails the listing with a clear reason, and a
 * scan that gets one keeps the mirror's earlier data (both stores).
 */
import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import net from 'node:net'
import {join} from 'node:path'
import type {Database} from '../../src/lib/db/index.js'
import {upsertOriginFiles} from '../../src/lib/origin/index.js'
import {createHttpLister} from '../../src/lib/scan/http.js'
import {scanMirror} from '../../src/lib/scan/scan.js'
import type {ListOptions} from '../../src/lib/scan/types.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {collectListing, listingFailure} from '../helpers/listing.js'

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'listings')
const T = 1_767_323_040 // 02-Jan-2026 03:04 UTC

/** How the test server answers the base index. */
interface Page {
  body: Buffer
  contentType: string
  /** Bytes of `body` written before the connection is closed (default all). */
  cutAt?: number
  /** Send Content-Length: the full body's length (else the body is close-delimited). */
  contentLength?: boolean
  /** Send the body as one chunk of Transfer-Encoding: chunked (cut with `cutAt`, the last chunk never comes). */
  chunked?: boolean
  /** Stream this many bytes of filler after the body's start instead (an oversized page). */
  endless?: boolean
}

/**
 * A raw HTTP/1.1 server (node:net, so a body without Content-Length is truly close-delimited,
 * not chunked) answering `/` with `page` and 404 elsewhere; `sent` counts body bytes written.
 */
async function startIndexServer(): Promise<{url: string; page: {current: Page}; sent: {bytes: number}; close: () => Promise<void>}> {
  const page = {current: {body: Buffer.alloc(0), contentType: 'text/html'} as Page}
  const sent = {bytes: 0}
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    socket.on('data', (data) => {
      if (head.includes('\r\n\r\n')) return
      head += data.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      const target = head.split(' ')[1]
      if (target !== '/') return void socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
      answer(socket, page.current, sent)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const {port} = server.address() as net.AddressInfo
  return {
    url: `http://127.0.0.1:${port}/`,
    page,
    sent,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** Writes `page` as a 200 answer on `socket`, then closes it. */
function answer(socket: net.Socket, p: Page, sent: {bytes: number}): void {
  const length = p.contentLength ? `Content-Length: ${p.body.length}\r\n` : p.chunked ? 'Transfer-Encoding: chunked\r\n' : ''
  socket.write(`HTTP/1.1 200 OK\r\nContent-Type: ${p.contentType}\r\n${length}Connection: close\r\n\r\n`)
  if (p.endless) {
    const filler = Buffer.alloc(64 * 1024, ' ')
    const pump = () => {
      while (!socket.destroyed && sent.bytes < 1024 * 1024 * 1024) {
        sent.bytes += filler.length
        if (!socket.write(filler)) return void socket.once('drain', pump)
      }
    }
    socket.write(p.body)
    pump()
    return
  }
  const part = p.body.subarray(0, p.cutAt ?? p.body.length)
  sent.bytes += part.length
  if (p.chunked) return void socket.end(Buffer.concat([Buffer.from(`${p.body.length.toString(16)}\r\n`), part]))
  socket.end(part)
}

/** An nginx-style HTML autoindex of `count` files named f0000.bin… of 100 bytes each. */
function nginxIndex(count: number): Buffer {
  const lines = Array.from(
    {length: count},
    (_, i) => `<a href="f${String(i).padStart(4, '0')}.bin">f${String(i).padStart(4, '0')}.bin</a>                                          02-Jan-2026 03:04                 100`,
  )
  return Buffer.from(`<html>\r\n<head><title>Index of /</title></head>\r\n<body>\r\n<h1>Index of /</h1><hr><pre><a href="../">../</a>\r\n${lines.join('\r\n')}\r\n</pre><hr></body>\r\n</html>\r\n`)
}

const list = (url: string, listOptions: ListOptions = {}) => collectListing((onWarning) => createHttpLister({onWarning}), url, listOptions)

describe('HTTP lister: truncated and oversized index pages', function () {
  let server: Awaited<ReturnType<typeof startIndexServer>>
  before(async () => {
    server = await startIndexServer()
  })
  after(async () => {
    await server.close()
  })
  beforeEach(() => {
    server.sent.bytes = 0
  })

  const fixtures: [string, string][] = [
    ['http-nginx-root.html', 'text/html'],
    ['http-lighttpd-root.html', 'text/html; charset=utf-8'],
    ['http-apache-table.html', 'text/html;charset=UTF-8'],
    ['http-apache-pre.html', 'text/html'],
    ['http-styled-index.html', 'text/html'],
    ['http-nginx-root.json', 'application/json'],
  ]
  for (const [name, contentType] of fixtures) {
    it(`${name}: the whole close-delimited page lists; 70% of it fails as ended early`, async () => {
      const body = readFileSync(join(FIXTURES, name))
      server.page.current = {body, contentType}
      await list(server.url)
      server.page.current = {body, contentType, cutAt: Math.floor(body.length * 0.7)}
      const error = await listingFailure(list(server.url))
      expect(error.code).to.equal('SCAN_TRUNCATED')
      const why = name.endsWith('.json') ? /not complete, valid JSON/ : /no closing <\/html>/
      expect(error.message).to.match(new RegExp(`^the index page of ${server.url} ended early \\(`))
      expect(error.message).to.match(why)
      expect(error.message).to.match(/the connection was cut; nothing was changed$/)
    })
  }

  it('an XML index without its closing </list> fails as ended early', async () => {
    const body = Buffer.from('<?xml version="1.0"?>\r\n<list>\r\n<file mtime="2026-01-02T03:04:05Z" size="1">a</file>\r\n<file mtime="2026-01-02T03:04:05Z" size="2">b</file>\r\n</list>\r\n')
    server.page.current = {body, contentType: 'text/xml'}
    expect((await list(server.url)).entries.map((e) => e.path)).to.deep.equal(['a', 'b'])
    server.page.current = {body, contentType: 'text/xml', cutAt: body.length - 10}
    expect((await listingFailure(list(server.url))).message).to.match(/ended early \(no closing <\/list>\)/)
  })

  it('a page shorter than its Content-Length fails with a clear reason', async () => {
    const body = nginxIndex(200)
    server.page.current = {body, contentType: 'text/html', contentLength: true, cutAt: Math.floor(body.length * 0.7)}
    const error = await listingFailure(list(server.url))
    expect(error.code).to.equal('SCAN_TRUNCATED')
    expect(error.message).to.match(new RegExp(`^the index page of ${server.url} ended early \\(.*Content-Length.*\\): the connection was cut; nothing was changed$`))
  })

  it('a chunked page cut before its last chunk fails with a clear reason', async () => {
    const body = nginxIndex(200)
    server.page.current = {body, contentType: 'text/html', chunked: true, cutAt: Math.floor(body.length * 0.7)}
    const error = await listingFailure(list(server.url))
    expect(error.code).to.equal('SCAN_TRUNCATED')
    expect(error.message).to.equal(`the index page of ${server.url} ended early (the chunked body lacks its last chunk): the connection was cut; nothing was changed`)
  })

  it('a page larger than maxIndexBytes fails without reading much past the cap', async () => {
    server.page.current = {body: Buffer.from('<html><body><pre>'), contentType: 'text/html', endless: true}
    const error = await listingFailure(list(server.url, {maxIndexBytes: 1024 * 1024}))
    expect(error.code).to.equal('SCAN_INDEX_TOO_LARGE')
    expect(error.message).to.equal(
      `the index page of ${server.url} is larger than scan.max_index_bytes (1048576 bytes; the page is larger); nothing was changed. Raise scan.max_index_bytes if the page is genuine.`,
    )
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(server.sent.bytes, 'bytes the server got to write').to.be.below(32 * 1024 * 1024)
  })

  it('a page whose Content-Length exceeds maxIndexBytes fails before its body is read', async () => {
    const body = nginxIndex(20_000)
    server.page.current = {body, contentType: 'text/html', contentLength: true}
    const error = await listingFailure(list(server.url, {maxIndexBytes: 64 * 1024}))
    expect(error.code).to.equal('SCAN_INDEX_TOO_LARGE')
    expect(error.message).to.include(`its Content-Length is ${body.length} bytes`)
  })
})

describe('scan: a truncated index keeps the mirror’s earlier data', function () {
  let tdb: TestDatabase
  let database: Database
  let server: Awaited<ReturnType<typeof startIndexServer>>
  const COUNT = 500

  before(async () => {
    server = await startIndexServer()
  })
  after(async () => {
    await server.close()
  })
  beforeEach(async () => {
    tdb = await createTestDatabase()
    database = await tdb.open()
    await upsertOriginFiles(
      database.db,
      Array.from({length: COUNT}, (_, i) => ({path: `f${String(i).padStart(4, '0')}.bin`, size: 100, mtime: T})),
    )
  })
  afterEach(async () => {
    await database.close()
    await tdb.drop()
  })

  const held = async (id: number) => (await database.db.selectFrom('file').select('mirrors').execute()).filter((r) => r.mirrors.includes(id)).length

  for (const [what, page] of [
    ['close-delimited, cut at 70%', {cutAt: 0.7}],
    ['shorter than its Content-Length', {cutAt: 0.7, contentLength: true}],
    ['larger than scan.max_index_bytes', {}],
  ] as const) {
    it(`a page ${what}: the scan fails with the reason and the mirror still holds every file`, async () => {
      const m = await database.db
        .insertInto('mirror')
        .values({identifier: 'm1', http_url: server.url} as any)
        .returningAll()
        .executeTakeFirstOrThrow()
      const body = nginxIndex(COUNT)
      server.page.current = {body, contentType: 'text/html'}
      expect(await scanMirror(database, m, {protocol: 'http'})).to.deep.include({ok: true, matched: COUNT})
      expect(await held(m.id)).to.equal(COUNT)

      const cut = 'cutAt' in page ? Math.floor(body.length * page.cutAt) : undefined
      server.page.current = {body, contentType: 'text/html', cutAt: cut, contentLength: 'contentLength' in page}
      const result = await scanMirror(database, m, {protocol: 'http', maxIndexBytes: 'cutAt' in page ? undefined : 16 * 1024})
      expect(result.ok).to.equal(false)
      expect(result.error).to.match('cutAt' in page ? /ended early .*: the connection was cut; nothing was changed/ : /is larger than scan\.max_index_bytes \(16384 bytes/)
      expect(await held(m.id)).to.equal(COUNT)
    })
  }
})
