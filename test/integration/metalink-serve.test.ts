// @store-independent: the metalink formats
import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import bencode from 'bencode'
import {XMLParser} from 'fast-xml-parser'
import {validateXML} from 'xmllint-wasm'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {backend, useTestDatabase} from '../helpers/db.js'
import {headerLines, request} from '../helpers/serve-process.js'

const SCHEMA = readFileSync(new URL('../fixtures/metalink/metalink4.rng', import.meta.url), 'utf8')
const GEOIP = new URL('../fixtures/geoip/GeoLite2-City-Test.mmdb', import.meta.url).pathname

/** Validates a Metalink 4 document against the RFC 5854 RELAX NG schema fixture. */
async function validateMeta4(xml: string): Promise<{valid: boolean; output: string}> {
  const result = await validateXML({xml: {fileName: 'doc.meta4', contents: xml}, schema: {fileName: 'metalink4.rng', contents: SCHEMA}, extension: 'relaxng'})
  return {valid: result.valid, output: result.rawOutput}
}

const parser = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '@', isArray: (name) => ['url', 'hash'].includes(name), parseTagValue: false})
const sum = (tool: string, dir: string, name: string) => execFileSync(tool, [name], {cwd: dir, encoding: 'utf8'})
/** The `<pieces>` element of a parsed meta4 or Metalink 3 `file`/`verification` of hash type `type`, if any. */
const piecesOf = (parent: any, type: string) => [parent.pieces ?? []].flat().find((p: any) => p['@type'] === type)

describe(`metalink routes of mb serve (${backend})`, () => {
  const store = useTestDatabase()
  let root: string
  let running: RunningServer
  let base: string
  const big = randomBytes(700 * 1024)
  const outcomes: Array<{target: string; status: number; outcome: string}> = []

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-metalink-'))
    mkdirSync(join(root, 'pub'))
    mkdirSync(join(root, 'repodata'))
    writeFileSync(join(root, 'pub', 'big.iso'), big)
    writeFileSync(join(root, 'pub', 'other.iso'), randomBytes(50_000))
    writeFileSync(join(root, 'pub', 'real.iso'), randomBytes(20_000))
    writeFileSync(join(root, 'repodata', 'repomd.xml'), randomBytes(10_000))
    await indexOrigin(store.database.db, root)
    // A real hash file and a real .meta4 on disk (not indexed): they must win.
    writeFileSync(join(root, 'pub', 'real.iso.sha256'), 'from disk\n')
    writeFileSync(join(root, 'pub', 'real.iso.meta4'), '<from-disk/>\n')
    await hashIndex(store.database, root, {jobs: 2})
    const mirror = (identifier: string, country: string, continent: string, extra: Record<string, unknown> = {}) =>
      store.database.db
        .insertInto('mirror')
        .values({
          identifier,
          http_url: `http://${identifier}/pub-mirror/`,
          rsync_url: `rsync://syncuser:rsyncpass@${identifier}/mod/`,
          ftp_url: `ftp://ftpuser:ftppass@${identifier}/`,
          country,
          continent,
          admin: 'Admin Person',
          admin_email: 'admin-secret@example.org',
          comment: 'SECRET-COMMENT',
          last_scan_ok_at: new Date(),
          ...extra,
        } as any)
        .returning('id')
        .executeTakeFirstOrThrow()
    const de = await mirror('de.mirror.test', 'DE', 'EU')
    const fr = await mirror('fr.mirror.test', 'FR', 'EU')
    const down = await mirror('down.mirror.test', 'DE', 'EU', {up: false})
    const ids = [de.id, fr.id, down.id]
    await store.database.db.updateTable('file').set({mirrors: ids}).execute()
    // Retries off: every request here comes from 127.0.0.1, and repeats would cycle through the tier.
    // Background content checks off: the mirrors here are names, not servers.
    // The documents here list two mirrors: the origin's URL ends them only below three.
    const config = ConfigSchema.parse({
      root,
      geoip: [GEOIP],
      serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, country_query: 'trusted', country_query_clients: ['127.0.0.1/32'], origin_fallback_mirrors: 3},
      select: {retry_window_seconds: 0},
      probe: {content_interval_seconds: 0},
      log_level: 'silent',
    })
    running = await startServe(config, {database: store.database})
    running.server.addObserver((o) => outcomes.push({target: o.target, status: o.status, outcome: o.outcome}))
    base = running.url
  })
  after(async () => {
    await running?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('serves an RFC 5854 meta4 for PATH.meta4 with every field, valid against the schema', async () => {
    const res = await fetch(`${base}/pub/big.iso.meta4?country=DE`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/metalink4+xml')
    expect(res.headers.get('content-disposition')).to.equal('attachment; filename="big.iso.meta4"')
    expect(res.headers.get('vary')).to.equal('Accept')
    const xml = await res.text()
    const validation = await validateMeta4(xml)
    expect(validation.valid, validation.output).to.equal(true)
    const doc = parser.parse(xml).metalink
    expect(doc['@xmlns']).to.equal('urn:ietf:params:xml:ns:metalink')
    expect(doc.generator).to.match(/^mb\//)
    expect(doc.origin['@dynamic']).to.equal('true')
    expect(doc.origin['#text']).to.equal(`${base}/pub/big.iso.meta4`)
    expect(doc.published).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    const file = doc.file
    expect(file['@name']).to.equal('big.iso')
    expect(file.size).to.equal(String(big.length))
    const hashes = Object.fromEntries(file.hash.map((h: any) => [h['@type'], h['#text']]))
    expect(hashes).to.deep.equal({
      md5: createHash('md5').update(big).digest('hex'),
      'sha-1': createHash('sha1').update(big).digest('hex'),
      'sha-256': createHash('sha256').update(big).digest('hex'),
    })
    // One list, SHA-1 (libzypp reads no other; wget2 would add a second list to the first).
    expect([file.pieces['@type'], file.pieces['@length'], file.pieces.hash.length]).to.deep.equal(['sha-1', '262144', 3])
    expect(file.pieces.hash[2]).to.equal(
      createHash('sha1')
        .update(big.subarray(2 * 262144))
        .digest('hex'),
    )
    expect(file.metaurl).to.equal(undefined) // torrent.meta4_metaurl is off by default
    const urls = file.url.map((u: any) => [u['@priority'], u['@location'], u['#text']])
    expect(urls).to.deep.equal([
      ['1', 'de', 'http://de.mirror.test/pub-mirror/pub/big.iso'],
      ['2', 'fr', 'http://fr.mirror.test/pub-mirror/pub/big.iso'],
      ['3', undefined, `${base}/_origin/pub/big.iso`],
    ])
  })

  it('answers PATH?meta4 and Accept: application/metalink4+xml with the same document', async () => {
    const q = await fetch(`${base}/pub/big.iso?meta4&country=DE`)
    expect(q.status).to.equal(200)
    expect(q.headers.get('content-type')).to.equal('application/metalink4+xml')
    const a = await fetch(`${base}/pub/big.iso?country=DE`, {headers: {accept: 'application/metalink4+xml'}, redirect: 'manual'})
    expect(a.status).to.equal(200)
    const doc = parser.parse(await a.text()).metalink
    expect(doc.file.url.map((u: any) => u['#text'])[0]).to.equal('http://de.mirror.test/pub-mirror/pub/big.iso')
  })

  it("negotiates a metalink by Accept only when it lists a mirror: zypper's Accept gets the bytes of an origin-only file", async () => {
    const zypper = {accept: '*/*, application/metalink+xml, application/metalink4+xml'}
    const repomd = await fetch(`${base}/repodata/repomd.xml?country=DE`, {headers: zypper, redirect: 'manual'})
    expect([repomd.status, repomd.headers.get('content-type'), repomd.headers.get('vary')]).to.deep.equal([200, 'application/xml', 'Accept'])
    expect(Buffer.from(await repomd.arrayBuffer()).equals(readFileSync(join(root, 'repodata', 'repomd.xml')))).to.equal(true)
    writeFileSync(join(root, 'pub', 'fresh.iso'), 'not indexed yet\n')
    const fresh = await fetch(`${base}/pub/fresh.iso`, {headers: zypper, redirect: 'manual'})
    expect([fresh.status, await fresh.text()]).to.deep.equal([200, 'not indexed yet\n'])
    // The suffix still gets the document, mirrors or not.
    const explicit = await fetch(`${base}/repodata/repomd.xml.meta4?country=DE`)
    expect([explicit.status, explicit.headers.get('content-type')]).to.deep.equal([200, 'application/metalink4+xml'])
    const mirrored = await fetch(`${base}/pub/big.iso?country=DE`, {headers: zypper, redirect: 'manual'})
    expect([mirrored.status, mirrored.headers.get('content-type')]).to.deep.equal([200, 'application/metalink4+xml'])
  })

  it('negotiates Metalink 3 by Accept for clients that speak only it', async () => {
    const res = await fetch(`${base}/pub/big.iso?country=DE`, {headers: {accept: '*/*, application/metalink+xml'}, redirect: 'manual'})
    expect([res.status, res.headers.get('content-type')]).to.deep.equal([200, 'application/metalink+xml'])
    expect(await res.text()).to.match(/<metalink [^>]*version="3.0"/)
    const preferred = await fetch(`${base}/pub/big.iso?country=DE`, {headers: {accept: 'application/metalink4+xml;q=0.4, application/metalink+xml'}, redirect: 'manual'})
    expect(preferred.headers.get('content-type')).to.equal('application/metalink+xml')
  })

  it('serves Metalink 3.0 with preference from 100 down, origin last', async () => {
    const res = await fetch(`${base}/pub/big.iso.metalink?country=DE`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/metalink+xml')
    const doc = parser.parse(await res.text()).metalink
    expect(doc['@xmlns']).to.equal('http://www.metalinker.org/')
    expect(doc['@version']).to.equal('3.0')
    expect(doc['@type']).to.equal('dynamic')
    const file = doc.files.file
    expect(file.size).to.equal(String(big.length))
    expect(file.verification.hash.find((h: any) => h['@type'] === 'sha256')['#text']).to.equal(createHash('sha256').update(big).digest('hex'))
    expect(file.resources.url.map((u: any) => [u['@preference'], u['#text']])).to.deep.equal([
      ['100', 'http://de.mirror.test/pub-mirror/pub/big.iso'],
      ['99', 'http://fr.mirror.test/pub-mirror/pub/big.iso'],
      ['98', `${base}/_origin/pub/big.iso`],
    ])
  })

  it('serves hash files equal to sha256sum/sha1sum/md5sum output', async () => {
    for (const [ext, tool] of [
      ['sha256', 'sha256sum'],
      ['sha1', 'sha1sum'],
      ['md5', 'md5sum'],
    ]) {
      const res = await fetch(`${base}/pub/big.iso.${ext}`)
      expect(res.status).to.equal(200)
      expect(res.headers.get('content-type')).to.equal('text/plain; charset=utf-8')
      expect(await res.text()).to.equal(sum(tool, join(root, 'pub'), 'big.iso'))
    }
  })

  it('redirects with Link rel=describedby and an RFC 3230 Digest while hashes are fresh', async () => {
    const res = await fetch(`${base}/pub/big.iso?country=DE`, {redirect: 'manual'})
    expect(res.status).to.equal(302)
    expect(res.headers.get('location')).to.equal('http://de.mirror.test/pub-mirror/pub/big.iso')
    const link = res.headers.get('link')!
    expect(link).to.include(`<${base}/pub/big.iso.meta4>; rel=describedby; type="application/metalink4+xml"`)
    expect(link).to.include('<http://de.mirror.test/pub-mirror/pub/big.iso>; rel=duplicate')
    const b64 = (algo: string) => createHash(algo).update(big).digest('base64')
    expect(res.headers.get('digest')).to.equal(`SHA-256=${b64('sha256')}, MD5=${b64('md5')}, SHA=${b64('sha1')}`)
  })

  it('never shadows a real file on disk named like a representation', async () => {
    const sha = await fetch(`${base}/pub/real.iso.sha256`)
    expect(sha.status).to.equal(200)
    expect(await sha.text()).to.equal('from disk\n')
    const meta4 = await fetch(`${base}/pub/real.iso.meta4`)
    expect(meta4.status).to.equal(200)
    expect(await meta4.text()).to.equal('<from-disk/>\n')
  })

  it('delivers a file named like a representation once the disk check sees it written, and the document again once it is gone', async () => {
    const target = `${base}/pub/big.iso.md5`
    const text = async () => (await fetch(target)).text()
    const document = await text()
    expect(document).to.match(/^[0-9a-f]{32} {2}big\.iso\n$/)
    const path = join(root, 'pub', 'big.iso.md5')
    // Within serve.disk_check_seconds (1 s), at once where inotify watches the directory.
    const until = async (want: string) => {
      let got = await text()
      for (let i = 0; i < 40 && got !== want; i++) {
        await sleep(100)
        got = await text()
      }
      return got
    }
    writeFileSync(path, 'written on disk\n')
    expect(await until('written on disk\n')).to.equal('written on disk\n')
    rmSync(path)
    expect(await until(document)).to.equal(document)
  })

  it('answers 404 for a representation asked below a file (file.iso/x.meta4), not 500', async () => {
    for (const target of ['/pub/big.iso/*.meta4', '/pub/big.iso/x.iso.meta4', '/pub/real.iso/x.sha256', '/pub/big.iso/x.mirrorlist']) {
      for (const method of ['GET', 'HEAD']) {
        const res = await fetch(base + target, {method, headers: {'if-none-match': '"x"'}})
        await res.text()
        expect([target, method, res.status]).to.deep.equal([target, method, 404])
      }
    }
  })

  it('answers HEAD with the headers only, and reports each kind of answer to observers', async () => {
    const head = await fetch(`${base}/pub/big.iso.meta4`, {method: 'HEAD'})
    expect(head.status).to.equal(200)
    expect(Number(head.headers.get('content-length'))).to.be.greaterThan(1000)
    expect(await head.text()).to.equal('')
    outcomes.length = 0
    for (const target of ['/pub/big.iso.meta4', '/pub/big.iso.metalink', '/pub/big.iso.md5', '/pub/big.iso.mirrorlist', '/pub/nothing.iso.meta4']) await (await fetch(base + target)).text()
    await sleep(50)
    expect(outcomes).to.deep.equal([
      {target: '/pub/big.iso.meta4', status: 200, outcome: 'meta4'},
      {target: '/pub/big.iso.metalink', status: 200, outcome: 'metalink'},
      {target: '/pub/big.iso.md5', status: 200, outcome: 'hash'},
      {target: '/pub/big.iso.mirrorlist', status: 200, outcome: 'mirrorlist'},
      {target: '/pub/nothing.iso.meta4', status: 404, outcome: 'not_found'},
    ])
  })

  it('lists only the origin for origin-only files', async () => {
    const res = await fetch(`${base}/repodata/repomd.xml.meta4?country=DE`)
    expect(res.status).to.equal(200)
    const xml = await res.text()
    expect((await validateMeta4(xml)).valid).to.equal(true)
    const doc = parser.parse(xml).metalink
    expect(doc.file.url.map((u: any) => [u['@priority'], u['#text']])).to.deep.equal([['1', `${base}/_origin/repodata/repomd.xml`]])
  })

  it('renders the mirror list as HTML with file facts and realms, without mirrors the client cannot use', async () => {
    const res = await fetch(`${base}/pub/big.iso.mirrorlist?country=DE`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('text/html; charset=utf-8')
    const html = await res.text()
    expect(html).to.include('<title>Mirrors of big.iso</title>')
    expect(html).to.include(`(${big.length} bytes)`)
    expect(html).to.include(createHash('sha256').update(big).digest('hex'))
    expect(html).to.include(`href="${base}/pub/big.iso.meta4"`)
    expect(html).to.include(`href="${base}/pub/big.iso.sha256"`)
    expect(html).to.include('Mirrors in your country (1)')
    expect(html).to.include('<td>de.mirror.test</td><td>DE</td><td>1</td>')
    expect(html).to.include('fr.mirror.test')
    expect(html).not.to.include('down.mirror.test')
    for (const secret of ['admin-secret@example.org', 'SECRET-COMMENT', 'rsyncpass', 'ftppass', 'syncuser', 'Admin Person', 'rsync://', 'ftp://']) expect(html).not.to.include(secret)
    const q = await fetch(`${base}/pub/big.iso?mirrorlist&country=DE`)
    expect(q.headers.get('content-type')).to.equal('text/html; charset=utf-8')
  })

  it('gives the mirror list as JSON without credentials, e-mail or comments', async () => {
    const res = await fetch(`${base}/pub/big.iso.mirrorlist?country=DE`, {headers: {accept: 'application/json'}})
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/json; charset=utf-8')
    const text = await res.text()
    for (const secret of ['admin-secret@example.org', 'SECRET-COMMENT', 'rsyncpass', 'ftppass', 'syncuser', 'Admin Person', 'rsync://', 'ftp://', 'admin', 'comment'])
      expect(text).not.to.include(secret)
    const list = JSON.parse(text)
    expect(list.size).to.equal(big.length)
    expect(list.hashes.sha256).to.equal(createHash('sha256').update(big).digest('hex'))
    expect(list.hashes).to.include.keys(['piece_size', 'piece_hash', 'pieces'])
    expect(list.realm).to.equal('country')
    expect(list.realms.map((g: any) => [g.realm, g.mirrors.map((m: any) => m.identifier)])).to.deep.equal([
      ['country', ['de.mirror.test']],
      ['continent', ['fr.mirror.test']],
    ])
    expect(list.outdated).to.deep.equal([])
    expect(text).not.to.include('down.mirror.test')
    expect(Object.keys(list.realms[0].mirrors[0]).sort()).to.deep.equal(['continent', 'country', 'identifier', 'rank', 'realm', 'url'])
  })

  it("gives a file rewritten after hashing no Digest and no hash file until reindexed, then the new version's Digest", async () => {
    const path = join(root, 'pub', 'other.iso')
    const fresh = await fetch(`${base}/pub/other.iso.sha256`)
    expect(fresh.status).to.equal(200)
    const b64 = (algo: string, content: Buffer) => createHash(algo).update(content).digest('base64')
    const digestOf = (content: Buffer) => `SHA-256=${b64('sha256', content)}, MD5=${b64('md5', content)}, SHA=${b64('sha1', content)}`
    // The redirect's header lines are cached per file version: this one caches the old Digest.
    const before = await fetch(`${base}/pub/other.iso?country=DE`, {redirect: 'manual'})
    expect(before.headers.get('digest')).to.equal(digestOf(readFileSync(path)))
    const st = statSync(path)
    const rewritten = randomBytes(50_000)
    writeFileSync(path, rewritten)
    utimesSync(path, st.atime, new Date(st.mtimeMs + 5000))
    // The server notices within serve.disk_check_seconds (1 s: the stat of the request above vouches until then).
    let stale = await fetch(`${base}/pub/other.iso.sha256`)
    for (let i = 0; i < 50 && stale.status !== 404; i++) {
      await sleep(100)
      stale = await fetch(`${base}/pub/other.iso.sha256`)
    }
    expect(stale.status).to.equal(404)
    // Noticed changed: the snapshot holds the disk's version with no mirror, so the origin
    // serves the new bytes until the index and a scan catch up.
    const redirect = await fetch(`${base}/pub/other.iso?country=DE`, {redirect: 'manual'})
    expect(redirect.status).to.equal(200)
    expect(redirect.headers.get('x-mb-origin-reason')).to.equal('no_mirror')
    // The server re-indexes the file by itself, hashes included (src/lib/origin/reindex.ts): a
    // 50 kB file may already be hashed again by now. Either way the old version's hashes are
    // never given for the new bytes.
    expect(redirect.headers.get('digest')).to.be.oneOf([null, digestOf(rewritten)])
    expect(Buffer.from(await redirect.arrayBuffer()).equals(readFileSync(path))).to.equal(true)
    const meta4 = parser.parse(await (await fetch(`${base}/pub/other.iso.meta4`)).text()).metalink
    const sha256 = (meta4.file.hash ?? []).find((h: {'@type': string}) => h['@type'] === 'sha-256')
    if (meta4.file.hash !== undefined) expect(sha256?.['#text']).to.equal(createHash('sha256').update(rewritten).digest('hex'))
    else expect(meta4.file.pieces).to.equal(undefined)

    // Reindex (the walk clears the hashes' validity) and rehash: fresh again once the snapshot has it.
    await indexOrigin(store.database.db, root)
    await hashIndex(store.database, root, {jobs: 1})
    const expected = sum('sha256sum', join(root, 'pub'), 'other.iso')
    let body = ''
    for (let i = 0; i < 100 && body !== expected; i++) {
      await sleep(100)
      const res = await fetch(`${base}/pub/other.iso.sha256`)
      body = await res.text()
    }
    expect(body).to.equal(expected)
    // Once a mirror holds the new version, its redirect carries the new version's Digest, not
    // the one cached for the old version.
    const de = await store.database.db.selectFrom('mirror').select('id').where('identifier', '=', 'de.mirror.test').executeTakeFirstOrThrow()
    await store.database.db
      .updateTable('file')
      .set({mirrors: [de.id]})
      .where('path', '=', 'pub/other.iso')
      .execute()
    let after = await fetch(`${base}/pub/other.iso?country=DE`, {redirect: 'manual'})
    for (let i = 0; i < 100 && after.status !== 302; i++) {
      await after.arrayBuffer()
      await sleep(100)
      after = await fetch(`${base}/pub/other.iso?country=DE`, {redirect: 'manual'})
    }
    expect(after.status).to.equal(302)
    expect(after.headers.get('location')).to.equal('http://de.mirror.test/pub-mirror/pub/other.iso')
    expect(after.headers.get('digest')).to.equal(digestOf(rewritten))
    expect(after.headers.get('link')).to.include(`<${base}/pub/other.iso.meta4>; rel=describedby`)
  })

  it('describes a new version of a path with its new hashes in both metalinks, not the cached parts of the old one', async () => {
    const name = 'version.iso'
    const path = join(root, 'pub', name)
    const first = randomBytes(300 * 1024)
    writeFileSync(path, first)
    await indexOrigin(store.database.db, root)
    await hashIndex(store.database, root, {jobs: 1})
    const meta4 = async () => parser.parse(await (await fetch(`${base}/pub/${name}.meta4?country=DE`)).text()).metalink.file
    const metalink3 = async () => parser.parse(await (await fetch(`${base}/pub/${name}.metalink?country=DE`)).text()).metalink.files.file
    const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')
    const sha1 = (bytes: Buffer) => createHash('sha1').update(bytes).digest('hex')
    const meta4Sha256 = (file: any) => file.hash?.find((h: any) => h['@type'] === 'sha-256')?.['#text']
    let before = await meta4()
    for (let i = 0; i < 100 && meta4Sha256(before) !== sha256(first); i++) {
      await sleep(100) // the snapshot picks the new row up
      before = await meta4()
    }
    expect(meta4Sha256(before)).to.equal(sha256(first))
    expect(piecesOf(before, 'sha-1').hash).to.deep.equal([sha1(first.subarray(0, 262144)), sha1(first.subarray(262144))])
    expect((await metalink3()).verification.hash.find((h: any) => h['@type'] === 'sha256')['#text']).to.equal(sha256(first))

    // Same path and size, new content and mtime; then larger: each version gets its own size, hashes and pieces.
    const versions = [randomBytes(300 * 1024), randomBytes(600 * 1024)]
    for (const [n, content] of versions.entries()) {
      const st = statSync(path)
      writeFileSync(path, content)
      utimesSync(path, st.atime, new Date(st.mtimeMs + 10_000 * (n + 1)))
      await indexOrigin(store.database.db, root)
      await hashIndex(store.database, root, {jobs: 1})
      let after = await meta4()
      for (let i = 0; i < 100 && meta4Sha256(after) !== sha256(content); i++) {
        await sleep(100)
        after = await meta4()
      }
      expect(after.size).to.equal(String(content.length))
      expect(Object.fromEntries(after.hash.map((h: any) => [h['@type'], h['#text']]))).to.deep.equal({
        md5: createHash('md5').update(content).digest('hex'),
        'sha-1': createHash('sha1').update(content).digest('hex'),
        'sha-256': sha256(content),
      })
      const pieces = Array.from({length: Math.ceil(content.length / 262144)}, (_, i) => sha1(content.subarray(i * 262144, (i + 1) * 262144)))
      expect(piecesOf(after, 'sha-1').hash).to.deep.equal(pieces)
      const m3 = await metalink3()
      expect(m3.size).to.equal(String(content.length))
      expect(m3.verification.hash.find((h: any) => h['@type'] === 'sha256')['#text']).to.equal(sha256(content))
      expect(piecesOf(m3.verification, 'sha1').hash.map((h: any) => h['#text'])).to.deep.equal(pieces)
      expect(await (await fetch(`${base}/pub/${name}.sha256`)).text()).to.equal(`${sha256(content)}  ${name}\n`)
    }
  })

  it('ends every fallback list below serve.origin_fallback_mirrors with a URL the origin delivers itself within its budget: meta4, Metalink 3, url-list, ws=; never a 302’s Link rel=duplicate', async () => {
    const last = {
      meta4: parser.parse(await (await fetch(`${base}/pub/big.iso.meta4?country=DE`)).text()).metalink.file.url.at(-1)['#text'],
      metalink3: parser.parse(await (await fetch(`${base}/pub/big.iso.metalink?country=DE`)).text()).metalink.files.file.resources.url.at(-1)['#text'],
      torrent: Buffer.from(bencode.decode(Buffer.from(await (await fetch(`${base}/pub/big.iso.torrent?country=DE`)).arrayBuffer()))['url-list'].at(-1)).toString(),
      magnet: decodeURIComponent(/ws=([^&]+)&xs=/.exec(await (await fetch(`${base}/pub/big.iso.magnet?country=DE`)).text())![1]),
    }
    const duplicates = headerLines(await request(Number(new URL(base).port), '/pub/big.iso?country=DE'), 'link').filter((l) => l.includes('rel=duplicate'))
    expect(duplicates.join('\n'), 'a redirect names mirrors only').to.not.include('_origin')
    for (const [where, url] of Object.entries(last)) {
      expect(url, where).to.equal(`${base}/_origin/pub/big.iso`)
      const res = await fetch(url, {redirect: 'manual'})
      expect(res.status, where).to.equal(200)
      expect(res.headers.get('x-mb-origin-reason')).to.equal('origin_fallback')
      expect(Buffer.from(await res.arrayBuffer()).equals(big), where).to.equal(true)
    }
    // Range and HEAD as from the origin; directories, missing files and representations are not served in this form.
    const range = await fetch(`${base}/_origin/pub/big.iso`, {headers: {range: 'bytes=10-19'}})
    expect([range.status, Buffer.from(await range.arrayBuffer()).equals(big.subarray(10, 20))]).to.deep.equal([206, true])
    for (const path of ['/_origin/', '/_origin', '/_origin/pub/', '/_origin/pub/nothing.iso', '/_origin/pub/big.iso.meta4', '/_origin/../_origin/pub/../../etc/passwd']) {
      expect((await fetch(`${base}${path}`, {redirect: 'manual'})).status, path).to.be.oneOf([400, 404])
    }
    // A plain request is unaffected: still a redirect to a mirror.
    expect((await fetch(`${base}/pub/big.iso?country=DE`, {redirect: 'manual'})).status).to.equal(302)
  })

  it('describes a re-index with another piece algorithm under the running server, without a restart', async () => {
    // The pieces the documents carry are SHA-1 either way; the piece algorithm shows in the
    // mirror list's facts, made from the hash row kept per file version.
    const facts = async () => {
      const list = await (await fetch(`${base}/pub/big.iso.mirrorlist?country=DE`, {headers: {accept: 'application/json'}})).json()
      return list.hashes.piece_hash as string
    }
    const until = async (want: string) => {
      let got = await facts()
      for (let i = 0; i < 100 && got !== want; i++) {
        await sleep(100) // the snapshot picks the rewritten rows up
        got = await facts()
      }
      return got
    }
    const meta4Pieces = async () => parser.parse(await (await fetch(`${base}/pub/big.iso.meta4?country=DE`)).text()).metalink.file.pieces
    const before = await meta4Pieces()
    expect(await facts()).to.equal('sha256')
    const sha1 = await hashIndex(store.database, root, {jobs: 1, pieceHash: 'sha1', subdir: 'pub'})
    expect(sha1.hashed).to.be.above(0)
    expect(await until('sha1')).to.equal('sha1')
    expect(await meta4Pieces()).to.deep.equal(before) // the same SHA-1 pieces, read from the new row
    await hashIndex(store.database, root, {jobs: 1, pieceHash: 'sha256', subdir: 'pub'})
    expect(await until('sha256')).to.equal('sha256')
  })
})
