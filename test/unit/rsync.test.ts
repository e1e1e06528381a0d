import {readFileSync} from 'node:fs'
import {expect} from 'chai'
import {decodeRsyncName, isRsyncTmp, parseRsyncLine, parseRsyncUrl, RsyncParseError} from '../../src/lib/scan/rsync.js'

const fixture = (name: string) =>
  readFileSync(new URL(`../fixtures/listings/${name}`, import.meta.url), 'utf8')
    .split('\n')
    .filter(Boolean)

describe('rsync listing parser', () => {
  it('parses a recorded daemon listing: files, dirs, symlinks, awkward names', () => {
    const lines = fixture('rsync-3.5.0-daemon.txt').map(parseRsyncLine)
    const byName = new Map(lines.map((l) => [l.name, l]))
    expect(byName.get('.')!.type).to.equal('dir')
    const big = byName.get('big.iso')!
    expect(big).to.deep.include({type: 'file', size: 1234567, mtime: Date.UTC(2020, 0, 2, 3, 4, 5) / 1000, mode: '-rw-r--r--'})
    expect(byName.get('link.iso')!.type).to.equal('symlink')
    expect(byName.get('linkdir')!.type).to.equal('symlink')
    expect(byName.get('a dir/x #1+%:ü.txt')).to.deep.include({type: 'file', size: 5})
    expect(byName.get('weird/a b#c+d%e:f.txt')).to.deep.include({type: 'file', size: 3, mtime: Date.UTC(2024, 1, 29, 23, 59, 59) / 1000})
    expect(byName.get('weird/Grüße 日本.iso')).to.deep.include({type: 'file', size: 4})
    expect(byName.get('weird/ leading space')).to.deep.include({type: 'file', size: 1})
    expect(byName.get('weird/new\nline')).to.deep.include({type: 'file', size: 1})
    expect(byName.get('empty')!.type).to.equal('dir')
    expect(byName.get('.~tmp~/partial')!.type).to.equal('file')
  })

  it('reads sizes with thousands separators the same way', () => {
    const plain = fixture('rsync-3.5.0-daemon.txt').map(parseRsyncLine)
    const commas = fixture('rsync-3.5.0-daemon-commas.txt').map(parseRsyncLine)
    expect(commas.map((l) => [l.name, l.size, l.mtime])).to.deep.equal(plain.map((l) => [l.name, l.size, l.mtime]))
    expect(commas.find((l) => l.name === 'big.iso')!.size).to.equal(1234567)
  })

  it('with --copy-links, symlinked files are files and symlinked dirs are descended', () => {
    const lines = fixture('rsync-3.5.0-daemon-copy-links.txt').map(parseRsyncLine)
    const byName = new Map(lines.map((l) => [l.name, l]))
    expect(byName.get('link.iso')).to.deep.include({type: 'file', size: 1234567, mtime: Date.UTC(2020, 0, 2, 3, 4, 5) / 1000})
    expect(byName.get('linkdir')!.type).to.equal('dir')
    expect(byName.get('linkdir/x #1+%:ü.txt')).to.deep.include({type: 'file', size: 5})
    expect(lines.filter((l) => l.type === 'symlink')).to.deep.equal([])
  })

  it('parses local listings with symlink lines', () => {
    const lines = fixture('rsync-3.5.0-local-symlinks.txt').map(parseRsyncLine)
    expect(
      lines
        .filter((l) => l.type === 'symlink')
        .map((l) => l.name)
        .sort(),
    ).to.deep.equal(['link.iso', 'linkdir', 'outside'])
  })

  it('strips a "-> target" shown by older clients on symlink lines', () => {
    expect(parseRsyncLine('lrwxrwxrwx          7 2026/01/02 03:04:05 latest -> 15.6').name).to.equal('latest')
  })

  it('accepts ACL/xattr markers and special files', () => {
    expect(parseRsyncLine('-rw-r--r--+      10 2026/01/02 03:04:05 acl file').name).to.equal('acl file')
    expect(parseRsyncLine('prw-r--r--        0 2026/01/02 03:04:05 fifo').type).to.equal('other')
  })

  it('throws a clear RsyncParseError on a broken line, quoting it', () => {
    expect(() => parseRsyncLine('MOTD: welcome to the mirror')).to.throw(RsyncParseError, /Unexpected line in the rsync listing: "MOTD: welcome/)
    expect(() => parseRsyncLine('-rw-r--r--   12 2026/01/02 name-without-time')).to.throw(RsyncParseError)
    expect(() => parseRsyncLine('')).to.throw(RsyncParseError)
  })

  it('decodes \\#ooo escapes as UTF-8 bytes', () => {
    expect(decodeRsyncName('a\\#012b')).to.equal('a\nb')
    expect(decodeRsyncName('\\#303\\#274ber')).to.equal('über')
    expect(decodeRsyncName('plain')).to.equal('plain')
  })

  it('recognises .~tmp~ components', () => {
    expect(isRsyncTmp('.~tmp~')).to.equal(true)
    expect(isRsyncTmp('.~tmp~/x')).to.equal(true)
    expect(isRsyncTmp('a/.~tmp~/x')).to.equal(true)
    expect(isRsyncTmp('a/.~tmp~')).to.equal(true)
    expect(isRsyncTmp('a/x.~tmp~y')).to.equal(false)
  })

  it('keeps the password out of the parsed URL and its display form', () => {
    const url = parseRsyncUrl('rsync://alice:s3cret@host:873/mod/sub dir')
    expect(url).to.deep.include({user: 'alice', password: 's3cret', url: 'rsync://alice@host:873/mod/sub dir/'})
    expect(url.display).to.not.include('s3cret')
    expect(() => parseRsyncUrl('http://host/')).to.throw(/Not an rsync:\/\/ URL/)
  })
})
