// @store-independent: the metalink formats through the CLI
import {execFileSync} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {XMLParser} from 'fast-xml-parser'
import bencode from 'bencode'
import {BIN, hermeticEnv, mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

const parser = new XMLParser({ignoreAttributes: false, attributeNamePrefix: '@', isArray: (name) => ['url', 'hash'].includes(name), parseTagValue: false})
const GEOIP = new URL('../fixtures/geoip/GeoLite2-City-Test.mmdb', import.meta.url).pathname

describe(`mb index --hashes and mb metalink (${backend})`, () => {
  let test: TestDatabase
  let root: string
  let env: Record<string, string>

  before(async () => {
    test = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-metalink-cli-'))
    mkdirSync(join(root, 'iso'))
    writeFileSync(join(root, 'iso', 'a.iso'), randomBytes(300 * 1024))
    writeFileSync(join(root, 'iso', 'b.iso'), randomBytes(10_000))
    env = {...test.env, MB_ROOT: root}
    const database = await test.open()
    try {
      await database.db
        .insertInto('mirror')
        .values([
          {identifier: 'se.mirror.test', http_url: 'http://se.mirror.test/', country: 'SE', continent: 'EU', last_scan_ok_at: new Date()},
          {identifier: 'us.mirror.test', http_url: 'http://us.mirror.test/', country: 'US', continent: 'NA', last_scan_ok_at: new Date()},
        ] as any)
        .execute()
    } finally {
      await database.close()
    }
  })
  after(async () => {
    await test?.drop()
    rmSync(root, {recursive: true, force: true})
  })

  it('indexes and hashes with --hashes --jobs, then rehashes nothing on a re-run', async () => {
    const first = await mb(['index', '--hashes', '--jobs', '2', '--json'], {env})
    expect(first.code, first.stderr).to.equal(0)
    const result = first.json()
    expect(result.added).to.equal(2)
    expect(result.hashes.hashed).to.equal(2)
    expect(result.hashes.failed).to.deep.equal([])
    const again = (await mb(['index', '--hashes', '--json'], {env})).json()
    expect(again.hashes.hashed).to.equal(0)
    expect(again.hashes.current).to.equal(2)
    const bad = await mb(['index', '--jobs', '2'], {env})
    expect(bad.code).to.equal(2)
  })

  it('prints the meta4 the server would send, with mirrors ranked for --client-ip, and Metalink 3 on request', async () => {
    const database = await test.open()
    try {
      const ids = (await database.db.selectFrom('mirror').select('id').orderBy('id').execute()).map((r) => r.id)
      await database.db.updateTable('file').set({mirrors: ids}).execute()
    } finally {
      await database.close()
    }
    const res = await mb(['metalink', 'iso/a.iso', '--client-ip', '89.160.20.112', '--base-url', 'http://dl.example.org/'], {env: {...env, MB_GEOIP: GEOIP}})
    expect(res.code, res.stderr).to.equal(0)
    const doc = parser.parse(res.stdout).metalink
    expect(doc.origin['#text']).to.equal('http://dl.example.org/iso/a.iso.meta4')
    expect(doc.file['@name']).to.equal('a.iso')
    const sha256 = execFileSync('sha256sum', [join(root, 'iso', 'a.iso')], {encoding: 'utf8'}).split(' ')[0]
    expect(doc.file.hash.find((h: any) => h['@type'] === 'sha-256')['#text']).to.equal(sha256)
    expect([doc.file.pieces['@type'], doc.file.pieces.hash.length]).to.deep.equal(['sha-1', 2])
    const urls = doc.file.url.map((u: any) => u['#text'])
    // 89.160.20.112 is in SE: the Swedish mirror first, then the US one; two mirrors, so no origin (serve.origin_fallback_mirrors).
    expect(urls).to.deep.equal(['http://se.mirror.test/iso/a.iso', 'http://us.mirror.test/iso/a.iso'])
    expect(doc.file.url[0]['@location']).to.equal('se')

    // An HTTPS base URL stands for an HTTPS client: mirrors without an https_url are left out.
    const https = parser.parse((await mb(['metalink', 'iso/a.iso', '--base-url', 'https://dl.example.org/'], {env})).stdout).metalink
    expect(https.file.url.map((u: any) => u['#text'])).to.deep.equal(['https://dl.example.org/_origin/iso/a.iso'])

    const v3 = await mb(['metalink', 'iso/a.iso', '--format', 'metalink', '--base-url', 'http://dl.example.org/'], {env})
    expect(v3.code, v3.stderr).to.equal(0)
    expect(parser.parse(v3.stdout).metalink['@version']).to.equal('3.0')

    const json = (await mb(['metalink', 'iso/a.iso', '--json'], {env})).json()
    expect(json.hashes.sha256).to.equal(sha256)
    expect(json.sources.map((x: any) => x.url).join(' '), 'two mirrors: no origin').to.not.include('_origin')
    // --json keys are snake_case, like every other command's.
    expect(json).to.have.keys(['path', 'name', 'size', 'mtime', 'hashes', 'sources', 'origin_url', 'meta4_url', 'metalink_url', 'published', 'generator'])
    expect(json.hashes).to.include({piece_hash: 'sha256', piece_count: 2})
    expect(json.meta4_url).to.equal('http://127.0.0.1:8080/iso/a.iso.meta4')
  })

  it('writes the .torrent, magnet link and .zsync offline with --format, after hashing only what lacks them', async () => {
    const config = join(root, '..', `mb-formats-${Date.now()}.yaml`)
    writeFileSync(config, 'zsync:\n  min_size: 100000\n')
    const zenv = {...env, MB_GEOIP: GEOIP, MB_CONFIG: config}
    try {
      // Only a.iso (300 KiB) reaches zsync.min_size: it alone is read again, for its zsync sums.
      const indexed = (await mb(['index', '--hashes', '--json'], {env: zenv})).json()
      expect(indexed.hashes.hashed).to.equal(1)
      expect(indexed.hashes.current).to.equal(1)
      const run = (format: string, path = 'iso/a.iso') =>
        execFileSync(process.execPath, [BIN, 'metalink', path, '--format', format, '--client-ip', '89.160.20.112', '--base-url', 'http://dl.example.org/'], {
          env: hermeticEnv(zenv),
        })
      const torrent = bencode.decode(run('torrent'))
      expect(torrent['url-list'].map((u: Uint8Array) => Buffer.from(u).toString())).to.deep.equal(['http://se.mirror.test/iso/a.iso', 'http://us.mirror.test/iso/a.iso'])
      expect(torrent.announce).to.equal(undefined)
      expect(torrent.info.length).to.equal(300 * 1024)
      expect(torrent.info['piece length']).to.equal(262144)
      const btih = createHash('sha1').update(bencode.encode(torrent.info)).digest('hex')
      expect(run('magnet').toString()).to.equal(
        `magnet:?xt=urn:btih:${btih}&dn=a.iso&xl=307200&ws=http%3A%2F%2Fse.mirror.test%2Fiso%2Fa.iso&ws=http%3A%2F%2Fus.mirror.test%2Fiso%2Fa.iso&xs=http%3A%2F%2Fdl.example.org%2Fiso%2Fa.iso.torrent\n`,
      )
      const zsync = run('zsync')
      const header = zsync.subarray(0, zsync.indexOf('\n\n')).toString().split('\n')
      expect(header.filter((l) => !l.startsWith('MTime: '))).to.deep.equal([
        'zsync: 0.6.2',
        'Filename: a.iso',
        'Blocksize: 2048',
        'Length: 307200',
        'Hash-Lengths: 2,2,4',
        'URL: http://se.mirror.test/iso/a.iso',
        'URL: http://us.mirror.test/iso/a.iso',
        `SHA-1: ${execFileSync('sha1sum', [join(root, 'iso', 'a.iso')], {encoding: 'utf8'}).split(' ')[0]}`,
      ])
      expect(zsync.length - zsync.indexOf('\n\n') - 2).to.equal(150 * 6)
      // b.iso is below zsync.min_size: a clear error, exit 1.
      const small = await mb(['metalink', 'iso/b.iso', '--format', 'zsync'], {env: zenv})
      expect(small.code).to.equal(1)
      expect(small.stderr).to.include('/iso/b.iso is smaller than 100000 bytes (zsync.min_size)')
    } finally {
      rmSync(config, {force: true})
    }
  })

  it('rejects an unknown path (exit 1) and a bad --client-ip (exit 2)', async () => {
    const missing = await mb(['metalink', 'iso/none.iso'], {env})
    expect(missing.code).to.equal(1)
    expect(missing.stderr).to.include('iso/none.iso is not in the origin index')
    const bad = await mb(['metalink', 'iso/a.iso', '--client-ip', 'not-an-ip'], {env})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.include('--client-ip not-an-ip is not an IPv4 or IPv6 address')
  })
})
