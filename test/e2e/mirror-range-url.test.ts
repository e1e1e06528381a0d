// @store-independent: nginx mirrors without Range, the probe and the redirects
/**
 * Two ways a mirror fails a download, against real nginx mirrors through the compiled CLI:
 *
 * - a mirror that ignores Range (nginx `max_ranges 0` answers 200 with the whole file): the
 *   probe learns it (`range_ok`), `mb mirror show` and `/mirrors` name it, and `mb serve`
 *   sends requests with Range elsewhere while requests without Range may still go there;
 * - a changed base URL: `mb mirror edit --http-url` keeps the mirror out of selection with
 *   reason `url_changed` ("URL changed, awaiting scan", not "was down"), and `--rescan` scans
 *   it at once, which brings it back.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {startNginx, type RunningServer} from '../helpers/servers.js'
import {request, startServe, type ServeProcess} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'

describe(`mirrors that ignore Range, and a changed mirror URL (${backend})`, function () {
  let tdb: TestDatabase
  let root: string
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined
  let ranged: RunningServer
  let whole: RunningServer
  let moved: RunningServer

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    root = mkdtempSync(join(tmpdir(), 'mb-range-root-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'big.iso'), Buffer.alloc(20_000, 'b'))
    writeFileSync(join(root, 'pub', 'small.txt'), 'hello, mirrors\n')
    ranged = await startNginx({root, autoindex: 'html'})
    whole = await startNginx({root, autoindex: 'html', serverConfig: 'max_ranges 0;'})
    moved = await startNginx({root, autoindex: 'html'})
    nginx.push(ranged, whole, moved)
    tdb = await createTestDatabase()
    expect((await mb(['index', '--root', root], {env: tdb.env})).code).to.equal(0)
    for (const [name, server] of [
      ['ranged.test', ranged],
      ['whole.test', whole],
    ] as const) {
      const added = await mb(['mirror', 'add', name, '--http-url', server.url, '--country', 'GB'], {env: tdb.env})
      expect(added.code, added.stderr).to.equal(0)
    }
    const scanned = await mb(['scan', '--all'], {env: tdb.env})
    expect(scanned.code, scanned.stderr).to.equal(0)
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('the probe learns which mirror honours Range; mb mirror show names the one that does not', async () => {
    const probed = await mb(['probe', '--all', '--json'], {env: tdb.env})
    expect(probed.code, probed.stderr).to.equal(0)
    const show = async (name: string) => (await mb(['mirror', 'show', name, '--json'], {env: tdb.env})).json()
    expect((await show('ranged.test')).range_ok).to.equal(true)
    expect((await show('whole.test')).range_ok).to.equal(false)
    const text = await mb(['mirror', 'show', 'whole.test'], {env: tdb.env})
    expect(text.stdout).to.match(/range_ok:?\s+no: answers Range with the whole file/)
  })

  it('mb serve sends a request with Range only to a mirror that honours it; /mirrors names the other', async () => {
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32'], tdb.env)
    // Clients of 40 networks (unknown to GeoIP: both mirrors share the world pool), so that
    // rendezvous hashing sends some to each mirror when Range does not matter.
    const clients = Array.from({length: 40}, (_, i) => `${20 + i}.1.2.3`)
    const seen = new Set<string>()
    for (const ip of clients) {
      const res = await request(serve.port, '/pub/big.iso', {headers: {'X-Forwarded-For': ip, Range: 'bytes=100-'}})
      expect(res.status).to.equal(302)
      seen.add(String(res.headers['x-mb-mirror']))
      const plain = await request(serve.port, '/pub/big.iso', {headers: {'X-Forwarded-For': ip}})
      seen.add(`plain:${plain.headers['x-mb-mirror']}`)
    }
    expect(
      [...seen].filter((s) => !s.startsWith('plain:')),
      'with Range',
    ).to.deep.equal(['ranged.test'])
    expect([...seen].filter((s) => s.startsWith('plain:')).sort(), 'without Range both take clients').to.deep.equal(['plain:ranged.test', 'plain:whole.test'])

    const page = await request(serve.port, '/mirrors', {headers: {Accept: 'application/json'}})
    const rows = JSON.parse(page.body.toString()).mirrors
    expect(Object.fromEntries(rows.map((r: {name: string; range: boolean | null}) => [r.name, r.range]))).to.deep.equal({'ranged.test': true, 'whole.test': false})
    const html = (await request(serve.port, '/mirrors')).body.toString()
    expect(html).to.include('<th>Range</th>')
    expect(html).to.match(/whole\.test<\/a><\/td>.*<td class="down"[^>]*>no<\/td>/)
    await serve.stop()
    serve = undefined
  })

  it('a changed URL keeps the mirror out ("URL changed, awaiting scan") until --rescan scans it', async () => {
    const lookup = async () => (await mb(['file', 'lookup', 'pub/big.iso', '--client-ip', GB, '--json'], {env: tdb.env})).json().files[0].explain
    const edited = await mb(['mirror', 'edit', 'ranged.test', '--http-url', moved.url], {env: tdb.env})
    expect(edited.code, edited.stderr).to.equal(0)
    const excluded = (await lookup()).excluded.find((x: {mirror: string}) => x.mirror === 'ranged.test')
    expect(excluded.reason).to.equal('url_changed')
    expect(excluded.detail).to.match(/^URL changed at .*, awaiting scan \(`mb scan ranged\.test`\)$/)
    const text = await mb(['file', 'lookup', 'pub/big.iso', '--client-ip', GB], {env: tdb.env})
    expect(text.stdout).to.include('url_changed')
    expect(text.stdout).to.not.include('was down')
    expect((await mb(['mirror', 'show', 'ranged.test', '--json'], {env: tdb.env})).json().url_changed_at).to.be.a('string')

    const rescan = await mb(['mirror', 'edit', 'ranged.test', '--rescan', '--json'], {env: tdb.env})
    expect(rescan.code, rescan.stderr).to.equal(0)
    expect(rescan.json().scan).to.include({ok: true, mirror: 'ranged.test'})
    expect(rescan.json().url_changed_at).to.equal(null)
    const after = await lookup()
    expect(after.excluded.map((x: {mirror: string}) => x.mirror)).to.not.include('ranged.test')
    expect(after.ranked.map((c: {mirror: string}) => c.mirror)).to.include('ranged.test')

    // Both in one command: the edit, then its scan.
    const both = await mb(['mirror', 'edit', 'ranged.test', '--http-url', ranged.url, '--rescan'], {env: tdb.env})
    expect(both.code, both.stderr).to.equal(0)
    expect(both.stdout).to.include('Updated mirror ranged.test: http_url.')
    expect(both.stdout).to.match(/Scanned ranged\.test: ok via http/)
    expect((await lookup()).ranked.map((c: {mirror: string}) => c.mirror)).to.include('ranged.test')
  })
})
