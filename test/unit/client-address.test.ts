import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {CountryQueryTrust, TrustedProxies, parseForwardedElement, resolveClient} from '../../src/lib/serve/delivery/client-address.js'

describe('client address resolution', () => {
  const trusted = new TrustedProxies(['127.0.0.1/32', '10.0.0.0/8', '::1/128'])

  const cases: Array<{name: string; peer: string | undefined; xff?: string | string[]; proto?: string | string[]; tls?: boolean; ip: string; https: boolean; forwarded: boolean}> = [
    {name: 'plain peer, no headers', peer: '203.0.113.7', ip: '203.0.113.7', https: false, forwarded: false},
    {name: 'spoofed X-Forwarded-For from an untrusted peer is ignored', peer: '203.0.113.7', xff: '81.2.69.142', ip: '203.0.113.7', https: false, forwarded: false},
    {name: 'spoofed X-Forwarded-Proto from an untrusted peer is ignored', peer: '203.0.113.7', proto: 'https', ip: '203.0.113.7', https: false, forwarded: false},
    {name: 'trusted proxy: right-most entry', peer: '127.0.0.1', xff: '81.2.69.142', ip: '81.2.69.142', https: false, forwarded: true},
    {name: 'trusted proxy: client-supplied left entries are not believed', peer: '127.0.0.1', xff: '1.2.3.4, 81.2.69.142', ip: '81.2.69.142', https: false, forwarded: true},
    {name: 'trusted proxy chain: skip trusted hops from the right', peer: '127.0.0.1', xff: '1.2.3.4, 89.160.20.112, 10.1.2.3', ip: '89.160.20.112', https: false, forwarded: true},
    {name: 'all hops trusted: the left-most', peer: '127.0.0.1', xff: '10.0.0.9, 10.1.2.3', ip: '10.0.0.9', https: false, forwarded: true},
    {name: 'unparsable X-Forwarded-For: falls back to the peer', peer: '127.0.0.1', xff: 'not-an-address', ip: '127.0.0.1', https: false, forwarded: false},
    {name: 'garbage left of a good entry: the good right-most one', peer: '127.0.0.1', xff: 'garbage, 81.2.69.142', ip: '81.2.69.142', https: false, forwarded: true},
    {name: 'garbage right of a client entry stops the walk at the last trusted hop', peer: '127.0.0.1', xff: '81.2.69.142, ####', ip: '127.0.0.1', https: false, forwarded: false},
    {name: 'empty X-Forwarded-For: peer', peer: '127.0.0.1', xff: ' , ', ip: '127.0.0.1', https: false, forwarded: false},
    {name: 'IPv4 with a port', peer: '127.0.0.1', xff: '81.2.69.142:5555', ip: '81.2.69.142', https: false, forwarded: true},
    {name: 'bracketed IPv6 with a port', peer: '127.0.0.1', xff: '[2001:218::1]:443', ip: '2001:218::1', https: false, forwarded: true},
    {name: 'IPv6 entry', peer: '::1', xff: '2a02:d180::1', ip: '2a02:d180::1', https: false, forwarded: true},
    {name: 'IPv4-mapped IPv6 peer is reduced to IPv4', peer: '::ffff:203.0.113.7', ip: '203.0.113.7', https: false, forwarded: false},
    {name: 'IPv4-mapped IPv6 trusted peer matches the IPv4 CIDR', peer: '::ffff:127.0.0.1', xff: '89.160.20.112', ip: '89.160.20.112', https: false, forwarded: true},
    {name: 'IPv4-mapped IPv6 in X-Forwarded-For is reduced', peer: '127.0.0.1', xff: '::ffff:81.2.69.142', ip: '81.2.69.142', https: false, forwarded: true},
    {name: 'non-canonical IPv4 forms are not addresses', peer: '127.0.0.1', xff: '0x7f.1', ip: '127.0.0.1', https: false, forwarded: false},
    ...['010.0.0.1', '1.2.3', '127.1', '2130706433', '0x7f000001', '1.2.3.0255', '[fe80::1%eth0]', '[::ffff:010.0.0.1]', '::ffff:1.2.3'].map((xff) => ({
      name: `legacy form ${xff} right of a client entry is garbage: the last believed hop`,
      peer: '127.0.0.1',
      xff: `81.2.69.142, ${xff}`,
      ip: '127.0.0.1',
      https: false,
      forwarded: false,
    })),
    {name: 'legacy form behind a trusted hop: that hop is the client', peer: '127.0.0.1', xff: '81.2.69.142, 010.0.0.1, 10.1.2.3', ip: '10.1.2.3', https: false, forwarded: true},
    {name: 'X-Forwarded-Proto https from a trusted proxy', peer: '127.0.0.1', xff: '81.2.69.142', proto: 'https', ip: '81.2.69.142', https: true, forwarded: true},
    {name: "X-Forwarded-Proto list from an appending proxy: the right-most (the peer's own) counts", peer: '127.0.0.1', proto: 'HTTPS, http', ip: '127.0.0.1', https: false, forwarded: false},
    {
      name: "X-Forwarded-Proto: a client-sent https left of the proxy's http is not believed",
      peer: '127.0.0.1',
      xff: '81.2.69.142',
      proto: 'https, http',
      ip: '81.2.69.142',
      https: false,
      forwarded: true,
    },
    {name: "X-Forwarded-Proto: the proxy's own https counts over a client-sent http", peer: '127.0.0.1', xff: '81.2.69.142', proto: 'http,HTTPS', ip: '81.2.69.142', https: true, forwarded: true},
    {
      name: 'X-Forwarded-Proto through two trusted proxies: the value of the one that faced the client',
      peer: '127.0.0.1',
      xff: '81.2.69.142, 10.1.2.3',
      proto: 'http, https, http',
      ip: '81.2.69.142',
      https: true,
      forwarded: true,
    },
    {
      name: 'X-Forwarded-Proto shorter than the proxy chain (a proxy that sets): its left-most value',
      peer: '127.0.0.1',
      xff: '81.2.69.142, 10.1.2.3',
      proto: 'https',
      ip: '81.2.69.142',
      https: true,
      forwarded: true,
    },
    {name: 'X-Forwarded-Proto repeated lines are joined in order', peer: '127.0.0.1', xff: '81.2.69.142', proto: ['https', 'http'], ip: '81.2.69.142', https: false, forwarded: true},
    {name: "X-Forwarded-Proto with an unknown value keeps the connection's scheme", peer: '127.0.0.1', proto: 'http, wss', tls: true, ip: '127.0.0.1', https: true, forwarded: false},
    {name: 'TLS connection is https without headers', peer: '203.0.113.7', tls: true, ip: '203.0.113.7', https: true, forwarded: false},
    {name: 'repeated header lines are joined in order', peer: '127.0.0.1', xff: ['1.2.3.4', '216.160.83.56'], ip: '216.160.83.56', https: false, forwarded: true},
    {name: 'unknown peer', peer: undefined, xff: '1.2.3.4', ip: '', https: false, forwarded: false},
  ]

  for (const c of cases) {
    it(c.name, () => {
      const r = resolveClient(c.peer, c.xff, c.proto, c.tls ?? false, trusted)
      expect({ip: r.ip, https: r.https, forwarded: r.forwarded}).to.deep.equal({ip: c.ip, https: c.https, forwarded: c.forwarded})
      if (c.ip) expect(r.address?.toString()).to.equal(c.ip)
    })
  }

  it('no trusted proxies: headers never count', () => {
    const r = resolveClient('127.0.0.1', '81.2.69.142', 'https', false, new TrustedProxies())
    expect(r).to.include({ip: '127.0.0.1', https: false, forwarded: false})
  })

  it('parses X-Forwarded-For elements', () => {
    expect(parseForwardedElement(' 192.0.2.1 ')?.toString()).to.equal('192.0.2.1')
    expect(parseForwardedElement('"[2001:db8::1]"')?.toString()).to.equal('2001:db8::1')
    expect(parseForwardedElement('unknown')).to.equal(undefined)
    expect(parseForwardedElement('x'.repeat(100))).to.equal(undefined)
    expect(parseForwardedElement('[2001:db8::1')).to.equal(undefined)
    for (const legacy of ['010.0.0.1', '010.0.0.1:80', '1.2.3', '"1.2.3"', '0x7f.0.0.1', '[fe80::1%25eth0]', '[fe80::1%eth0]:80', '[::ffff:010.0.0.1]'])
      expect(parseForwardedElement(legacy), legacy).to.equal(undefined)
  })

  it('rejects a bad trusted CIDR with a usage error', () => {
    expect(() => new TrustedProxies(['10.0.0.1/8'])).to.throw(/host bits/)
    expect(() => new TrustedProxies(['010.0.0.0/8'])).to.throw('Invalid CIDR "010.0.0.0/8": leading zeros are not allowed (write 10.0.0.0)')
    expect(() => new TrustedProxies(['1.2.3'])).to.throw(/not a full IPv4 address \(four parts\)/)
    expect(() => new TrustedProxies(['fe80::1%eth0'])).to.throw(/zone ids/)
  })
})

describe('who may use ?country=', () => {
  const proxies = new TrustedProxies(['127.0.0.1/32', '10.0.0.0/8'])
  const trust = new CountryQueryTrust(proxies, ['192.0.2.0/24', '2001:db8::/32'])
  const allowed = (peer: string, xff?: string) => trust.allows(resolveClient(peer, xff, undefined, false, proxies))

  it("allows a trusted proxy's own address and the configured client networks, directly or behind the proxy", () => {
    expect(allowed('127.0.0.1')).to.equal(true)
    expect(allowed('127.0.0.1', '10.9.9.9')).to.equal(true)
    expect(allowed('192.0.2.77')).to.equal(true)
    expect(allowed('127.0.0.1', '192.0.2.77')).to.equal(true)
    expect(allowed('2001:db8::5')).to.equal(true)
  })

  it('refuses any other client, however it came: being behind a trusted proxy is not enough', () => {
    expect(allowed('127.0.0.1', '81.2.69.142')).to.equal(false)
    expect(allowed('127.0.0.1', '192.0.2.77, 81.2.69.142')).to.equal(false)
    expect(allowed('81.2.69.142', '127.0.0.1')).to.equal(false)
    expect(allowed('198.51.100.1')).to.equal(false)
    expect(trust.allows({ip: '', https: false, forwarded: false})).to.equal(false)
  })

  it('is off by default; serve.country_query takes off or trusted and refuses true with the reason', () => {
    expect(ConfigSchema.parse({}).serve.country_query).to.equal('off')
    expect(ConfigSchema.parse({serve: {country_query: false}}).serve.country_query).to.equal('off')
    expect(ConfigSchema.parse({serve: {country_query: 'trusted', country_query_clients: '192.0.2.0/24, 2001:db8::/32'}}).serve.country_query_clients).to.deep.equal(['192.0.2.0/24', '2001:db8::/32'])
    const refused = ConfigSchema.safeParse({serve: {country_query: true}})
    expect(refused.success).to.equal(false)
    expect(refused.error!.issues[0].path).to.deep.equal(['serve', 'country_query'])
    expect(refused.error!.issues[0].message).to.match(/^expected off or trusted \(true would let any client steer selection/)
    const badCidr = ConfigSchema.safeParse({serve: {country_query_clients: ['010.0.0.0/8']}})
    expect(badCidr.error!.issues[0].message).to.include('leading zeros are not allowed')
  })
})
