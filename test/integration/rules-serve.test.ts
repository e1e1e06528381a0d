/**
 * Redirect rules end to end through `mb rule` and a real `mb serve` (GeoIP from the MaxMind
 * test database, client addresses through a trusted X-Forwarded-For):
 * - the intlstore case: GB and JP clients of `store/**` go to the international store's URL
 *   (with the rest of the path), US and CA clients to the mirrors;
 * - a CN rule limits selection to its named mirrors;
 * - a `url` rule also redirects a path that is not in the index (a `mirrors` rule needs the file);
 * - a rule added while serving applies within 5 s, without a restart;
 * - `mb stats` counts the hits per rule; `mb file lookup` and the mirror list name the rule;
 * - bad input is refused and changes nothing.
 */
import {mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const GEOIP = fileURLToPath(new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url))
// From the MaxMind test data. It has no Canadian network: the CA client is a US address
// whose `?country=CA` the configuration honours (serve.country_query_clients).
const GB = '81.2.69.142'
const JP = '2001:218::1'
const US = '216.160.83.56'
const CA_TESTER = '216.160.83.57'
const CN = '175.16.199.1'
const CN2 = '175.16.199.77'

const MIRRORS = ['mirror.example.us', 'mirror.example.de', 'mirror.example.cn', 'mirror2.example.cn']

async function get(base: string, path: string, ip: string): Promise<{status: number; location: string | null; mirror: string | null; rule: string | null; origin: string | null}> {
  const res = await fetch(`${base}/${path}`, {redirect: 'manual', headers: {'X-Forwarded-For': ip}})
  await res.arrayBuffer()
  return {status: res.status, location: res.headers.get('location'), mirror: res.headers.get('x-mb-mirror'), rule: res.headers.get('x-mb-rule'), origin: res.headers.get('x-mb-origin-reason')}
}

describe('redirect rules through mb serve', function () {
  this.timeout(240_000)
  let t: TestDatabase
  let root: string
  let serve: ServeProcess | undefined
  let env: Record<string, string>
  /** Answers that named the rule gb-local (its hit count). */
  let gbLocalHits = 0

  before(async () => {
    t = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-rules-'))
    mkdirSync(join(root, 'tree', 'store'), {recursive: true})
    mkdirSync(join(root, 'tree', 'iso'), {recursive: true})
    writeFileSync(join(root, 'tree', 'store', 'cart.html'), Buffer.alloc(65_536, 1))
    writeFileSync(join(root, 'tree', 'iso', 'big.iso'), Buffer.alloc(65_536, 2))
    const config = join(root, 'mb.yaml')
    writeFileSync(config, `serve:\n  country_query: trusted\n  country_query_clients: ['${CA_TESTER}/32']\n`)
    env = {...t.env, MB_CONFIG: config}
    for (const name of MIRRORS) {
      const cc = name.split('.').at(-1)!.toUpperCase()
      const r = await mb(['mirror', 'add', name, '--http-url', `http://${name}/pub/`, '--country', cc, '--no-probe'], {env})
      expect(r.code, r.stderr).to.equal(0)
    }
    const database = await t.open()
    try {
      const ids = (await database.db.selectFrom('mirror').select('id').orderBy('id').execute()).map((r) => r.id)
      const now = Math.floor(Date.now() / 1000)
      // The origin's files carry the indexed mtime, or mb serve would see them changed on disk.
      for (const f of ['store/cart.html', 'iso/big.iso']) utimesSync(join(root, 'tree', f), now, now)
      await database.db
        .insertInto('file')
        .values([
          {path: 'store/cart.html', size: 65_536, mtime: now, mirrors: ids},
          {path: 'iso/big.iso', size: 65_536, mtime: now, mirrors: ids},
        ])
        .execute()
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await serve?.stop()
    await t?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('refuses bad rules and changes nothing', async () => {
    const cases: Array<[string[], number, string]> = [
      [['rule', 'add', 'bad', '--path', 'x/**', '--country', 'US,XX', '--origin'], 2, 'Invalid --country "XX"'],
      [['rule', 'add', 'bad', '--path', '', '--origin'], 2, 'Invalid --path ""'],
      [['rule', 'add', 'bad', '--path', 'x/**', '--to', 'ftp://store.example.org/'], 2, 'must be an http:// or https:// URL (scheme ftp: cannot be a redirect target)'],
      [['rule', 'add', 'bad', '--path', 'x/**', '--mirrors', 'mirror.example.cn,nosuch.example.org'], 1, 'Unknown mirror in --mirrors: nosuch.example.org'],
      [['rule', 'add', 'bad', '--path', 'x/**'], 2, 'A rule needs a target'],
      [['rule', 'add', 'bad', '--path', 'x/**', '--origin', '--status', '303'], 2, 'expected 301, 302 or 307'],
    ]
    for (const [args, code, message] of cases) {
      const r = await mb(args, {env})
      expect([r.code, r.stderr.includes(message)], `${args.join(' ')}: ${r.stderr}`).to.deep.equal([code, true])
    }
    const list = await mb(['rule', 'list', '--json'], {env})
    expect(list.json()).to.deep.equal([])
  })

  it('adds, lists and edits rules', async () => {
    let r = await mb(['rule', 'add', 'intlstore', '--path', 'store/**', '--not-country', 'US,CA', '--to', 'https://intlstore.example.org/', '--append-path'], {env})
    expect(r.code, r.stderr).to.equal(0)
    r = await mb(['rule', 'add', 'cn', '--path', '**', '--country', 'CN', '--mirrors', 'MIRROR.example.cn,mirror2.example.cn', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json()).to.include({name: 'cn', priority: 110, target: 'mirrors', path_glob: '**'})
    expect(r.json().mirrors).to.deep.equal(['mirror.example.cn', 'mirror2.example.cn'])
    r = await mb(['rule', 'edit', 'intlstore', '--status', '307', '--json'], {env})
    expect(r.json().changed).to.deep.equal(['status'])
    r = await mb(['rule', 'list'], {env})
    expect(r.stdout).to.equal(
      'priority\tname\tenabled\tpath\twhen\ttarget\n100\tintlstore\tyes\tstore/**\tcountry not US,CA\t307 https://intlstore.example.org/ (+path)\n110\tcn\tyes\t**\tcountry CN\tmirrors mirror.example.cn,mirror2.example.cn\n',
    )
    r = await mb(['rule', 'edit', 'intlstore', '--status', '302'], {env})
    expect(r.code).to.equal(0)
  })

  it('sends GB and JP to the international store, US and CA to the mirrors, CN to its mirrors', async () => {
    serve = await startServe(['--config', join(root, 'mb.yaml'), '--root', join(root, 'tree'), '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'info'], env)
    const gb = await get(serve.url, 'store/cart.html', GB)
    const jp = await get(serve.url, 'store/cart.html', JP)
    expect(gb).to.deep.equal({status: 302, location: 'https://intlstore.example.org/cart.html', mirror: null, rule: 'intlstore', origin: null})
    expect(jp).to.deep.equal(gb)
    const us = await get(serve.url, 'store/cart.html', US)
    expect([us.status, us.mirror, us.rule]).to.deep.equal([302, 'mirror.example.us', null])
    const ca = await get(serve.url, 'store/cart.html?country=CA', CA_TESTER)
    expect([ca.status, ca.rule, MIRRORS.includes(ca.mirror!)]).to.deep.equal([302, null, true])
    // The same tester as GB does get the store URL: the override is what decided.
    expect((await get(serve.url, 'store/cart.html?country=GB', CA_TESTER)).rule).to.equal('intlstore')
    // CN: only the rule's mirrors, for every client of CN.
    for (const ip of [CN, CN2]) {
      const cn = await get(serve.url, 'iso/big.iso', ip)
      expect([cn.status, cn.rule, ['mirror.example.cn', 'mirror2.example.cn'].includes(cn.mirror!)]).to.deep.equal([302, 'cn', true])
    }
    // The store rule comes first, for CN too.
    expect((await get(serve.url, 'store/cart.html', CN)).rule).to.equal('intlstore')
    // Without a rule for its path, GB is sent to a mirror as usual.
    const plain = await get(serve.url, 'iso/big.iso', GB)
    expect([plain.status, plain.rule, plain.mirror]).to.deep.equal([302, null, 'mirror.example.de'])
  })

  it('names the rule in the mirror list and in mb file lookup', async () => {
    const res = await fetch(`${serve!.url}/iso/big.iso.mirrorlist`, {headers: {'X-Forwarded-For': CN, Accept: 'application/json'}})
    const list = (await res.json()) as {rule: unknown; realms: Array<{mirrors: Array<{identifier: string}>}>}
    expect(list.rule).to.deep.equal({name: 'cn', target: 'mirrors', url: null})
    expect(list.realms.flatMap((g) => g.mirrors.map((m) => m.identifier)).sort()).to.deep.equal(['mirror.example.cn', 'mirror2.example.cn'])
    const lookup = await mb(['file', 'lookup', 'store/cart.html', '--client-ip', GB, '--geoip', GEOIP, '--json'], {env})
    expect(lookup.json().files[0].explain.rule).to.deep.equal({name: 'intlstore', target: 'url', url: 'https://intlstore.example.org/cart.html', status: 302})
    // The url rule answers repeats too: no mirror of the ranking is a retry's next stop.
    expect(lookup.json().files[0].explain.retry).to.include({attempt: 1, goes_to: 'rule intlstore'})
    const human = await mb(['file', 'lookup', 'iso/big.iso', '--client-ip', CN, '--geoip', GEOIP], {env})
    expect(human.stdout).to.contain('rule cn matches: only its mirrors are ranked')
  })

  it('applies a rule added while serving within 5 s, and a disabled rule no more', async () => {
    expect((await get(serve!.url, 'iso/big.iso', GB)).rule).to.equal(null)
    const r = await mb(['rule', 'add', 'gb-local', '--path', 'iso/*.iso', '--country', 'GB', '--origin', '--priority', '1'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const added = Date.now()
    let seen: Awaited<ReturnType<typeof get>> | undefined
    while (Date.now() - added < 5000) {
      seen = await get(serve!.url, 'iso/big.iso', GB)
      if (seen.rule === 'gb-local') gbLocalHits++
      if (seen.rule !== null) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect(seen).to.deep.equal({status: 200, location: null, mirror: null, rule: 'gb-local', origin: 'rule'})
    const off = await mb(['rule', 'disable', 'gb-local'], {env})
    expect(off.stdout).to.equal('Rule gb-local disabled.\n')
    const disabled = Date.now()
    let after: Awaited<ReturnType<typeof get>> | undefined
    while (Date.now() - disabled < 5000) {
      after = await get(serve!.url, 'iso/big.iso', GB)
      if (after.rule === 'gb-local') gbLocalHits++
      if (after.rule === null) break
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    expect([after!.status, after!.rule, after!.mirror]).to.deep.equal([302, null, 'mirror.example.de'])
  })

  it('applies a url rule to a path that is not in the index; a mirrors rule still needs the file', async () => {
    const page = await get(serve!.url, 'store/item', GB)
    expect(page).to.deep.equal({status: 302, location: 'https://intlstore.example.org/item', mirror: null, rule: 'intlstore', origin: null})
    expect((await get(serve!.url, 'store/item', US)).status).to.equal(404)
    const missing = await get(serve!.url, 'iso/missing.iso', CN)
    expect([missing.status, missing.rule]).to.deep.equal([404, null])
  })

  it('counts the hits per rule in mb stats', async () => {
    // Counts so far: intlstore GB, JP, CN, the GB override and store/item = 5 (one more below); cn CN, CN2
    // and the mirror list = 3; gb-local: the answers that named it.
    const before = await get(serve!.url, 'store/cart.html', GB)
    expect(before.rule).to.equal('intlstore')
    await serve!.stop()
    serve = undefined
    const stats = await mb(['stats', '--json'], {env})
    const hits = stats.json().rule_hits as Array<{rule: string; hits: number}>
    const byRule = Object.fromEntries(hits.map((h) => [h.rule, h.hits]))
    expect([byRule.intlstore, byRule.cn, byRule['gb-local']]).to.deep.equal([6, 3, gbLocalHits])
    const human = await mb(['stats'], {env})
    const section = human.stdout.slice(human.stdout.indexOf('\nrule hits:\n'))
    expect(section.split('\n').slice(1, 3)).to.deep.equal(['rule hits:', 'rule\thits'])
    expect(section.split('\n').slice(3, 6).sort()).to.deep.equal(['cn\t3', `gb-local\t${gbLocalHits}`, 'intlstore\t6'])
    const removed = await mb(['rule', 'remove', 'gb-local'], {env})
    expect(removed.stdout).to.equal('Removed rule gb-local.\n')
  })
})
