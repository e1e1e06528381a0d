// @store-independent: HTTP methods and header values
/**
 * `mb serve` (a child process, on the configured backend) answers hostile requests below 500
 * and never drops them: methods it does not serve (CONNECT included) get 405 or 501. It
 * never writes a header value node would refuse, whatever the client sends or the registry
 * holds: a hostile `Host` (bytes
 * beyond ASCII, link syntax, control characters), a non-ASCII file name and a mirror row whose
 * name and URL break the registry's rules (written in SQL) all get an answer below 500 with printable
 * ASCII in every header mb builds (`Location`, `Link`, `X-MB-Mirror`, `Content-Disposition`).
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const NAME = 'dïr/ñame€.iso'
const BAD_MIRROR = 'mïrror€\u0001'
/** A base URL that breaks the registry's rules too (written in SQL). */
const BAD_URL = 'http://m.example/€\u0001/'

interface Answer {
  status: number
  /** [name, value] pairs, values as the bytes sent (latin1). */
  headers: Array<[string, string]>
}

/** Sends `head` (a request line and header lines, without the blank line) as raw bytes; parses the answer's head. */
function rawRequest(port: number, head: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (c) => chunks.push(c))
    socket.on('error', reject)
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')))
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1')
      const lines = text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n')
      const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(lines[0])?.[1] ?? 0)
      resolve({status, headers: lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()])})
    })
    socket.end(Buffer.concat([head, Buffer.from('\r\nConnection: close\r\n\r\n')]))
  })
}

function get(port: number, target: string, host: Buffer | string): Promise<Answer> {
  return rawRequest(port, Buffer.concat([Buffer.from(`GET ${target} HTTP/1.1\r\nHost: `, 'latin1'), Buffer.from(host)]))
}

function values(answer: Answer, name: string): string[] {
  return answer.headers.filter(([n]) => n === name).map(([, v]) => v)
}

/** Every header mb builds from stored or client data holds printable ASCII only. */
function expectSafeHeaders(answer: Answer): void {
  expect(answer.status, JSON.stringify(answer)).to.be.within(200, 499)
  for (const [name, value] of answer.headers) if (['location', 'link', 'x-mb-mirror', 'content-disposition'].includes(name)) expect(value, `${name}: ${value}`).to.match(/^[\x20-\x7e]*$/)
}

describe(`mb serve: hostile methods and header values (${backend})`, function () {
  let database: TestDatabase
  let serve: ServeProcess
  let root: string

  before(async () => {
    database = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-serve-headers-'))
    mkdirSync(join(root, 'dïr'))
    writeFileSync(join(root, NAME), 'x'.repeat(5000))
    const db = await database.open()
    try {
      await db.db.insertInto('mirror').values({id: 1, identifier: BAD_MIRROR, http_url: BAD_URL}).execute()
      await db.db
        .insertInto('file')
        .values({path: NAME, size: 5000, mtime: Math.floor(statSync(join(root, NAME)).mtimeMs / 1000), mirrors: [1]})
        .execute()
    } finally {
      await db.close()
    }
    // Dotfiles on disk, never indexed (index.exclude): the server neither delivers nor lists them.
    mkdirSync(join(root, '.git'))
    writeFileSync(join(root, '.git', 'config'), '[remote "origin"]\n')
    writeFileSync(join(root, '.htpasswd'), 'admin:x\n')
    writeFileSync(join(root, 'dïr', '.ñame€.iso.Xa81Qz'), 'partial')
    writeFileSync(join(root, '.treeinfo'), '[general]\n')
    serve = await startServe(['--root', root], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const target = `/${encodeURI(NAME)}`

  it('redirects to a mirror whose stored name and URL are not valid header values, percent-encoding them', async () => {
    const answer = await get(serve.port, target, 'mb.example')
    expectSafeHeaders(answer)
    expect(answer.status).to.equal(302)
    expect(values(answer, 'x-mb-mirror')).to.deep.equal(['m%C3%AFrror%E2%82%AC%01'])
    expect(values(answer, 'location')).to.deep.equal(['http://m.example/%E2%82%AC%01/d%C3%AFr/%C3%B1ame%E2%82%AC.iso'])
    expect(values(answer, 'link').join('\n')).to.contain('<http://mb.example/d%C3%AFr/%C3%B1ame%E2%82%AC.iso.meta4>; rel=describedby')
  })

  it('does not echo a Host header that is not a plain host[:port] into Link (falls back to the listen address)', async () => {
    for (const host of [Buffer.from('mïrror€.example', 'utf8'), 'a>; rel=x, <http://evil.example/', 'h\u00ff:80', 'h/../x']) {
      const answer = await get(serve.port, target, host)
      expectSafeHeaders(answer)
      expect(answer.status).to.equal(302)
      const links = values(answer, 'link').filter((l) => l.includes('rel=describedby'))
      expect(links, String(host)).to.deep.equal([`<http://127.0.0.1:${serve.port}/d%C3%AFr/%C3%B1ame%E2%82%AC.iso.meta4>; rel=describedby; type="application/metalink4+xml"`])
    }
  })

  it('answers a Host with control characters below 500', async () => {
    for (const host of ['a\u0001b', 'a\u007fb', 'a\u0000b']) expectSafeHeaders(await get(serve.port, target, host))
  })

  it('sends a non-ASCII file name as RFC 6266 filename*= in Content-Disposition', async () => {
    const answer = await get(serve.port, `${target}.meta4`, 'mb.example')
    expectSafeHeaders(answer)
    expect(answer.status).to.equal(200)
    expect(values(answer, 'content-disposition')).to.deep.equal([`attachment; filename="_ame_.iso.meta4"; filename*=UTF-8''%C3%B1ame%E2%82%AC.iso.meta4`])
  })

  it('refuses a request target with raw bytes beyond ASCII below 500 (node parses the target as ASCII only)', async () => {
    const answer = await rawRequest(serve.port, Buffer.concat([Buffer.from('GET /d%C3%AFr?x=', 'latin1'), Buffer.from('ü€', 'utf8'), Buffer.from(' HTTP/1.1\r\nHost: mb.example', 'latin1')]))
    expectSafeHeaders(answer)
    expect(answer.status).to.equal(400)
  })

  it('answers CONNECT with 405 and Allow: GET, HEAD instead of dropping the socket', async () => {
    for (const head of ['CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443', 'CONNECT 127.0.0.1:22 HTTP/1.0']) {
      const answer = await rawRequest(serve.port, Buffer.from(head))
      expect(answer.status, head).to.equal(405)
      expect(values(answer, 'allow')).to.deep.equal(['GET, HEAD'])
    }
    expect((await get(serve.port, target, 'mb.example')).status).to.equal(302)
  })

  it('neither delivers nor lists dotfiles, dot directories and rsync partials (index.exclude), but .treeinfo', async () => {
    for (const path of ['/.git/config', '/.git/', '/.git', '/.htpasswd', '/d%C3%AFr/.%C3%B1ame%E2%82%AC.iso.Xa81Qz', '/_origin/.git/config']) {
      const answer = await get(serve.port, path, 'mb.example')
      expect(answer.status, path).to.equal(404)
    }
    const treeinfo = await fetch(`http://127.0.0.1:${serve.port}/.treeinfo`)
    expect([treeinfo.status, await treeinfo.text()]).to.deep.equal([200, '[general]\n'])
    const listing = await fetch(`http://127.0.0.1:${serve.port}/`)
    const html = await listing.text()
    expect(listing.status).to.equal(200)
    expect(html).to.contain('.treeinfo')
    expect(html).to.not.contain('.git').and.to.not.contain('.htpasswd')
    const dir = await (await fetch(`http://127.0.0.1:${serve.port}/d%C3%AFr/`)).text()
    expect(dir).to.not.contain('Xa81Qz')
  })

  it('answers methods mb does not serve with 405 (known to HTTP) or 501 (unknown)', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'PROPFIND', 'TRACE']) {
      const answer = await rawRequest(serve.port, Buffer.from(`${method} ${target} HTTP/1.1\r\nHost: mb.example\r\nContent-Length: 0`))
      expect(answer.status, method).to.equal(405)
      expect(values(answer, 'allow'), method).to.deep.equal(['GET, HEAD'])
    }
    for (const method of ['FOO', 'BREW', 'GETX']) expect((await rawRequest(serve.port, Buffer.from(`${method} / HTTP/1.1\r\nHost: mb.example`))).status, method).to.equal(501)
  })
})
