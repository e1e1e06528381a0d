// @store-independent: HTTPS certificates of mirrors, the probe
/**
 * HTTPS that works, and no unprobed trust, through the compiled CLI and `mb serve`:
 * - a mirror whose HTTPS has a self-signed certificate while its HTTP works is probed by
 *   `mb mirror add` (both base URLs), recorded per scheme, and never gets an HTTPS client;
 * - a second mirror's certificate is signed by a test CA that the `mb` processes trust
 *   (NODE_EXTRA_CA_CERTS), so HTTPS clients have somewhere to go;
 * - a broken mirror added with `--no-probe` gets no traffic under `select.unprobed: skip`,
 *   and gets traffic under `use`; `mb mirror list` says which applies;
 * - `mb mirror enable` probes (and `--no-probe` skips).
 * Real servers (node's http/https on loopback), real processes, both stores.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import https from 'node:https'
import type {AddressInfo} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {closedPort, httpServer, selfSignedServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'
import {headerLines, request, startServe, type ServeProcess} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const GB = '81.2.69.142'
const PATH = 'pub/big.iso'

/** A test CA and a certificate it signed for 127.0.0.1 / localhost, written by the openssl CLI into `dir`. */
function caSignedCert(dir: string): {ca: string; key: Buffer; cert: Buffer} {
  const run = (args: string[]) => execFileSync('openssl', args, {cwd: dir, stdio: ['ignore', 'ignore', 'pipe']})
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes']
  run(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=mb test CA'])
  run(['req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=localhost'])
  writeFileSync(join(dir, 'leaf.ext'), 'subjectAltName=IP:127.0.0.1,DNS:localhost\n')
  run(['x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext'])
  return {ca: join(dir, 'ca.pem'), key: readFileSync(join(dir, 'leaf.key')), cert: readFileSync(join(dir, 'leaf.pem'))}
}

async function httpsServer(tls: {key: Buffer; cert: Buffer}, files: Record<string, Buffer>): Promise<{port: number; close(): Promise<void>}> {
  const server = https.createServer(tls, staticHandler(files))
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** The `Link: rel=duplicate` alternatives, sorted: mirrors only (a redirect never names the origin). */
function duplicates(res: Awaited<ReturnType<typeof request>>): string[] {
  const links = headerLines(res, 'link')
    .filter((l) => l.includes('rel=duplicate'))
    .map((l) => /^<([^>]+)>/.exec(l)![1])
  expect(links.join(' ')).to.not.match(/\/_origin\//)
  return links.sort()
}

describe(`HTTPS per scheme and unprobed mirrors, through mb mirror add and mb serve (${backend})`, function () {
  let dir: string
  let root: string
  let tdb: TestDatabase
  let env: Record<string, string>
  const config: Record<'use' | 'skip' | 'loop', string> = {use: '', skip: '', loop: ''}
  const servers: Array<{close(): Promise<void>}> = []
  const url: Record<string, {http: string; https?: string}> = {}
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'openssl', 'openssl')
    dir = mkdtempSync(join(tmpdir(), 'mb-probe-https-'))
    root = join(dir, 'root')
    mkdirSync(join(root, 'pub'), {recursive: true})
    const body = Buffer.alloc(20_000, 'b')
    writeFileSync(join(root, PATH), body)
    const files = {[PATH]: body}
    const tls = caSignedCert(dir)

    const badHttp: TestServer = await httpServer(staticHandler(files))
    const badHttps: TestServer = await selfSignedServer(staticHandler(files))
    const goodHttp: TestServer = await httpServer(staticHandler(files))
    const goodHttps = await httpsServer(tls, files)
    servers.push(badHttp, badHttps, goodHttp, goodHttps)
    url['bad.test'] = {http: `http://127.0.0.1:${badHttp.port}/`, https: `https://127.0.0.1:${badHttps.port}/`}
    url['good.test'] = {http: `http://127.0.0.1:${goodHttp.port}/`, https: `https://127.0.0.1:${goodHttps.port}/`}
    url['broken.test'] = {http: `http://127.0.0.1:${await closedPort()}/`}

    const probe = 'probe:\n  timeout: 3\n  connect_timeout: 2\n'
    config.use = join(dir, 'use.yaml')
    writeFileSync(config.use, probe)
    config.skip = join(dir, 'skip.yaml')
    writeFileSync(config.skip, `${probe}select:\n  unprobed: skip\n`)
    config.loop = join(dir, 'loop.yaml')
    writeFileSync(config.loop, `${probe}serve:\n  probe_interval: 300\n`)

    tdb = await createTestDatabase()
    env = {...tdb.env, NODE_EXTRA_CA_CERTS: tls.ca}
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(servers.map((s) => s.close()))
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  async function row(identifier: string) {
    const database = await tdb.open()
    try {
      const m = await database.db.selectFrom('mirror').select(['id', 'up', 'http_up', 'https_up']).where('identifier', '=', identifier).executeTakeFirstOrThrow()
      const probes = await database.db.selectFrom('mirror_probe').select(['protocol', 'ok', 'reason']).where('mirror_id', '=', m.id).orderBy('protocol').execute()
      return {...m, probes}
    } finally {
      await database.close()
    }
  }

  it('mb mirror add probes the http and https base URLs and reports the result; --no-probe skips it', async () => {
    const bad = await mb(['mirror', 'add', 'bad.test', '--http-url', url['bad.test'].http, '--https-url', url['bad.test'].https!, '--country', 'GB', '--config', config.use], {env})
    expect(bad.code, bad.stderr).to.equal(0)
    expect(bad.stdout).to.match(/^up: +yes$/m)
    expect(bad.stdout.trim().split('\n').at(-1)).to.equal('Probe: up (http up, https down; tls_error on https/ipv4). HTTPS clients are not sent to it while its HTTPS fails.')

    const good = await mb(['mirror', 'add', 'good.test', '--http-url', url['good.test'].http, '--https-url', url['good.test'].https!, '--country', 'GB', '--json', '--config', config.use], {env})
    expect(good.code, good.stderr).to.equal(0)
    expect(good.json().probe).to.include({probed: true, up: true, http_up: true, https_up: true})
    expect(good.json().probe.checks.map((c: any) => `${c.key} ${c.reason} ${c.http_status}`)).to.deep.equal(['http/ipv4 ok 200', 'https/ipv4 ok 200'])

    const broken = await mb(['mirror', 'add', 'broken.test', '--http-url', url['broken.test'].http, '--country', 'GB', '--no-probe', '--json', '--config', config.use], {env})
    expect(broken.code, broken.stderr).to.equal(0)
    expect(broken.json()).to.include({identifier: 'broken.test', up: true})
    expect(broken.json().probe).to.deep.equal({probed: false, reason: 'not probed (--no-probe)'})

    expect(await row('bad.test')).to.deep.include({
      up: true,
      http_up: true,
      https_up: false,
      probes: [
        {protocol: 'http', ok: true, reason: 'ok'},
        {protocol: 'https', ok: false, reason: 'tls_error'},
      ],
    })
    expect(await row('broken.test')).to.deep.include({up: true, http_up: null, https_up: null, probes: []})

    // The file, held by all three (as a scan would record it).
    const database = await tdb.open()
    try {
      const ids = (await database.db.selectFrom('mirror').select('id').execute()).map((m) => m.id)
      const stat = statSync(join(root, PATH))
      await database.db
        .insertInto('file')
        .values({path: PATH, size: stat.size, mtime: Math.floor(stat.mtimeMs / 1000), mirrors: ids})
        .execute()
    } finally {
      await database.close()
    }
  })

  it('mb mirror list says per scheme what is down, which mirrors are unprobed and whether they are used', async () => {
    const list = async (cfg: string) => Object.fromEntries((await mb(['mirror', 'list', '--json', '--config', cfg], {env})).json().map((m: any) => [m.identifier, m.probe]))
    const used = await list(config.use)
    expect(used['bad.test']).to.include({state: 'up', http: 'up', https: 'down', unprobed: null, reason: 'tls_error (https/ipv4)'})
    expect(used['broken.test']).to.include({state: 'unknown', http: 'unprobed', https: null, unprobed: 'used'})
    expect((await list(config.loop))['broken.test']).to.include({unprobed: 'skipped'}) // a probe loop is configured

    const table = await mb(['mirror', 'list', '--config', config.skip], {env})
    const [header, ...rows] = table.stdout
      .trim()
      .split('\n')
      .map((l) => l.split('\t'))
    const probe = header.indexOf('probe')
    const cells = Object.fromEntries(rows.map((c) => [c[0], c[probe]]))
    expect(cells).to.deep.equal({'bad.test': 'up, https down', 'broken.test': 'unprobed (skipped)', 'good.test': 'up'})
  })

  it('mb file lookup --explain names scheme_down and unprobed', async () => {
    const lookup = await mb(['file', 'lookup', PATH, '--client-ip', GB, '--https', '--geoip', GEOIP, '--json', '--config', config.skip], {env})
    expect(lookup.code, lookup.stderr).to.equal(0)
    const e = lookup.json().files[0].explain
    expect(e.ranked.map((c: any) => c.url)).to.deep.equal([`${url['good.test'].https}${PATH}`])
    expect(e.excluded.map((x: any) => [x.mirror, x.reason])).to.deep.equal([
      ['bad.test', 'scheme_down'],
      ['broken.test', 'no_https'],
    ])
    expect(e.excluded[0].detail).to.equal("HTTPS client and the mirror's HTTPS failed its probes (its HTTP works); `mb probe bad.test` shows why")

    const plain = await mb(['file', 'lookup', PATH, '--client-ip', GB, '--geoip', GEOIP, '--config', config.skip], {env})
    expect(plain.stdout).to.match(/^broken\.test\tunprobed\tnever probed, and select\.unprobed is skip \(`mb probe broken\.test` probes it\)$/m)
  })

  it('mb serve: an HTTPS client never goes to the mirror whose HTTPS fails; the unprobed broken one gets no traffic under skip', async () => {
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--config', config.skip], env)
    const res = await request(serve.port, `/${PATH}`, {headers: {'X-Forwarded-For': GB, 'X-Forwarded-Proto': 'https'}})
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.equal(`${url['good.test'].https}${PATH}`)
    expect(duplicates(res)).to.deep.equal([`${url['good.test'].https}${PATH}`])
    const plain = await request(serve.port, `/${PATH}`, {headers: {'X-Forwarded-For': GB}})
    expect(plain.status).to.equal(302)
    expect(duplicates(plain)).to.deep.equal([`${url['bad.test'].http}${PATH}`, `${url['good.test'].http}${PATH}`].sort())

    // Probes that accept the certificate (--insecure) bring its HTTPS up after ok_threshold (2)
    // successes; the running server picks that up with its next snapshot refresh.
    for (let i = 0; i < 2; i++) expect((await mb(['probe', 'bad.test', '--insecure', '--config', config.skip], {env})).code).to.equal(0)
    expect(await row('bad.test')).to.deep.include({http_up: true, https_up: true})
    const both = [`${url['bad.test'].https}${PATH}`, `${url['good.test'].https}${PATH}`].sort()
    let links: string[] = []
    for (let attempt = 0; attempt < 100 && links.join() !== both.join(); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      links = duplicates(await request(serve.port, `/${PATH}`, {headers: {'X-Forwarded-For': GB, 'X-Forwarded-Proto': 'https'}}))
    }
    expect(links).to.deep.equal(both)
    await serve.stop()
    serve = undefined

    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--config', config.use], env)
    const used = await request(serve.port, `/${PATH}`, {headers: {'X-Forwarded-For': GB}})
    expect(duplicates(used)).to.deep.equal([`${url['bad.test'].http}${PATH}`, `${url['broken.test'].http}${PATH}`, `${url['good.test'].http}${PATH}`].sort())
    await serve.stop()
    serve = undefined
  })

  it('mb mirror enable probes the mirror (a failed probe is reported, not an error); --no-probe skips it', async () => {
    expect((await mb(['mirror', 'disable', 'broken.test'], {env})).code).to.equal(0)
    const skipped = await mb(['mirror', 'enable', 'broken.test', '--no-probe', '--config', config.skip], {env})
    expect(skipped.code, skipped.stderr).to.equal(0)
    expect(skipped.stdout.trim().split('\n')).to.deep.equal([
      'Mirror broken.test enabled.',
      'Not probed (--no-probe): it gets no redirects until a probe finds it up (select.unprobed: skip; `mb probe broken.test` probes it).',
    ])
    expect((await row('broken.test')).probes).to.deep.equal([])

    const enabled = await mb(['mirror', 'enable', 'broken.test', '--json', '--config', config.use], {env})
    expect(enabled.code, enabled.stderr).to.equal(0)
    expect(enabled.json()).to.include({enabled: true, up: false, status_reason: 'refused'})
    expect(enabled.json().probe).to.include({probed: true, up: false, http_up: false, https_up: null})
    expect(await row('broken.test')).to.deep.include({up: false, http_up: false, https_up: null, probes: [{protocol: 'http', ok: false, reason: 'refused'}]})

    const human = await mb(['mirror', 'enable', 'broken.test', '--config', config.use], {env})
    expect(human.code, human.stderr).to.equal(0)
    expect(human.stdout).to.match(/^Mirror broken\.test was already enabled\.\nProbe: down \(http down; refused on http\/ipv4\)\. The mirror is registered but gets no redirects/)

    const lookup = await mb(['file', 'lookup', PATH, '--client-ip', GB, '--geoip', GEOIP, '--json', '--config', config.use], {env})
    expect(lookup.json().files[0].explain.excluded).to.deep.include({mirror: 'broken.test', reason: 'down', detail: 'the last probe failed'})
  })
})
