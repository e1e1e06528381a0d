/**
 * Honest mirror lists through a real `mb serve` (a child process, on the configured backend):
 * a mirror whose last scan saw an outdated copy is listed as "outdated copy: N bytes, origin
 * M" in the HTML and JSON mirror list and in `mb file lookup`, not left out; a mirror or client
 * without a known location says "location unknown"; and no explanation repeats its reason.
 */
import {expect} from 'chai'
import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'

describe(`honest mirror lists (${backend})`, function () {
  this.timeout(180_000)
  let database: TestDatabase
  let root: string
  let serve: ServeProcess
  let env: Record<string, string>
  let mtime: number

  before(async () => {
    database = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-honest-root-'))
    writeFileSync(join(root, 'big.iso'), Buffer.alloc(10_000, 'b'))
    mtime = Math.floor(statSync(join(root, 'big.iso')).mtimeMs / 1000)
    const db = await database.open()
    try {
      const scanned = {last_scan_ok_at: new Date()}
      await db.db
        .insertInto('mirror')
        .values([
          {id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/pub/', country: 'GB', continent: 'EU', ...scanned},
          {id: 2, identifier: 'de.example.org', http_url: 'http://de.example.org/', country: 'DE', continent: 'EU', ...scanned},
          {id: 3, identifier: 'nowhere.example.org', http_url: 'http://nowhere.example.org/', ...scanned},
          {id: 4, identifier: 'de-only.example.org', http_url: 'http://de-only.example.org/', country: 'DE', continent: 'EU', country_only: true, ...scanned},
        ] as any)
        .execute()
      const file = await db.db
        .insertInto('file')
        .values({path: 'big.iso', size: 10_000, mtime, mirrors: [1, 3, 4]})
        .returning('id')
        .executeTakeFirstOrThrow()
      await db.db.insertInto('mirror_file_stale').values({mirror_id: 2, file_id: file.id, size: 9000, mtime}).execute()
    } finally {
      await db.close()
    }
    env = {...database.env, MB_ROOT: root, MB_GEOIP: GEOIP}
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--no-stats'], database.env)
  })

  after(async () => {
    await serve?.stop()
    await database?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('lists the outdated copy in the JSON mirror list, with the exact words', async () => {
    const res = await request(serve.port, '/big.iso.mirrorlist', {headers: {'X-Forwarded-For': GB, Accept: 'application/json'}})
    expect(res.status).to.equal(200)
    const list = JSON.parse(res.body.toString())
    expect(list.realms.map((g: any) => [g.realm, g.mirrors.map((m: any) => [m.identifier, m.country])])).to.deep.equal([
      ['country', [['gb.example.org', 'GB']]],
      ['world', [['nowhere.example.org', null]]],
    ])
    expect(list.outdated).to.deep.equal([
      {identifier: 'de.example.org', country: 'DE', continent: 'EU', url: 'http://de.example.org/big.iso', reason: 'stale', detail: 'outdated copy: 9000 bytes, origin 10000'},
    ])
  })

  it('says the same in the HTML list, and "location unknown" for a mirror and a client without one', async () => {
    const html = (await request(serve.port, '/big.iso.mirrorlist', {headers: {'X-Forwarded-For': GB}})).body.toString()
    expect(html).to.include(
      '<tr><td>de.example.org</td><td>DE</td><td><a href="http://de.example.org/big.iso">http://de.example.org/big.iso</a></td><td>outdated copy: 9000 bytes, origin 10000</td></tr>',
    )
    expect(html).to.include('<tr><td>nowhere.example.org</td><td>location unknown</td><td>2</td><td><a href="http://nowhere.example.org/big.iso">http://nowhere.example.org/big.iso</a></td></tr>')
    expect(html).to.include('<p>Your address: 81.2.69.142 (GB, EU)</p>')
    const own = (await request(serve.port, '/big.iso.mirrorlist')).body.toString()
    expect(own).to.include('<p>Your address: 127.0.0.1 (location unknown)</p>')
  })

  it('mb file lookup names the outdated copy and each reason once', async () => {
    const text = await mb(['file', 'lookup', 'big.iso', '--client-ip', GB], {env})
    expect(text.code, text.stderr).to.equal(0)
    const lines = text.stdout.split('\n')
    expect(lines).to.include('outdated copies (size or mtime differ from the origin; not used until updated):')
    expect(lines).to.include(`de.example.org\toutdated copy: 9000 bytes, origin 10000\t${new Date(mtime * 1000).toISOString().replace('.000Z', 'Z')}`)
    expect(lines).to.include('client 81.2.69.142 (GB, EU) over HTTP:')
    expect(lines).to.include('de.example.org\tstale\toutdated copy: 9000 bytes, origin 10000')
    expect(lines).to.include('nowhere.example.org\tlocation unknown\thttp://nowhere.example.org/big.iso')
    const json = await mb(['file', 'lookup', 'big.iso', '--client-ip', GB, '--json'], {env})
    expect(json.json().files[0].explain.excluded).to.deep.equal([
      {mirror: 'de-only.example.org', reason: 'country_only', detail: 'mirror in DE, client in GB'},
      {mirror: 'de.example.org', reason: 'stale', detail: 'outdated copy: 9000 bytes, origin 10000'},
    ])
    const unknown = await mb(['file', 'lookup', 'big.iso', '--client-ip', '10.0.0.1', '--json'], {env})
    expect(unknown.json().files[0].explain.excluded[0]).to.deep.equal({mirror: 'de-only.example.org', reason: 'country_only', detail: 'mirror in DE, client location unknown'})
    const unknownText = await mb(['file', 'lookup', 'big.iso', '--client-ip', '10.0.0.1'], {env})
    expect(unknownText.stdout.split('\n')).to.include('client 10.0.0.1 (location unknown) over HTTP:')
  })
})
