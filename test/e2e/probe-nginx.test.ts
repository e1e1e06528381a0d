// @store-independent: the probe against nginx mirrors
/**
 * Probing real nginx mirrors on loopback through the compiled CLI, and the consequence in
 * `mb serve`: a mirror the probe found down gets no redirects while an up one does.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, seedFiles, type TestDatabase} from '../helpers/db.js'
import {refusedPort, startNginx, type RunningServer} from '../helpers/servers.js'
import {headerLines, request, startServe, type ServeProcess} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'

describe(`mb probe against nginx, and mb serve afterwards (${backend})`, function () {
  let tdb: TestDatabase
  let root: string
  let empty: string
  let config: string
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined
  const urls: Record<string, string> = {}

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'openssl', 'openssl')
    root = mkdtempSync(join(tmpdir(), 'mb-probe-root-'))
    empty = mkdtempSync(join(tmpdir(), 'mb-probe-empty-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'big.iso'), Buffer.alloc(20_000, 'b'))
    writeFileSync(join(root, 'pub', 'small.txt'), 'hello\n')
    writeFileSync(join(empty, 'index.html'), '<html>It works!</html>')
    config = join(root, '..', `${root.split('/').at(-1)}.yaml`)
    writeFileSync(config, 'probe:\n  timeout: 3\n  connect_timeout: 2\n')
    const healthy = await startNginx({root})
    nginx.push(healthy)
    const picky = await startNginx({root, serverConfig: 'if ($http_user_agent !~* mozilla) { return 403; }'})
    nginx.push(picky)
    const reinstalled = await startNginx({root: empty})
    nginx.push(reinstalled)
    const tls = await startNginx({root, https: true})
    nginx.push(tls)
    urls['healthy.test'] = healthy.url
    urls['picky.test'] = picky.url
    urls['reinstalled.test'] = reinstalled.url
    urls['tls.test'] = tls.url
    urls['gone.test'] = `http://127.0.0.1:${await refusedPort()}/`

    tdb = await createTestDatabase()
    const database = await tdb.open()
    try {
      const ids: number[] = []
      for (const [identifier, url] of Object.entries(urls)) {
        const values = url.startsWith('https:') ? {identifier, https_url: url} : {identifier, http_url: url}
        ids.push(
          (
            await database.db
              .insertInto('mirror')
              .values({...values, country: 'GB', continent: 'EU'})
              .returning('id')
              .executeTakeFirstOrThrow()
          ).id,
        )
      }
      await seedFiles(database, root, ['pub/big.iso', 'pub/small.txt'], ids)
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    for (const p of [root, empty, config]) if (p) rmSync(p, {recursive: true, force: true})
  })

  it('records ok, http_403, http_404 (while / answers 200), tls_error and refused', async () => {
    const result = await mb(['probe', '--json', '--config', config], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    const byName = Object.fromEntries(result.json().mirrors.map((m: any) => [m.identifier, m]))
    const first = (name: string) => byName[name].checks[0]
    expect(first('healthy.test')).to.include({key: 'http/ipv4', ok: true, reason: 'ok', http_status: 206, url: `${urls['healthy.test']}pub/small.txt`})
    expect(first('picky.test')).to.include({ok: false, reason: 'http_403', http_status: 403})
    expect(first('reinstalled.test')).to.include({ok: false, reason: 'http_404', http_status: 404})
    expect(first('tls.test')).to.include({key: 'https/ipv4', ok: false, reason: 'tls_error', http_status: null})
    expect(first('gone.test')).to.include({ok: false, reason: 'refused'})
    expect(
      Object.values(byName)
        .map((m: any) => `${m.identifier}:${m.up}`)
        .sort(),
    ).to.deep.equal(['gone.test:false', 'healthy.test:true', 'picky.test:false', 'reinstalled.test:false', 'tls.test:false'])
    const root200 = await fetch(urls['reinstalled.test'])
    expect(root200.status).to.equal(200)
  })

  it('accepts the self-signed certificate with --insecure (and goes up after ok_threshold successes)', async () => {
    let result = await mb(['probe', 'tls.test', '--insecure', '--json', '--config', config], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    expect(result.json().mirrors[0].checks[0]).to.include({ok: true, reason: 'ok', http_status: 206})
    expect(result.json().mirrors[0].up).to.equal(false) // 1 of 2 successes
    result = await mb(['probe', 'tls.test', '--insecure', '--json', '--config', config], {env: tdb.env})
    expect(result.json().mirrors[0]).to.include({up: true, was_up: false})
  })

  it('mb serve redirects only to mirrors that are up', async () => {
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32'], tdb.env)
    const res = await request(serve.port, '/pub/big.iso', {headers: {'X-Forwarded-For': GB}})
    expect(res.status).to.equal(302)
    const up = [`${urls['healthy.test']}pub/big.iso`, `${urls['tls.test']}pub/big.iso`]
    expect(up).to.include(res.headers.location)
    const links = headerLines(res, 'link')
      .filter((l) => l.includes('rel=duplicate'))
      .map((l) => /^<([^>]+)>/.exec(l)![1])
    // Mirrors only: a redirect never names the origin.
    expect(links.sort()).to.deep.equal(up.sort())
  })
})
