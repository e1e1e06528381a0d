/**
 * No client prefers the origin while mirrors are healthy (docs/selection.md, "No client
 * prefers the origin"). Two nginx mirrors on hosts of their own (127.0.0.21 and 127.0.0.22,
 * as on the Internet, where mb's host is not a mirror's) hold a 4 MiB file and an RPM
 * repository; `mb serve` runs on defaults (retry window on) at 127.0.0.1. Real clients, each
 * run several times from the one address: aria2c on the plain URL (it takes the meta4 and
 * prefers the host it got it from) and on `.meta4`, wget2 on `.meta4`, zypper installing
 * from the repository, transmission-cli on the `.torrent` (web seeds). With both mirrors
 * healthy the origin delivers none of those bytes (`mb_origin_bytes_total` of every reason but
 * the repository metadata stays 0). Then one copy of two is corrupted in place: aria2c and
 * zypper still finish by their piece checks, and, once a content check has found the copy,
 * wget2 and transmission do too (they retry the same source, docs/selection.md "Clients and
 * bad mirrors"), every run with the right bytes.
 *
 * Runs per client (healthy): aria2c 20 and 20, wget2 20, zypper 20, transmission 5; the issue
 * asks 20 of each, which for transmission (about 3 s a run: its web-seed scheduling) would
 * take a minute of its own.
 */
import {randomBytes} from 'node:crypto'
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {corruptInPlace, sha256} from '../helpers/bad-world.js'
import {aria2Repeatable, runClient as run} from '../helpers/clients.js'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {freePort, type RunningProcess, startNginxFrom} from '../helpers/servers.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const RPMS = new URL('../fixtures/rpm/', import.meta.url).pathname
const MiB = 1024 * 1024
const ISO = 'pub/big.iso'
const REPO = 'repo/noarch'
const RPM = 'mb-hello-1.0-1.noarch.rpm'
const MIRRORS = [
  {name: 'a.gb', address: '127.0.0.21'},
  {name: 'b.gb', address: '127.0.0.22'},
]
/** The meter's reasons of files a mirror could carry: what must stay 0 while mirrors are healthy. */
const MIRRORABLE = ['no_mirror', 'fallback', 'index_stale', 'other']

describe(`e2e: no client prefers the origin while mirrors are healthy (${backend})`, function () {
  this.timeout(600_000)
  let work: string
  let origin: string
  let tdb: TestDatabase
  let serve: ServeProcess | undefined
  const nginx: RunningProcess[] = []
  const trees = new Map<string, string>()
  const urls = new Map<string, string>()
  const isoBytes = randomBytes(4 * MiB)

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'createrepo_c', 'createrepo-c')
    work = mkdtempSync(join(tmpdir(), 'mb-origin-share-'))
    origin = join(work, 'origin')
    mkdirSync(join(origin, 'pub'), {recursive: true})
    const mtime = new Date(Date.UTC(2026, 0, 2, 3, 4, 5))
    writeFileSync(join(origin, ISO), isoBytes)
    utimesSync(join(origin, ISO), mtime, mtime)
    mkdirSync(join(origin, REPO, 'Packages'), {recursive: true})
    cpSync(join(RPMS, RPM), join(origin, REPO, 'Packages', RPM))
    const repo = await run('createrepo_c', ['-q', join(origin, REPO)])
    expect(repo.code, repo.log).to.equal(0)
    for (const m of MIRRORS) {
      const tree = join(work, `mirror-${m.name}`)
      cpSync(origin, tree, {recursive: true, preserveTimestamps: true})
      trees.set(m.name, tree)
    }
    nginx.push(
      await startNginxFrom(async (port) => {
        let servers = 'types { text/xml xml; }\n'
        for (const m of MIRRORS) {
          const p = await port()
          urls.set(m.name, `http://${m.address}:${p}/`)
          servers += `server { listen ${m.address}:${p}; root ${JSON.stringify(trees.get(m.name)!)}; access_log ${join(work, `access-${m.name}.log`)}; location / { autoindex on; autoindex_format json; } }\n`
        }
        return servers
      }),
    )
    tdb = await createTestDatabase()
    const env = {...tdb.env, MB_ROOT: origin}
    expect((await mb(['index', '--hashes'], {env})).code).to.equal(0)
    for (const m of MIRRORS) {
      const add = await mb(['mirror', 'add', m.name, '--http-url', urls.get(m.name)!, '--country', 'GB', '--no-probe'], {env})
      expect(add.code, add.stdout + add.stderr).to.equal(0)
    }
    for (const step of [
      ['scan', '--all'],
      ['probe', '--all'],
    ]) {
      const r = await mb(step, {env})
      expect(r.code, r.stdout + r.stderr).to.equal(0)
    }
    // Defaults, but for the background content round (this test runs the check itself, when
    // it corrupts a copy) and the metrics listener it reads.
    serve = await startServe(['--root', origin, '--retry-window', '600', '--content-interval', '0', '--metrics-listen', '127.0.0.1:0'], tdb.env)
  })

  after(async () => {
    await serve?.stop()
    for (const n of nginx) await n.stop()
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  /** Bytes the origin delivered of files a mirror could carry, so far ({@link MIRRORABLE} reasons of `mb_origin_bytes_total`). */
  async function originBytes(): Promise<number> {
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve!.output())![1]
    const text = await (await fetch(`${metricsUrl}/metrics`)).text()
    let sum = 0
    for (const m of text.matchAll(/^mb_origin_bytes_total\{reason="([a-z_]+)"\} (\d+)$/gm)) if (MIRRORABLE.includes(m[1])) sum += Number(m[2])
    return sum
  }

  const originSha = (path: string) => sha256(readFileSync(join(origin, path)))
  let runDir = 0
  const freshDir = () => {
    const dir = join(work, 'out', String(runDir++))
    mkdirSync(dir, {recursive: true})
    return dir
  }

  /** One download by each client, into a fresh directory: resolves when it ended with the right bytes. */
  const CLIENTS: Record<string, () => Promise<void>> = {
    'aria2c URL': async () => {
      const dir = freshDir()
      const r = await run('aria2c', [...aria2Repeatable(), '--dir', dir, `${serve!.url}/${ISO}`], {limitMs: 120_000})
      expect(r.code, r.log.slice(-3000)).to.equal(0)
      expect(sha256(readFileSync(join(dir, 'big.iso')))).to.equal(originSha(ISO))
    },
    'aria2c URL.meta4': async () => {
      const dir = freshDir()
      const r = await run('aria2c', [...aria2Repeatable(), '--dir', dir, `${serve!.url}/${ISO}.meta4`], {limitMs: 120_000})
      expect(r.code, r.log.slice(-3000)).to.equal(0)
      expect(sha256(readFileSync(join(dir, 'big.iso')))).to.equal(originSha(ISO))
    },
    'wget2 --metalink URL.meta4': async () => {
      const dir = freshDir()
      const r = await run('wget2', ['--no-config', '--metalink', `${serve!.url}/${ISO}.meta4`], {cwd: dir, limitMs: 60_000})
      expect(r.code, r.log.slice(-3000)).to.equal(0)
      expect(sha256(readFileSync(join(dir, 'big.iso')))).to.equal(originSha(ISO))
    },
    'zypper install --download-only': async () => {
      const rootDir = join(freshDir(), 'root')
      const zypper = (args: string[]) => run('zypper', ['--root', rootDir, '--non-interactive', '--no-gpg-checks', ...args], {limitMs: 240_000})
      const added = await zypper(['addrepo', '--no-gpgcheck', `${serve!.url}/${REPO}/`, 'mbtest'])
      expect(added.code, added.log.slice(-3000)).to.equal(0)
      const r = await zypper(['install', '--download-only', 'mb-hello'])
      expect(r.code, r.log.slice(-3000)).to.equal(0)
      expect(sha256(readFileSync(join(rootDir, 'var/cache/zypp/packages/mbtest/Packages', RPM)))).to.equal(originSha(`${REPO}/Packages/${RPM}`))
    },
    'transmission-cli on URL.torrent': async () => {
      const dir = freshDir()
      const config = join(dir, 'config')
      mkdirSync(config)
      // Hermetic and self-ending, as in the bad mirror world: no DHT, LPD, PEX or port mapping; seed ratio 0.
      const settings = {'dht-enabled': false, 'lpd-enabled': false, 'pex-enabled': false, 'utp-enabled': false, 'port-forwarding-enabled': false, 'ratio-limit-enabled': true, 'ratio-limit': 0}
      writeFileSync(join(config, 'settings.json'), JSON.stringify({...settings, 'bind-address-ipv4': '127.0.0.1', 'peer-port': await freePort(), 'message-level': 2}))
      const res = await fetch(`${serve!.url}/${ISO}.torrent`)
      expect(res.status).to.equal(200)
      writeFileSync(join(dir, 'big.iso.torrent'), Buffer.from(await res.arrayBuffer()))
      const r = await run('transmission-cli', ['-g', config, '-w', dir, join(dir, 'big.iso.torrent')], {cwd: dir, limitMs: 90_000})
      expect(r.code, r.log.slice(-3000)).to.equal(0)
      expect(sha256(readFileSync(join(dir, 'big.iso')))).to.equal(originSha(ISO))
    },
  }
  const BINARY: Record<string, [string, string]> = {
    'aria2c URL': ['aria2c', 'aria2'],
    'aria2c URL.meta4': ['aria2c', 'aria2'],
    'wget2 --metalink URL.meta4': ['wget2', 'wget2'],
    'zypper install --download-only': ['zypper', 'zypper (unpacked: apt-get download zypper && dpkg -x)'],
    'transmission-cli on URL.torrent': ['transmission-cli', 'transmission-cli'],
  }
  const HEALTHY_RUNS: Record<string, number> = {
    'aria2c URL': 20,
    'aria2c URL.meta4': 20,
    'wget2 --metalink URL.meta4': 20,
    'zypper install --download-only': 20,
    'transmission-cli on URL.torrent': 5,
  }

  describe('both mirrors healthy', () => {
    for (const [name, runs] of Object.entries(HEALTHY_RUNS)) {
      it(`${name}: ${runs} runs, the right bytes, 0 bytes from the origin`, async function () {
        requireBinary(this, ...BINARY[name])
        const before = await originBytes()
        for (let i = 0; i < runs; i++) await CLIENTS[name]()
        expect((await originBytes()) - before, 'bytes the origin delivered of files the mirrors hold').to.equal(0)
      })
    }
  })

  describe('one copy of two corrupt', () => {
    before(() => {
      const tree = trees.get('b.gb')!
      corruptInPlace(join(tree, ISO))
      corruptInPlace(join(tree, REPO, 'Packages', RPM))
    })

    for (const name of ['aria2c URL', 'aria2c URL.meta4', 'zypper install --download-only']) {
      it(`${name}: still ends with the right bytes by its piece checks (3 runs)`, async function () {
        requireBinary(this, ...BINARY[name])
        for (let i = 0; i < 3; i++) await CLIENTS[name]()
      })
    }

    it('once a content check found the copy, wget2 and transmission end with the right bytes too (2 runs each)', async function () {
      requireBinary(this, ...BINARY['wget2 --metalink URL.meta4'])
      requireBinary(this, ...BINARY['transmission-cli on URL.torrent'])
      const check = await mb(['probe', '--content', 'b.gb'], {env: tdb.env})
      expect(check.stdout + check.stderr).to.match(/corrupt/i)
      // mb serve's snapshot takes the finding up within its poll.
      const deadline = Date.now() + 15_000
      let meta4 = ''
      while (Date.now() < deadline) {
        meta4 = await (await fetch(`${serve!.url}/${ISO}.meta4`)).text()
        if (!meta4.includes(urls.get('b.gb')!)) break
        await new Promise((r) => setTimeout(r, 250))
      }
      expect(meta4, 'the meta4 leaves the corrupt copy out').to.not.include(urls.get('b.gb')!)
      for (let i = 0; i < 2; i++) {
        await CLIENTS['wget2 --metalink URL.meta4']()
        await CLIENTS['transmission-cli on URL.torrent']()
      }
    })
  })
})
