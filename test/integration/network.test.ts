// @store-independent: metrics and the overview page in Chromium
/**
 * The mirror network as a whole: per-mirror series on `--metrics-listen` after a probe that
 * takes one mirror down and scans (one good, one failing), and the overview page `GET /mirrors`
 * (JSON, bad input, and headless Chromium: map and table drawn, no external request, a
 * restricted and a disabled mirror absent).
 */
import {spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {PNG} from 'pngjs'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {parsePrometheus, type PromFamily} from '../helpers/prometheus.js'
import {closedPort} from '../helpers/probe-servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

/** A proxy that counts every request Chromium makes and forwards those to `target` (host:port). */
async function countingProxy(target: string): Promise<{port: number; seen: string[]; close(): Promise<void>}> {
  const seen: string[] = []
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '')
    const url = new URL(req.url ?? '/', 'http://invalid')
    if (url.host !== target) {
      res.writeHead(502).end()
      return
    }
    // A new connection per request (agent: false): an idle keep-alive connection of the
    // process's shared agent may be closed by mb serve just as it is reused, a reset that
    // would reach Chromium as a 502 on a loaded machine.
    const upstream = http.request({host: url.hostname, port: url.port, path: url.pathname + url.search, method: req.method, headers: req.headers, agent: false}, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers)
      r.on('error', () => res.destroy())
      r.pipe(res)
    })
    upstream.on('error', () => (res.headersSent ? res.destroy() : res.writeHead(502).end()))
    req.on('error', () => upstream.destroy())
    req.pipe(upstream)
  })
  // Chromium closes its connections when it exits: a reset then is not the test's failure.
  server.on('clientError', (_error, socket) => socket.destroy())
  server.on('connect', (req, socket) => {
    seen.push(`CONNECT ${req.url}`)
    socket.on('error', () => {})
    socket.end('HTTP/1.1 502 Bad Gateway\r\n\r\n')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as {port: number}).port
  return {port, seen, close: () => new Promise((resolve) => server.close(() => resolve()))}
}

/** Runs Chromium without blocking this process (the counting proxy answers from it). */
function chromium(args: string[]): Promise<{status: number | null; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn('chromium', args, {stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
    child.on('error', reject)
    child.on('close', (status) => {
      clearTimeout(timer)
      resolve({status, stdout, stderr})
    })
  })
}

describe(`the mirror network: per-mirror metrics and the overview page (${backend})`, function () {
  this.timeout(300_000)
  let t: TestDatabase
  let dir: string
  let root: string
  let nginx: RunningServer
  let serve: ServeProcess
  let metricsUrl: string

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-network-'))
    root = join(dir, 'root')
    mkdirSync(join(root, 'pub'), {recursive: true})
    mkdirSync(join(root, 'other'), {recursive: true})
    writeFileSync(join(root, 'pub/big.bin'), 'x'.repeat(10_000))
    writeFileSync(join(root, 'pub/small.txt'), 'hello')
    writeFileSync(join(root, 'other/c.txt'), 'c'.repeat(100))
    nginx = await startNginx({root, autoindex: 'json'})
    const dead = await closedPort()
    const run = async (args: string[]) => {
      const r = await mb(args, {env: t.env})
      expect(r.code, `mb ${args.join(' ')}: ${r.stderr}`).to.equal(0)
      return r
    }
    await run(['index', '--root', root])
    await run(['mirror', 'add', 'good.test', '--http-url', nginx.url, '--country', 'DE', '--lat', '52.5', '--lon', '13.4', '--no-probe'])
    await run(['mirror', 'add', 'dead.test', '--http-url', `http://127.0.0.1:${dead}/`, '--country', 'US', '--lat', '40', '--lon=-100', '--no-probe'])
    await run(['mirror', 'add', 'campus.test', '--http-url', 'http://campus.test/', '--country', 'FR', '--client-prefix', '10.0.0.0/8', '--no-probe'])
    await run(['mirror', 'add', 'off.test', '--http-url', 'http://off.test/', '--country', 'SE', '--disabled', '--no-probe'])
    // The probe takes dead.test down; the scans: good.test matches every file, dead.test fails.
    await mb(['probe', 'good.test', 'dead.test'], {env: t.env})
    await run(['scan', 'good.test'])
    await mb(['scan', 'dead.test'], {env: t.env})
    serve = await startServe(['--root', root, '--metrics-listen', '127.0.0.1:0', '--log-level', 'info'], t.env)
    metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
  })

  after(async () => {
    await serve?.stop()
    await nginx?.stop()
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const family = (families: PromFamily[], name: string) => families.find((f) => f.name === name)?.metrics ?? []
  const byMirror = (families: PromFamily[], name: string) => Object.fromEntries(family(families, name).map((s) => [s.labels!.mirror, Number(s.value)]))

  it('exposes per-mirror series after a probe and the scans', async () => {
    const redirect = await request(serve.port, '/pub/big.bin')
    expect(redirect.status).to.equal(302)
    expect(redirect.headers['x-mb-mirror']).to.equal('good.test')
    const text = await (await fetch(`${metricsUrl}/metrics`)).text()
    const families = parsePrometheus(text)
    expect(family(families, 'mb_mirror_up').map((s) => `${s.labels!.mirror} ${s.labels!.protocol}/${s.labels!.family} ${s.value}`)).to.have.members(['good.test http/ipv4 1', 'dead.test http/ipv4 0'])
    expect(byMirror(families, 'mb_mirror_files')).to.deep.equal({'good.test': 3, 'dead.test': 0, 'campus.test': 0, 'off.test': 0})
    expect(byMirror(families, 'mb_mirror_files_ratio')).to.deep.equal({'good.test': 1, 'dead.test': 0, 'campus.test': 0, 'off.test': 0})
    expect(byMirror(families, 'mb_mirror_bytes_ratio')).to.deep.equal({'good.test': 1, 'dead.test': 0, 'campus.test': 0, 'off.test': 0})
    expect(byMirror(families, 'mb_mirror_redirects_total')).to.deep.equal({'good.test': 1})
    const scanAge = byMirror(families, 'mb_mirror_scan_age_seconds')
    expect(Object.keys(scanAge)).to.deep.equal(['good.test'])
    expect(scanAge['good.test']).to.be.within(0, 600)
    const probeAge = byMirror(families, 'mb_mirror_probe_age_seconds')
    expect(Object.keys(probeAge).sort()).to.deep.equal(['dead.test', 'good.test'])
    expect(probeAge['dead.test']).to.be.within(0, 600)
    expect(family(families, 'mb_mirror_probe_failures_total').map((s) => `${s.labels!.mirror} ${s.labels!.reason} ${s.value}`)).to.deep.equal(['dead.test refused 1'])
    expect(family(families, 'mb_mirror_scan_failures_total').map((s) => `${s.labels!.mirror} ${s.labels!.reason} ${s.value}`)).to.deep.equal(['dead.test refused 1'])
  })

  it('answers the overview as JSON without restricted or disabled mirrors or admin fields', async () => {
    const res = await request(serve.port, '/mirrors', {headers: {accept: 'application/json'}})
    expect(res.status).to.equal(200)
    expect(res.headers['content-type']).to.equal('application/json; charset=utf-8')
    expect(res.headers['cache-control']).to.equal('public, max-age=60')
    const overview = JSON.parse(res.body.toString())
    expect(overview.path).to.equal('')
    expect(overview.total).to.equal(2)
    expect(overview.mirrors.map((m: any) => m.name)).to.deep.equal(['dead.test', 'good.test'])
    const good = overview.mirrors[1]
    expect(good).to.deep.include({
      country: 'DE',
      continent: 'EU',
      latitude: 52.5,
      longitude: 13.4,
      protocols: ['http'],
      urls: {http: nginx.url.endsWith('/') ? nginx.url : `${nginx.url}/`},
      http: 'up',
      https: null,
      health: 'up',
      files: 3,
      origin_files: 3,
      share: 1,
      score: 100,
    })
    expect(good.last_scan).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    expect(overview.mirrors[0]).to.deep.include({health: 'down', http: 'down', share: 0, files: 0, origin_files: 3})
    expect(res.body.toString()).to.not.match(/admin|prefix|campus|off\.test/)
    const sub = JSON.parse((await request(serve.port, '/mirrors?path=pub/', {headers: {accept: 'application/json'}})).body.toString())
    expect(sub.path).to.equal('pub/')
    expect(sub.mirrors.map((m: any) => [m.name, m.files, m.origin_files])).to.deep.equal([
      ['dead.test', 0, 2],
      ['good.test', 2, 2],
    ])
  })

  it('gives the same overview in the terminal with mb mirror list --path', async () => {
    const page = JSON.parse((await request(serve.port, '/mirrors?path=pub', {headers: {accept: 'application/json'}})).body.toString())
    const json = await mb(['mirror', 'list', '--path', 'pub/', '--json'], {env: t.env})
    expect(json.code, json.stderr).to.equal(0)
    expect(json.json()).to.deep.equal(page)
    const plain = await mb(['mirror', 'list', '--path', '/pub'], {env: t.env})
    expect(plain.stdout.split('\n')[0]).to.equal('name\tcountry\tcontinent\tprotocols\thttp\thttps\tlast_scan\tshare\tfiles\tscore')
    expect(plain.stdout).to.match(/\ngood\.test\tDE\tEU\thttp\tup\t-\t\S+Z\t100\.0%\t2\/2\t100\n/)
    const missing = await mb(['mirror', 'list', '--path', 'nowhere'], {env: t.env})
    expect(missing.code).to.equal(1)
    expect(missing.stderr).to.equal('Error: No indexed file lies under /nowhere/. Give a directory of the tree (relative to the root), or run `mb index` first.\n')
    const bad = await mb(['mirror', 'list', '--path', '../etc'], {env: t.env})
    expect(bad.code).to.equal(2)
  })

  it('pages the overview with ?page and ?page_size, and refuses bad values', async () => {
    const json = async (query: string) => JSON.parse((await request(serve.port, `/mirrors?${query}`, {headers: {accept: 'application/json'}})).body.toString())
    const second = await json('page=2&page_size=1')
    expect([second.total, second.page, second.page_size, second.pages, second.mirrors.map((m: any) => m.name)]).to.deep.equal([2, 2, 1, 2, ['good.test']])
    expect((await json('page_size=1')).mirrors.map((m: any) => m.name)).to.deep.equal(['dead.test'])
    expect((await json('path=pub/&page=3&page_size=1')).mirrors).to.deep.equal([])
    expect((await json('page=1')).page_size).to.equal(50)
    const html = (await request(serve.port, '/mirrors?page=1&page_size=1')).body.toString()
    expect(html).to.contain('Page 1 of 2 · <a rel="next" href="?page=2&amp;page_size=1">next</a>')
    expect((await request(serve.port, '/mirrors')).body.toString()).to.match(/<a href="http:\/\/127\.0\.0\.1:\d+\/">http<\/a>/)
    for (const bad of ['page=0', 'page=-1', 'page=x', 'page_size=0', 'page_size=1001', 'page=1&page_size=1e3']) {
      expect((await request(serve.port, `/mirrors?${bad}`)).status, bad).to.equal(400)
    }
  })

  it('refuses a huge ?path and a path outside the tree cleanly', async () => {
    const huge = await request(serve.port, `/mirrors?path=${'a/'.repeat(2000)}`)
    expect(huge.status).to.equal(400)
    expect(huge.body.toString()).to.equal('Bad request: ?path= is longer than 1024 bytes.\n')
    const outside = await request(serve.port, '/mirrors?path=../../etc')
    expect(outside.status).to.equal(400)
    expect((await request(serve.port, '/mirrors?path=%2e%2e/etc/')).status).to.equal(400)
    const missing = await request(serve.port, '/mirrors?path=nowhere/')
    expect(missing.status).to.equal(404)
    expect(missing.body.toString()).to.equal('Not found: /nowhere/ is not a directory of the tree.\n')
    expect((await request(serve.port, '/mirrors?path=pub/big.bin')).status).to.equal(404)
    const malformed = await request(serve.port, '/mirrors?path=%zz')
    expect(malformed.status).to.equal(400)
    expect(malformed.body.toString()).to.equal('Bad request: ?path= is not percent-encoded UTF-8.\n')
  })

  it('renders the map and the table in headless Chromium without any external request', async function () {
    requireBinary(this, 'chromium', 'chromium')
    const target = `127.0.0.1:${serve.port}`
    const proxy = await countingProxy(target)
    try {
      const shot = join(dir, 'mirrors.png')
      const common = (profile: string) => [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
        `--user-data-dir=${join(dir, profile)}`, // fresh profiles: no cached page
        `--proxy-server=http://127.0.0.1:${proxy.port}`,
        '--proxy-bypass-list=<-loopback>',
        '--window-size=1000,800',
        '--force-device-scale-factor=1',
      ]
      const page = `http://${target}/mirrors`
      const dom = await chromium([...common('profile-dom'), '--dump-dom', page])
      expect(dom.status, dom.stderr).to.equal(0)
      expect(dom.stdout.match(/<circle class="marker /g), dom.stdout).to.have.length(2)
      expect(dom.stdout).to.contain('<circle class="marker up" cx="386.8" cy="75" r="6" fill="#1a9641"')
      expect(dom.stdout).to.contain('<circle class="marker down" cx="160" cy="100" r="6" fill="#d7191c"')
      expect(dom.stdout.match(/<tr><td>/g)).to.have.length(2)
      expect(dom.stdout).to.not.match(/campus\.test|off\.test/)
      const res = await chromium([...common('profile-shot'), `--screenshot=${shot}`, page])
      expect(res.status, res.stderr).to.equal(0)
      const png = PNG.sync.read(readFileSync(shot))
      // The map starts at the body margin (1.5em = 24 px) below the heading and paragraph;
      // find the up marker's colour near where it is drawn, and the land colour.
      const colour = (r: number, g: number, b: number) => {
        let n = 0
        for (let i = 0; i < png.data.length; i += 4) if (Math.abs(png.data[i] - r) < 8 && Math.abs(png.data[i + 1] - g) < 8 && Math.abs(png.data[i + 2] - b) < 8) n += 1
        return n
      }
      expect(colour(0x1a, 0x96, 0x41)).to.be.greaterThan(60) // the green marker (r=6) and its legend dot
      expect(colour(0xd7, 0x19, 0x1c)).to.be.greaterThan(60) // the red marker
      expect(colour(0xf4, 0xf1, 0xe8)).to.be.greaterThan(20_000) // land
      // Besides Chromium's own service traffic (time, component updates, accounts: Google
      // hosts, made with or without a page), every request went to mb serve itself, and only
      // for the page (twice: DOM, screenshot).
      const own = /^(CONNECT |http:\/\/)[^/]*\.(google\.com|googleapis\.com|gvt1\.com)(:\d+)?(\/|$)/
      expect(proxy.seen.filter((u) => !own.test(u))).to.deep.equal([page, page])
      // Nothing is loaded from elsewhere: no src, no stylesheet or icon link; the mirrors' own
      // URLs are plain anchors (<a href>), which load nothing until followed.
      expect(dom.stdout).to.not.match(/\bsrc="(?!data:)/)
      expect(dom.stdout.replace(/<a href="[^"]*"/g, '<a')).to.not.match(/\bhref="(?!data:)/)
    } finally {
      await proxy.close()
    }
  })
})
