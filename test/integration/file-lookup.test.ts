/**
 * `mb file lookup` through the compiled CLI: a path, a glob, and the --client-ip explanation
 * (realm, rank, URL, and the reason for every excluded mirror), on either backend.
 */
import {expect} from 'chai'
import {fileURLToPath} from 'node:url'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {mb} from '../helpers/cli.js'

const CITY = fileURLToPath(new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url))
const ASN = fileURLToPath(new URL('../fixtures/geoip/GeoLite2-ASN-Test.mmdb', import.meta.url))

describe(`mb file lookup (${backend})`, () => {
  let tdb: TestDatabase
  let env: Record<string, string>
  const ids: Record<string, number> = {}

  before(async () => {
    tdb = await createTestDatabase()
    env = {...tdb.env, MB_GEOIP: CITY, MB_ASN_DB: ASN}
    const database = await tdb.open()
    try {
      const db = database.db
      const scanned = new Date()
      const add = async (identifier: string, values: Record<string, unknown>) => {
        const row = await db
          .insertInto('mirror')
          .values({identifier, http_url: `http://${identifier}/pub`, last_scan_ok_at: scanned, ...values} as any)
          .returning('id')
          .executeTakeFirstOrThrow()
        ids[identifier] = Number(row.id)
      }
      await add('gb.example', {country: 'GB', continent: 'EU', https_url: 'https://gb.example/pub/', latitude: 51.5, longitude: -0.12})
      await add('se.example', {country: 'SE', continent: 'EU', https_url: 'https://se.example/pub/'})
      await add('us.example', {country: 'US', continent: 'NA'})
      await add('off.example', {country: 'GB', continent: 'EU', enabled: false})
      await add('stale.example', {country: 'GB', continent: 'EU'})
      await add('fr-only.example', {country: 'FR', continent: 'EU', country_only: true})
      const all = [ids['gb.example'], ids['se.example'], ids['us.example'], ids['off.example'], ids['fr-only.example']]
      const files = await db
        .insertInto('file')
        .values([
          {
            path: 'iso/distro-1.0.iso',
            size: 65536,
            mtime: 1_700_000_000,
            mirrors: all,
            md5: 'a'.repeat(32),
            sha1: 'b'.repeat(40),
            sha256: 'c'.repeat(64),
            hashed_size: 65536,
            hashed_mtime: 1_700_000_000,
          },
          {path: 'iso/distro 2.0 #beta.iso', size: 70000, mtime: 1_700_000_100, mirrors: [ids['us.example']]},
          {path: 'iso/SHA256SUMS', size: 200, mtime: 1_700_000_000, mirrors: all},
          {path: 'docs/readme.txt', size: 9000, mtime: 1_700_000_000, mirrors: []},
        ] as any)
        .returning(['id', 'path'])
        .execute()
      const iso = files.find((f) => f.path === 'iso/distro-1.0.iso')!
      await db
        .insertInto('mirror_file_stale')
        .values({mirror_id: ids['stale.example'], file_id: Number(iso.id), size: 60000, mtime: 1_690_000_000})
        .execute()
    } finally {
      await database.close()
    }
  })
  after(async () => tdb?.drop())

  it('shows size, mtime, hashes and the holding mirrors with full URLs', async () => {
    const r = await mb(['file', 'lookup', '/iso/distro-1.0.iso', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const [f] = r.json().files
    expect(f).to.deep.include({path: 'iso/distro-1.0.iso', size: 65536, mtime: 1_700_000_000, mtime_utc: '2023-11-14T22:13:20Z'})
    expect(f.hashes).to.deep.equal({md5: 'a'.repeat(32), sha1: 'b'.repeat(40), sha256: 'c'.repeat(64)})
    expect(f.mirrors.map((m: any) => [m.identifier, m.url])).to.deep.equal([
      ['gb.example', 'http://gb.example/pub/iso/distro-1.0.iso'],
      ['se.example', 'http://se.example/pub/iso/distro-1.0.iso'],
      ['us.example', 'http://us.example/pub/iso/distro-1.0.iso'],
      ['off.example', 'http://off.example/pub/iso/distro-1.0.iso'],
      ['fr-only.example', 'http://fr-only.example/pub/iso/distro-1.0.iso'],
    ])
    expect(f.stale).to.deep.equal([{identifier: 'stale.example', size: 60000, mtime: 1_690_000_000}])
    expect(f.explain).to.equal(undefined)

    const text = await mb(['file', 'lookup', 'iso/distro-1.0.iso'], {env})
    expect(text.code).to.equal(0)
    expect(text.stdout).to.contain('65536 bytes').and.contain('2023-11-14T22:13:20Z').and.contain('c'.repeat(64)).and.contain('http://gb.example/pub/iso/distro-1.0.iso')
    expect(text.stdout).to.contain('stale.example\toutdated copy: 60000 bytes, origin 65536\t2023-07-22T04:26:40Z')
  })

  it('explains the choice for a GB client: realm, ranks, URLs and every exclusion', async () => {
    const r = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const e = r.json().files[0].explain
    expect(e.client).to.deep.equal({ip: '81.2.69.142', https: false, country: 'GB', continent: 'EU', asn: null, latitude: 51.5142, longitude: -0.0931})
    expect(e.realm).to.equal('country')
    expect(e.origin).to.equal(null)
    expect(e.ranked.map((c: any) => [c.rank, c.realm, c.mirror, c.url])).to.deep.equal([
      [1, 'country', 'gb.example', 'http://gb.example/pub/iso/distro-1.0.iso'],
      [2, 'continent', 'se.example', 'http://se.example/pub/iso/distro-1.0.iso'],
      [3, 'world', 'us.example', 'http://us.example/pub/iso/distro-1.0.iso'],
    ])
    expect(e.ranked[0].distance_km).to.equal(2) // London (GeoIP) to the mirror's 51.5, -0.12
    expect(e.excluded).to.deep.equal([
      {mirror: 'fr-only.example', reason: 'country_only', detail: 'mirror in FR, client in GB'},
      {mirror: 'off.example', reason: 'disabled', detail: 'disabled by the operator (`mb mirror enable` turns it back on)'},
      {mirror: 'stale.example', reason: 'stale', detail: 'outdated copy: 60000 bytes, origin 65536'},
    ])

    const text = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142'], {env})
    expect(text.stdout).to.contain('client 81.2.69.142 (GB, EU) over HTTP:')
    expect(text.stdout).to.contain('realm: country; redirect to http://gb.example/pub/iso/distro-1.0.iso')
    expect(text.stdout).to.contain('stale.example\tstale\toutdated copy: 60000 bytes, origin 65536')
  })

  it('states the retry rule, and --attempt N shows where the N-th try of the client goes: its tier, cycling', async () => {
    const first = (await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--json'], {env})).json().files[0].explain
    expect(first.retry).to.include({window_seconds: 600, attempt: 1, goes_to: 'gb.example'})
    expect(first.retry.rule).to.contain('goes to the next mirror of its tier')
    const goes = async (n: number) => (await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--attempt', String(n), '--json'], {env})).json().files[0].explain.retry.goes_to
    // gb.example is alone in the client's country: its tier widens to the continent's se.example, never the origin.
    expect([await goes(2), await goes(4), await goes(5)]).to.deep.equal(['se.example', 'se.example', 'gb.example'])
    const text = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--attempt', '3'], {env})
    expect(text.stdout).to.contain('retry: attempt 3 goes to gb.example; the same client address asking again for this file within 600 s')
  })

  it('--country forces the client country, and its continent follows the country (RU is Europe); a bad code is refused', async () => {
    // 175.16.199.0 is CN (Asia) in the test database.
    const r = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '175.16.199.0', '--country', 'ru', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const e = r.json().files[0].explain
    expect(e.client).to.include({country: 'RU', continent: 'EU'})
    expect(e.realm).to.equal('continent')
    expect(['gb.example', 'se.example']).to.include(e.ranked[0].mirror)
    const bad = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '175.16.199.0', '--country', 'Russia'], {env})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.contain('--country "Russia" is not an ISO 3166-1 alpha-2 country code')
  })

  it('over HTTPS only mirrors with an https_url qualify, and URLs are https', async () => {
    const r = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '216.160.83.56', '--https', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const e = r.json().files[0].explain
    expect(e.client).to.deep.include({country: 'US', continent: 'NA', asn: 209, https: true})
    expect(e.realm).to.equal('world')
    expect(e.ranked.map((c: any) => c.url).sort()).to.deep.equal(['https://gb.example/pub/iso/distro-1.0.iso', 'https://se.example/pub/iso/distro-1.0.iso'])
    expect(e.excluded.find((x: any) => x.mirror === 'us.example')).to.deep.equal({mirror: 'us.example', reason: 'no_https', detail: 'HTTPS client and the mirror has no https_url'})
  })

  it('uses the bundled GeoIP database when no geoip setting is given', async () => {
    const r = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '2a02:d180::1', '--json'], {env: {...tdb.env, MB_GEOIP: undefined, MB_ASN_DB: undefined}})
    expect(r.code, r.stderr).to.equal(0)
    const e = r.json().files[0].explain
    expect(e.client).to.deep.include({ip: '2a02:d180::1', country: 'DE', continent: 'EU', asn: null})
    expect(e.realm).to.equal('continent')
    expect(e.ranked.map((c: any) => c.realm)).to.deep.equal(['continent', 'continent', 'world'])
    expect(
      e.ranked
        .slice(0, 2)
        .map((c: any) => c.mirror)
        .sort(),
    ).to.deep.equal(['gb.example', 'se.example'])
    expect(e.ranked[2].mirror).to.equal('us.example')
    expect(e.excluded.map((x: any) => [x.mirror, x.reason])).to.deep.equal([
      ['fr-only.example', 'country_only'],
      ['off.example', 'disabled'],
      ['stale.example', 'stale'],
    ])
  })

  it('says when the origin serves the file itself', async () => {
    const small = await mb(['file', 'lookup', 'iso/SHA256SUMS', '--client-ip', '81.2.69.142', '--json'], {env})
    expect(small.json().files[0].explain).to.deep.include({realm: null, origin: {reason: 'small_file', detail: '200 bytes, below min_size 4096'}, ranked: []})
    // No mirror to cycle through: the retry line says the repeats go to the origin too, not to "the next mirror".
    const smallText = await mb(['file', 'lookup', 'iso/SHA256SUMS', '--client-ip', '81.2.69.142'], {env})
    expect(smallText.stdout).to.contain('retry: attempt 1 goes to origin; no mirror is chosen for this client, so every repeated request goes there too')
    expect(smallText.stdout).to.not.contain('never to the origin')
    const none = await mb(['file', 'lookup', 'docs/readme.txt', '--client-ip', '89.160.20.112', '--json'], {env})
    const e = none.json().files[0].explain
    expect(e.origin.reason).to.equal('no_mirror')
    expect(e.excluded.map((x: any) => [x.mirror, x.reason])).to.deep.equal([
      ['fr-only.example', 'not_held'],
      ['gb.example', 'not_held'],
      ['off.example', 'disabled'],
      ['se.example', 'not_held'],
      ['stale.example', 'not_held'],
      ['us.example', 'not_held'],
    ])
  })

  it('a glob lists every match, and paths with spaces and # are encoded in URLs', async () => {
    const r = await mb(['file', 'lookup', '*.iso', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const files = r.json().files
    expect(files.map((f: any) => f.path)).to.deep.equal(['iso/distro 2.0 #beta.iso', 'iso/distro-1.0.iso'])
    expect(files[0].mirrors).to.deep.equal([{id: ids['us.example'], identifier: 'us.example', country: 'US', url: 'http://us.example/pub/iso/distro%202.0%20%23beta.iso', by: 'scan'}])
    const dir = await mb(['file', 'lookup', 'iso/*', '--json'], {env})
    expect(dir.json().files.map((f: any) => f.path)).to.deep.equal(['iso/SHA256SUMS', 'iso/distro 2.0 #beta.iso', 'iso/distro-1.0.iso'])
    const text = await mb(['file', 'lookup', 'iso/distro*.iso', '--client-ip', '175.16.199.0'], {env})
    expect(text.code).to.equal(0)
    expect(text.stdout)
      .to.match(/path: +iso\/distro 2\.0 #beta\.iso/)
      .and.match(/path: +iso\/distro-1\.0\.iso/)
    expect(text.stdout).to.contain('client 175.16.199.0 (CN, AS) over HTTP:')
  })

  it('fails clearly: unknown path (1), no glob match (1), bad --client-ip (2)', async () => {
    const missing = await mb(['file', 'lookup', 'iso/nope.iso', '--json'], {env})
    expect(missing.code).to.equal(1)
    expect(missing.json().error.code).to.equal('FILE_NOT_FOUND')
    const nomatch = await mb(['file', 'lookup', '*.rpm'], {env})
    expect(nomatch.code).to.equal(1)
    expect(nomatch.stderr).to.contain('No indexed file matches *.rpm')
    const bad = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '1.2.3'], {env})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.contain('--client-ip 1.2.3 is not an IPv4 or IPv6 address (not a full IPv4 address (four parts))')
    const octal = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '010.0.0.1'], {env})
    expect(octal.code).to.equal(2)
    expect(octal.stderr).to.contain('--client-ip 010.0.0.1 is not an IPv4 or IPv6 address (leading zeros are not allowed (write 10.0.0.1))')
    const zone = await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', 'fe80::1%eth0'], {env})
    expect(zone.code).to.equal(2)
    expect(zone.stderr).to.contain('zone ids')
  })

  it('a maintenance window set with mb mirror edit excludes the mirror until it ends, and none ends it', async () => {
    const until = new Date(Date.now() + 3_600_000)
    until.setUTCMilliseconds(0)
    const iso = until.toISOString().replace('.000Z', 'Z')
    const edit = await mb(['mirror', 'edit', 'se.example', '--maintenance-until', iso], {env})
    expect(edit.code, edit.stderr).to.equal(0)
    expect(edit.stdout).to.match(new RegExp(`^maintenance_until: +${iso}$`, 'm'))
    const during = (await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--json'], {env})).json().files[0].explain
    expect(during.ranked.map((c: any) => c.mirror)).to.deep.equal(['gb.example', 'us.example'])
    expect(during.excluded.find((x: any) => x.mirror === 'se.example')).to.deep.equal({
      mirror: 'se.example',
      reason: 'maintenance',
      detail: `in maintenance until ${iso} (\`mb mirror edit se.example --maintenance-until none\` ends it)`,
    })

    const ended = await mb(['mirror', 'edit', 'se.example', '--maintenance-until', 'none', '--json'], {env})
    expect(ended.code, ended.stderr).to.equal(0)
    expect(ended.json().maintenance_until).to.equal(null)
    const after = (await mb(['file', 'lookup', 'iso/distro-1.0.iso', '--client-ip', '81.2.69.142', '--json'], {env})).json().files[0].explain
    expect(after.ranked.map((c: any) => c.mirror)).to.deep.equal(['gb.example', 'se.example', 'us.example'])
    expect(after.excluded.map((x: any) => x.mirror)).to.not.include('se.example')
  })
})
