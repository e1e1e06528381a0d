import {validateHeaderValue} from 'node:http'
import {expect} from 'chai'
import {headerSafe, isPlainHost} from '../../src/lib/text.js'

describe('text: header values', () => {
  it('headerSafe keeps printable ASCII and percent-encodes everything else as UTF-8', () => {
    expect(headerSafe('ftp.example.de')).to.equal('ftp.example.de')
    expect(headerSafe('http://m.example/a b?x=%41')).to.equal('http://m.example/a b?x=%41')
    expect(headerSafe('mïrror€')).to.equal('m%C3%AFrror%E2%82%AC')
    expect(headerSafe('a\r\nSet-Cookie: x')).to.equal('a%0D%0ASet-Cookie: x')
    expect(headerSafe('t\tx\u007f😀\uD800')).to.equal('t%09x%7F%F0%9F%98%80%EF%BF%BD')
    for (const value of ['mïrror€', '\u0000\u001f', 'é', '\uDFFF']) expect(() => validateHeaderValue('X-T', headerSafe(value))).not.to.throw()
  })
  it('isPlainHost takes host[:port] names, IPv4 and bracketed IPv6 only', () => {
    for (const host of ['mb.example', 'mb.example:8080', '127.0.0.1:80', '[::1]:8080', '[2001:db8::1]', 'localhost']) expect(isPlainHost(host), host).to.equal(true)
    for (const host of ['', 'mïrror', 'a b', 'a\u0001b', 'a>b', 'a/b', 'a@b', 'h:p', 'h:123456', '[::1', '-x.example', 'a,b']) expect(isPlainHost(host), host).to.equal(false)
  })
})
