// @store-independent: the README walkthrough with rsync, nginx and curl
/**
 * The README's walkthrough, end to end, the way a sysadmin does it: a real `rsync --daemon` and
 * nginx on loopback serve three mirror trees (GB, SE, US) copied from an origin tree, each
 * missing different files and one holding a wrong-size copy; `mb mirror add` x3, `mb index`,
 * `mb scan --all`, `mb serve` with MaxMind's test database and `--trusted-proxy 127.0.0.1/32`;
 * then curl with X-Forwarded-For addresses in GB, SE and US.
 */
import {expect} from 'chai'
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {cpSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'
import {type RunningServer, freePort, startNginx, waitForPort} from '../helpers/servers.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const CLIENTS = {GB: '81.2.69.142', SE: '89.160.20.112', US: '216.160.83.56'} as const
const T = Date.UTC(2026, 0, 2, 3, 4, 5) / 1000

/** Origin files (all above the 4096-byte minimum) and which mirrors lack them. */
const FILES: Record<string, {size: number; missingOn: Array<keyof typeof CLIENTS>}> = {
  'pub/common.iso': {size: 9000, missingOn: []},
  'pub/gb-missing.iso': {size: 9100, missingOn: ['GB']},
  'pub/se-missing.iso': {size: 9200, missingOn: ['SE']},
  'pub/us-missing.iso': {size: 9300, missingOn: ['US']},
  'pub/nowhere.iso': {size: 9400, missingOn: ['GB', 'SE', 'US']},
  'pub/wrong-size.iso': {size: 9500, missingOn: []}, // GB's copy gets the wrong size below
  'dir with space/ça#1.iso': {size: 9600, missingOn: ['US']},
}

function content(path: string, size: number): Buffer {
  const out = Buffer.alloc(size)
  for (let i = 0; i < size; i++) out[i] = (path.charCodeAt(i % path.length) + i) & 0xff
  return out
}

function curl(args: string[]): {status: number; stdout: Buffer} {
  const r = spawnSync('curl', ['-sS', '--max-time', '20', ...args], {timeout: 30_000})
  if (r.status !== 0) throw new Error(`curl ${args.join(' ')} failed: ${r.stderr}`)
  return {status: r.status ?? -1, stdout: r.stdout}
}

describe('walkthrough: mirrors, index, scan, serve, curl (e2e)', function () {
  let dir: string
  let origin: string
  let tdb: TestDatabase
  let nginx: RunningServer | undefined
  let rsyncd: ChildProcess | undefined
  let serve: ServeProcess | undefined
  let env: Record<string, string>
  const bytes: Record<string, Buffer> = {}

  before(async function () {
    requireBinary(this, 'rsync', 'rsync')
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'curl', 'curl')
    dir = mkdtempSync(join(tmpdir(), 'mb-walkthrough-'))
    origin = join(dir, 'origin')
    for (const [path, {size}] of Object.entries(FILES)) {
      const full = join(origin, path)
      mkdirSync(join(full, '..'), {recursive: true})
      bytes[path] = content(path, size)
      writeFileSync(full, bytes[path])
      utimesSync(full, T, T)
    }
    // Three mirror trees copied from the origin, under one nginx root (gb/, se/, us/).
    const mirrors = join(dir, 'mirrors')
    for (const cc of ['GB', 'SE', 'US'] as const) {
      const tree = join(mirrors, cc.toLowerCase())
      cpSync(origin, tree, {recursive: true, preserveTimestamps: true})
      for (const [path, {missingOn}] of Object.entries(FILES)) if (missingOn.includes(cc)) rmSync(join(tree, path))
    }
    const wrong = join(mirrors, 'gb', 'pub/wrong-size.iso')
    writeFileSync(wrong, content('wrong', 4000))
    utimesSync(wrong, T, T)

    nginx = await startNginx({root: mirrors})
    const rsyncPort = await freePort()
    writeFileSync(
      join(dir, 'rsyncd.conf'),
      [
        'use chroot = no',
        'uid = root',
        'gid = root',
        `pid file = ${join(dir, 'rsyncd.pid')}`,
        `log file = ${join(dir, 'rsyncd.log')}`,
        ...['gb', 'se', 'us'].flatMap((m) => [`[${m}]`, `path = ${join(mirrors, m)}`, 'read only = yes']),
        '',
      ].join('\n'),
    )
    rsyncd = spawn('rsync', ['--daemon', '--no-detach', `--config=${join(dir, 'rsyncd.conf')}`, `--port=${rsyncPort}`, '--address=127.0.0.1'], {stdio: 'ignore'})
    await waitForPort(rsyncPort)

    tdb = await createTestDatabase()
    env = {...tdb.env}
    for (const cc of ['GB', 'SE', 'US']) {
      const m = cc.toLowerCase()
      const r = await mb(['mirror', 'add', `${m}.mirror.test`, '--http-url', `${nginx.url}${m}/`, '--rsync-url', `rsync://127.0.0.1:${rsyncPort}/${m}/`, '--country', cc, '--json'], {env})
      expect(r.code, r.stderr + r.stdout).to.equal(0)
    }
    const indexed = await mb(['index', '--root', origin, '--json'], {env})
    expect(indexed.code, indexed.stderr + indexed.stdout).to.equal(0)
    expect(indexed.json()).to.include({files: Object.keys(FILES).length})
    const scanned = await mb(['scan', '--all', '--json'], {env})
    expect(scanned.code, scanned.stderr + scanned.stdout).to.equal(0)

    serve = await startServe(['--root', origin, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32'], env)
  })

  after(async () => {
    await serve?.stop()
    await nginx?.stop()
    if (rsyncd?.pid && rsyncd.exitCode === null) {
      const exited = new Promise((r) => rsyncd!.once('exit', r))
      rsyncd.kill('SIGTERM')
      await exited
    }
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  /** The mirror a client is sent to for `path` ('' = served locally), via curl. */
  function chosen(path: string, cc: keyof typeof CLIENTS): {status: number; location: string} {
    const url = `${serve!.url}/${path.split('/').map(encodeURIComponent).join('/')}`
    const out = curl(['-o', '/dev/null', '-w', '%{http_code} %{redirect_url}', '-H', `X-Forwarded-For: ${CLIENTS[cc]}`, url])
      .stdout.toString()
      .trim()
    const [status, location = ''] = out.split(' ')
    return {status: Number(status), location}
  }

  const at = (m: string, path: string) => `${nginx!.url}${m}/${path.split('/').map(encodeURIComponent).join('/')}`

  it('sends each client to its own country when that mirror holds the file', () => {
    expect(chosen('pub/common.iso', 'GB')).to.deep.equal({status: 302, location: at('gb', 'pub/common.iso')})
    expect(chosen('pub/common.iso', 'SE')).to.deep.equal({status: 302, location: at('se', 'pub/common.iso')})
    expect(chosen('pub/common.iso', 'US')).to.deep.equal({status: 302, location: at('us', 'pub/common.iso')})
  })

  it('falls back to the same continent for GB and SE, to the world for US', () => {
    expect(chosen('pub/gb-missing.iso', 'GB')).to.deep.equal({status: 302, location: at('se', 'pub/gb-missing.iso')})
    expect(chosen('pub/se-missing.iso', 'SE')).to.deep.equal({status: 302, location: at('gb', 'pub/se-missing.iso')})
    const us = chosen('pub/us-missing.iso', 'US')
    expect(us.status).to.equal(302)
    expect([at('gb', 'pub/us-missing.iso'), at('se', 'pub/us-missing.iso')]).to.include(us.location)
    expect(chosen('dir with space/ça#1.iso', 'US').location).to.be.oneOf([at('gb', 'dir with space/ça#1.iso'), at('se', 'dir with space/ça#1.iso')])
    expect(chosen('dir with space/ça#1.iso', 'GB').location).to.equal(`${nginx!.url}gb/dir%20with%20space/%C3%A7a%231.iso`)
  })

  it('never chooses the mirror whose copy has the wrong size', () => {
    expect(chosen('pub/wrong-size.iso', 'GB')).to.deep.equal({status: 302, location: at('se', 'pub/wrong-size.iso')})
    expect(chosen('pub/wrong-size.iso', 'SE').location).to.equal(at('se', 'pub/wrong-size.iso'))
    expect(chosen('pub/wrong-size.iso', 'US').location).to.equal(at('us', 'pub/wrong-size.iso'))
    // Many GB clients (different /24s): none is sent to the GB mirror's wrong copy.
    for (let i = 0; i < 20; i++) {
      const ip = `81.2.69.${130 + i}`
      const out = curl(['-o', '/dev/null', '-w', '%{redirect_url}', '-H', `X-Forwarded-For: ${ip}`, `${serve!.url}/pub/wrong-size.iso`]).stdout.toString()
      expect(out).to.not.include('/gb/')
    }
  })

  it('serves a file no mirror holds locally with the exact bytes', () => {
    const r = curl(['-H', `X-Forwarded-For: ${CLIENTS.GB}`, '-w', '', `${serve!.url}/pub/nowhere.iso`])
    expect(r.stdout.equals(bytes['pub/nowhere.iso'])).to.equal(true)
    expect(chosen('pub/nowhere.iso', 'US')).to.deep.equal({status: 200, location: ''})
  })

  it('curl -L through the redirect yields the origin bytes', () => {
    for (const cc of ['GB', 'SE', 'US'] as const) {
      for (const path of ['pub/common.iso', 'pub/wrong-size.iso', 'pub/us-missing.iso', 'dir with space/ça#1.iso']) {
        const url = `${serve!.url}/${path.split('/').map(encodeURIComponent).join('/')}`
        const r = curl(['-L', '-H', `X-Forwarded-For: ${CLIENTS[cc]}`, url])
        expect(r.stdout.equals(bytes[path]), `${cc} ${path}`).to.equal(true)
      }
    }
  })
})
