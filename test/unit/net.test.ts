import {expect} from 'chai'
import {normalizeCidr, normalizeIp, parseCidr, parseIp} from '../../src/lib/net.js'

describe('net: addresses and prefixes', () => {
  it('parses standard IPv4 and IPv6 text and reduces IPv4-mapped IPv6', () => {
    expect(normalizeIp('81.2.69.142')).to.equal('81.2.69.142')
    expect(normalizeIp('2001:db8::1')).to.equal('2001:db8::1')
    expect(normalizeIp('::ffff:81.2.69.142')).to.equal('81.2.69.142')
  })

  it('rejects legacy IPv4 shorthands and junk', () => {
    for (const bad of ['1.2.3', '0x7f.1', '127.1', '1.2.3.4.5', '', 'localhost', '1.2.3.256', '::g']) {
      expect(parseIp(bad), bad).to.equal(undefined)
    }
  })

  it('normalises CIDRs and refuses host bits', () => {
    expect(normalizeCidr('10.1.0.0/16')).to.equal('10.1.0.0/16')
    expect(normalizeCidr('2001:db8::/32')).to.equal('2001:db8::/32')
    expect(normalizeCidr('192.0.2.7')).to.equal('192.0.2.7/32')
    expect(() => parseCidr('10.1.2.3/16')).to.throw(/host bits are set; did you mean 10\.1\.0\.0\/16/)
    expect(() => parseCidr('10.0.0.0/33')).to.throw(/Invalid CIDR/)
    expect(() => parseCidr('nonsense')).to.throw(/Invalid CIDR/)
  })
})
