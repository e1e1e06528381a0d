import {expect} from 'chai'
import {addressProblem, cidrContains, cidrRanges, normalizeCidr, normalizeIp, parseCidr, parseIp} from '../../src/lib/net.js'

describe('net: addresses and prefixes', () => {
  it('parses standard IPv4 and IPv6 text and reduces IPv4-mapped IPv6', () => {
    expect(normalizeIp('81.2.69.142')).to.equal('81.2.69.142')
    expect(normalizeIp('2001:db8::1')).to.equal('2001:db8::1')
    expect(normalizeIp('::ffff:81.2.69.142')).to.equal('81.2.69.142')
    expect(normalizeIp('::81.2.69.142')).to.equal('81.2.69.142')
    expect(normalizeIp('1::81.2.69.142')).to.equal('1::5102:458e')
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

  const LEGACY: Array<[string, RegExp]> = [
    ['010.0.0.1', /leading zeros are not allowed \(write 10\.0\.0\.1\)/],
    ['1.2.3', /not a full IPv4 address \(four parts\)/],
    ['127.1', /not a full IPv4 address \(four parts\)/],
    ['2130706433', /not a full IPv4 address \(four parts\)/],
    ['0x7f.0.0.1', /hexadecimal parts are not allowed/],
    ['0x7f000001', /hexadecimal parts are not allowed/],
    ['1.2.3.256', /each part of an IPv4 address is 0-255/],
    ['fe80::1%eth0', /zone ids/],
    ['::ffff:010.0.0.1', /embedded IPv4 part is wrong: leading zeros are not allowed \(write 10\.0\.0\.1\)/],
    ['::ffff:1.2.3', /embedded IPv4 part is wrong: not a full IPv4 address/],
    ['::ffff:0x7f.0.0.1', /embedded IPv4 part is wrong: hexadecimal/],
    ['1::2::3', /not an IPv6 address in RFC 4291 text form/],
    ['localhost', /neither a dotted quad/],
  ]

  it('refuses every legacy (inet_aton) and non-standard form, and says why', () => {
    for (const [bad, why] of LEGACY) {
      expect(parseIp(bad), bad).to.equal(undefined)
      expect(addressProblem(bad), bad).to.match(why)
    }
    for (const good of ['0.0.0.0', '10.0.0.1', '255.255.255.255', '2001:db8::1', '::ffff:10.0.0.1', '::', 'FE80::1']) expect(addressProblem(good), good).to.equal(undefined)
  })

  it('refuses legacy forms in CIDRs, naming the fix', () => {
    expect(() => parseCidr('010.0.0.0/8')).to.throw('Invalid CIDR "010.0.0.0/8": leading zeros are not allowed (write 10.0.0.0)')
    expect(() => parseCidr('1.2.3')).to.throw('Invalid CIDR "1.2.3": not a full IPv4 address (four parts)')
    for (const [bad, why] of LEGACY) {
      expect(() => parseCidr(bad), bad).to.throw(why)
      if (bad.includes('%')) continue
      expect(() => parseCidr(`${bad}/8`), `${bad}/8`).to.throw(why)
    }
    expect(() => parseCidr('fe80::%eth0/64')).to.throw(/zone ids/)
    expect(() => parseCidr('10.0.0.0/+8')).to.throw(/prefix length must be a whole number from 0 to 32/)
    expect(() => parseCidr('10.0.0.0/')).to.throw(/prefix length/)
    expect(() => parseCidr('2001:db8::/129')).to.throw(/from 0 to 128/)
    expect(normalizeCidr(' 10.0.0.0/8 ')).to.equal('10.0.0.0/8')
    expect(normalizeCidr('0.0.0.0/0')).to.equal('0.0.0.0/0')
    expect(normalizeCidr('::ffff:10.0.0.0/104')).to.equal('10.0.0.0/8')
    expect(normalizeCidr('::ffff:81.2.69.142/128')).to.equal('81.2.69.142/32')
    expect(normalizeCidr('::/80')).to.equal('::/80')
    expect(cidrContains(parseCidr('::ffff:10.0.0.0/104'), parseIp('10.1.2.3')!)).to.equal(true)
  })

  it('names the special-purpose ranges at both ends of a prefix', () => {
    expect(cidrRanges(parseCidr('10.0.0.0/8'))).to.deep.equal(['private'])
    expect(cidrRanges(parseCidr('81.2.0.0/16'))).to.deep.equal(['unicast'])
    expect(cidrRanges(parseCidr('0.0.0.0/0'))).to.deep.equal(['unspecified', 'broadcast'])
  })
})
