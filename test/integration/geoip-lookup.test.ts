// @store-independent: GeoIP and AS lookups
/**
 * `mb geoip lookup IP` (issue 36, item 8): location and AS from MaxMind's test databases,
 * the client network that keys stickiness, and the mirrors whose prefixes, AS or client
 * prefixes match the address (as MirrorBrain's iplookup).
 */
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geoip/', import.meta.url))
const GEO = ['--geoip', `${FIXTURES}GeoLite2-City-Test.mmdb`, '--asn-db', `${FIXTURES}GeoLite2-ASN-Test.mmdb`]

describe(`mb geoip lookup (${backend})`, function () {
  this.timeout(120_000)
  let tdb: TestDatabase

  before(async () => {
    tdb = await createTestDatabase()
    const add = async (args: string[]) => {
      const r = await mb(['mirror', 'add', ...args, '--no-probe', '--country', 'DE'], {env: tdb.env})
      expect(r.code, r.stderr).to.equal(0)
    }
    await add(['london.test', '--http-url', 'http://london.test/', '--prefix', '81.2.69.0/24'])
    await add(['google.test', '--http-url', 'http://google.test/', '--asn', '15169'])
    await add(['campus.test', '--http-url', 'http://campus.test/', '--client-prefix', '1.0.0.0/16'])
  })

  after(async () => {
    await tdb?.drop()
  })

  it('shows location, network and the prefix mirror of an IPv4 address', async () => {
    const r = await mb(['geoip', 'lookup', '81.2.69.142', ...GEO, '--json'], {env: tdb.env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json()).to.deep.include({
      ip: '81.2.69.142',
      family: 4,
      country: 'GB',
      continent: 'EU',
      asn: null,
      network: '81.2.69.0/24',
      mirrors: {prefix: [{mirror: 'london.test', prefix: '81.2.69.0/24'}], as: [], clientPrefix: []},
    })
    const human = await mb(['geoip', 'lookup', '81.2.69.142', ...GEO], {env: tdb.env})
    expect(human.stdout).to.match(/^country: +GB$/m)
    expect(human.stdout).to.match(/^coordinates: +51\.5142,-0\.0931$/m)
    expect(human.stdout).to.match(/^prefix mirrors: +london\.test \(81\.2\.69\.0\/24\)$/m)
  })

  it('names the AS from asn_db, the mirrors in it and those whose client prefixes admit the address', async () => {
    const r = await mb(['geoip', 'lookup', '1.0.0.1', ...GEO, '--json'], {env: tdb.env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json()).to.deep.include({asn: 15169, network: '1.0.0.0/24', mirrors: {prefix: [], as: ['google.test'], clientPrefix: [{mirror: 'campus.test', prefix: '1.0.0.0/16'}]}})
    expect((await mb(['geoip', 'lookup', '1.0.0.1', ...GEO], {env: tdb.env})).stdout).to.match(/^asn: +AS15169$/m)
  })

  it('IPv6: the /48 client network; a bad address is a usage error', async () => {
    const r = await mb(['geoip', 'lookup', '2001:218::1', ...GEO, '--json'], {env: tdb.env})
    expect(r.json()).to.deep.include({ip: '2001:218::1', family: 6, country: 'JP', continent: 'AS', network: '2001:218::/48'})
    const bad = await mb(['geoip', 'lookup', '1.2.3', ...GEO], {env: tdb.env})
    expect(bad.code).to.equal(2)
    expect(bad.stderr).to.include('1.2.3 is not an IPv4 or IPv6 address')
  })
})
