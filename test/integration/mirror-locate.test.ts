/**
 * Mirrors located from their host: host names resolve through a local DNS server (dnsmasq on
 * a loopback port, `MB_DNS_SERVERS`) to addresses of the MaxMind test databases, so that
 * `mb mirror add` without --country fills the test database's location, warns about a host
 * in several countries, refuses an unresolvable or unknown host (nothing added), and
 * `mb mirror locate --all` shows (and with --apply writes) a changed one.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {freePort} from '../helpers/servers.js'

const FIXTURES = new URL('../fixtures/geoip/', import.meta.url).pathname

/** Starts dnsmasq answering only the given names, on 127.0.0.1:`port` (UDP and TCP). */
async function startDnsmasq(dir: string, port: number, options: string[]): Promise<ChildProcess> {
  const args = [
    '--keep-in-foreground',
    '--no-resolv',
    '--no-hosts',
    '--bind-interfaces',
    '--listen-address=127.0.0.1',
    `--port=${port}`,
    `--pid-file=${join(dir, 'dnsmasq.pid')}`,
    '--log-facility=-',
    ...options,
  ]
  if (process.getuid?.() === 0) args.push('--user=root')
  const child = spawn('dnsmasq', args, {stdio: ['ignore', 'pipe', 'pipe']})
  let out = ''
  child.stdout!.on('data', (d) => (out += d))
  child.stderr!.on('data', (d) => (out += d))
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dnsmasq did not start:\n${out}`)), 30_000)
    const check = () => {
      if (/started, version/.test(out)) {
        clearTimeout(timer)
        resolve()
      }
    }
    child.stdout!.on('data', check)
    child.stderr!.on('data', check)
    child.once('exit', (code) => {
      clearTimeout(timer)
      reject(new Error(`dnsmasq exited with ${code}:\n${out}`))
    })
  })
  return child
}

describe(`mirrors located from their host (${backend})`, function () {
  this.timeout(300_000)
  let t: TestDatabase
  let dir: string
  let dns: ChildProcess
  let env: Record<string, string | undefined>

  before(async function () {
    requireBinary(this, 'dnsmasq', 'dnsmasq-base')
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-locate-'))
    const port = await freePort()
    dns = await startDnsmasq(dir, port, ['--address=/gb.mirror.test/81.2.69.142', '--host-record=multi.mirror.test,81.2.69.142,2001:218::1', '--address=/nowhere.mirror.test/'])
    env = {...t.env, MB_DNS_SERVERS: `127.0.0.1:${port}`, MB_GEOIP: join(FIXTURES, 'GeoIP2-City-Test.mmdb'), MB_ASN_DB: join(FIXTURES, 'GeoLite2-ASN-Test.mmdb')}
  })

  after(async () => {
    if (dns && dns.exitCode === null) {
      const exited = new Promise((resolve) => dns.once('exit', resolve))
      dns.kill('SIGTERM')
      await exited
    }
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const names = async () => (await mb(['mirror', 'list', '--json'], {env})).json().map((m: any) => m.identifier)

  it('fills the location from the test database when --country is not given', async () => {
    const r = await mb(['mirror', 'add', 'gb.test', '--http-url', 'http://gb.mirror.test/pub/', '--no-probe'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stdout.split('\n')[0]).to.equal('Located gb.mirror.test (81.2.69.142) -> GB (EU), 51.5142,-0.0931.')
    const shown = (await mb(['mirror', 'show', 'gb.test', '--json'], {env})).json()
    expect(shown).to.include({country: 'GB', continent: 'EU', latitude: 51.5142, longitude: -0.0931, asn: null})
  })

  it('warns when the host resolves to several countries', async () => {
    const r = await mb(['mirror', 'add', 'multi.test', '--http-url', 'http://multi.mirror.test/', '--no-probe', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().location).to.deep.equal({
      host: 'multi.mirror.test',
      addresses: ['81.2.69.142', '2001:218::1'],
      country: 'GB',
      continent: 'EU',
      latitude: 51.5142,
      longitude: -0.0931,
      asn: null,
      countries: ['GB', 'JP'],
    })
    expect(r.json()).to.include({country: 'GB'})
    // The warning goes to stderr in human mode (under --json the countries are in `location`).
    const again = await mb(['mirror', 'locate', 'multi.test'], {env})
    expect(again.code, again.stderr).to.equal(0)
    expect(again.stderr.replace(/\s*›\s*/g, ' ').replace(/\s+/g, ' ')).to.contain(
      'multi.mirror.test resolves to addresses in several countries (GB, JP); GB was taken. Give --country to choose another.',
    )
  })

  it('refuses an unresolvable host and a host GeoIP does not know, adding nothing', async () => {
    const nowhere = await mb(['mirror', 'add', 'nowhere.test', '--http-url', 'http://nowhere.mirror.test/', '--no-probe'], {env})
    expect(nowhere.code).to.equal(1)
    expect(nowhere.stderr).to.match(/^Error: Cannot locate nowhere\.mirror\.test: it does not resolve to any address \(E[A-Z]+\)\.\n$/)
    const loopback = await mb(['mirror', 'add', 'loop.test', '--http-url', 'http://127.0.0.1:8080/', '--no-probe', '--json'], {env})
    expect(loopback.code).to.equal(1)
    expect(loopback.json().error).to.deep.include({code: 'LOCATION_UNKNOWN'})
    expect(loopback.json().error.message).to.equal(
      'Cannot locate the mirror: 127.0.0.1 (127.0.0.1) -> no country known (loopback or private addresses, which GeoIP does not place). Nothing was added; give --country, or add it without a location with --no-locate.',
    )
    expect(await names()).to.deep.equal(['gb.test', 'multi.test'])
    const without = await mb(['mirror', 'add', 'loop.test', '--http-url', 'http://127.0.0.1:8080/', '--no-probe', '--no-locate', '--json'], {env})
    expect(without.code, without.stderr).to.equal(0)
    expect(without.json()).to.include({country: null})
    expect(without.json()).to.not.have.property('location')
    const given = await mb(['mirror', 'add', 'nowhere.test', '--http-url', 'http://nowhere.mirror.test/', '--country', 'NL', '--no-probe', '--json'], {env})
    expect(given.code, given.stderr).to.equal(0)
    expect(given.json()).to.include({country: 'NL', continent: 'EU'})
    expect(given.json()).to.not.have.property('location')
  })

  it('locate --all shows a changed mirror, and --apply writes it', async () => {
    expect((await mb(['mirror', 'edit', 'gb.test', '--country', 'DE', '--lat', '50', '--lon', '8'], {env})).code).to.equal(0)
    const shown = await mb(['mirror', 'locate', '--all'], {env})
    expect(shown.code).to.equal(1) // loop.test and nowhere.test cannot be located
    const lines = shown.stdout.split('\n')
    expect(lines[0]).to.equal('name\thost\tfound\tchanges\tapplied')
    expect(lines).to.include(
      'gb.test\tgb.mirror.test\t(81.2.69.142) -> GB (EU), 51.5142,-0.0931\tcountry DE -> GB; continent EU -> EU; latitude 50 -> 51.5142; longitude 8 -> -0.0931\tno (--apply writes it)'.replace(
        'continent EU -> EU; ',
        '',
      ),
    )
    expect(lines).to.include('multi.test\tmulti.mirror.test\t(81.2.69.142, 2001:218::1) -> GB (EU), 51.5142,-0.0931\tnone\t-')
    expect(lines.find((l) => l.startsWith('loop.test\t'))).to.equal(
      'loop.test\t127.0.0.1\t127.0.0.1 (127.0.0.1) -> no country known (loopback or private addresses, which GeoIP does not place): GeoIP knows no country\t-\t-',
    )
    expect((await mb(['mirror', 'show', 'gb.test', '--json'], {env})).json()).to.include({country: 'DE'})
    const applied = await mb(['mirror', 'locate', 'gb.test', '--apply', '--json'], {env})
    expect(applied.code, applied.stderr).to.equal(0)
    expect(applied.json()[0]).to.include({name: 'gb.test', applied: true})
    expect(applied.json()[0].changes).to.deep.equal([
      {field: 'country', from: 'DE', to: 'GB'},
      {field: 'latitude', from: 50, to: 51.5142},
      {field: 'longitude', from: 8, to: -0.0931},
    ])
    expect((await mb(['mirror', 'show', 'gb.test', '--json'], {env})).json()).to.include({country: 'GB', continent: 'EU', latitude: 51.5142, longitude: -0.0931})
    expect((await mb(['mirror', 'locate', 'gb.test'], {env})).stdout).to.contain('\tnone\t')
  })
})
