/**
 * GeoIP files replaced on disk under a running `mb serve` (issue 36 item 8, as Mirrorbits
 * does): geoipupdate renames a new file over the old one, and the next lookups use it without
 * a SIGHUP; a broken file keeps the databases in use, and says so in the log.
 */
import {copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geoip/', import.meta.url))
/** Unknown to GeoLite2-City-Test, US in GeoIP2-Country-Test (MaxMind's test data). */
const CLIENT = '214.78.120.1'

/** Writes `path` as a whole: a temporary file renamed over it (what geoipupdate does). */
function replaceFile(path: string, content: Buffer | string): void {
  writeFileSync(`${path}.tmp`, content)
  renameSync(`${path}.tmp`, path)
}

/** The realm (`X-MB-Realm`) of the answer to `/a.iso` for the client. */
async function realm(port: number): Promise<string> {
  const res = await request(port, '/a.iso', {headers: {'X-Forwarded-For': CLIENT}})
  return res.status === 302 ? String(res.headers['x-mb-realm']) : `status ${res.status}`
}

async function waitFor(what: string, serve: ServeProcess, predicate: () => boolean | Promise<boolean>, ms = 30_000): Promise<void> {
  for (let waited = 0; !(await predicate()); waited += 100) {
    if (waited > ms) throw new Error(`timed out waiting for ${what}:\n${serve.output()}`)
    await sleep(100)
  }
}

describe(`mb serve reloads GeoIP files replaced on disk (${backend})`, function () {
  this.timeout(120_000)
  let tdb: TestDatabase
  let dir: string
  let serve: ServeProcess | undefined

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-geoip-watch-'))
    mkdirSync(join(dir, 'root'))
    writeFileSync(join(dir, 'root', 'a.iso'), Buffer.alloc(8000, 1))
    utimesSync(join(dir, 'root', 'a.iso'), 0, 0)
    const database = await tdb.open()
    try {
      await database.db.insertInto('mirror').values({id: 1, identifier: 'us.example', http_url: 'http://us.example/', country: 'US', continent: 'NA'}).execute()
      await database.db
        .insertInto('file')
        .values({path: 'a.iso', size: 8000, mtime: 0, mirrors: [1]})
        .execute()
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('uses a file renamed over the old one without a SIGHUP, and keeps the old one when the new is broken', async () => {
    const geo = join(dir, 'GeoLite2-City.mmdb')
    copyFileSync(join(FIXTURES, 'GeoLite2-City-Test.mmdb'), geo)
    serve = await startServe(['--root', join(dir, 'root'), '--geoip', geo, '--trusted-proxy', '127.0.0.1/32'], tdb.env)
    const s = serve
    // Unknown to the first file: the client's mirror is not in its country.
    expect(await realm(s.port)).to.not.equal('country')

    replaceFile(geo, readFileSync(join(FIXTURES, 'GeoIP2-Country-Test.mmdb')))
    await waitFor('the GeoIP reload', s, () => s.output().includes('GeoIP databases reloaded'))
    expect(await realm(s.port)).to.equal('country')
    expect(s.output()).to.include('GeoIP2-Country')

    // A broken file: logged, and the databases in use stay.
    replaceFile(geo, 'this is not a MaxMind database\n'.repeat(100))
    await waitFor('the refusal', s, () => s.output().includes('cannot be read as a MaxMind DB'))
    expect(s.output()).to.include('a GeoIP/ASN database cannot be opened; the databases in use are kept')
    expect(await realm(s.port)).to.equal('country')
    expect(s.output().split('GeoIP databases reloaded').length - 1).to.equal(1)

    // And a good file after the broken one is used again.
    replaceFile(geo, readFileSync(join(FIXTURES, 'GeoLite2-City-Test.mmdb')))
    await waitFor('the second GeoIP reload', s, () => s.output().split('GeoIP databases reloaded').length - 1 === 2)
    expect(await realm(s.port)).to.not.equal('country')
    expect(s.child.exitCode).to.equal(null)
  })
})
