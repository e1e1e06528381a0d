import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {parseFtpDate, parseFtpListing, type FtpListItem} from '../../src/lib/scan/ftp-listing.js'
import {parseFtpUrl} from '../../src/lib/scan/ftp.js'

const fixture = (name: string) => readFileSync(fileURLToPath(new URL(`../fixtures/listings/${name}`, import.meta.url)), 'utf8')
const byName = (items: FtpListItem[]) => new Map(items.map((i) => [i.name, i]))
const NOW = new Date('2026-11-29T17:00:00Z')
const JAN2 = Date.UTC(2026, 0, 2) / 1000

describe('FTP listing parser on recorded listings', () => {
  it('reads vsftpd LIST -a (Unix): spaces, #, +, %, :, UTF-8, symlink lines, year-only and time dates', () => {
    const m = byName(parseFtpListing(fixture('ftp-vsftpd-root.txt'), NOW))
    expect(m.has('.')).to.equal(false)
    expect(m.has('..')).to.equal(false)
    expect(m.get('.~tmp~')?.type).to.equal('dir') // the lister skips it, the parser reports it
    for (const [name, size] of Object.entries({
      'README.txt': 42,
      'colon:name.txt': 16,
      'hash#name.txt': 12,
      'percent%41name.txt': 14,
      'percent%name.txt': 15,
      'plus+name.txt': 13,
      'with space.txt': 11,
      'ütf8-ñame-日本.txt': 17,
    })) {
      expect(m.get(name), name).to.deep.equal({name, type: 'file', size, mtime: JAN2, mtimePrecision: 86_400})
    }
    expect(m.get('a:b dir')).to.include({type: 'dir'})
    expect(m.get('dir with space')).to.include({type: 'dir'})
    expect(m.get('link-to-file.bin')).to.deep.equal({
      name: 'link-to-file.bin',
      type: 'symlink',
      size: 24,
      link: 'real dir/target file.bin',
      mtime: Date.UTC(2026, 10, 29, 16, 23) / 1000,
      mtimePrecision: 60,
    })
    expect(m.get('linked-dir')).to.include({type: 'symlink', link: 'real dir'})
  })

  it('reads a subdirectory listing from vsftpd', () => {
    const items = parseFtpListing(fixture('ftp-vsftpd-subdir.txt'), NOW)
    expect(items.map((i) => `${i.type}:${i.name}:${i.size}`)).to.deep.equal(['dir:.~tmp~:4096', 'file:big.iso:100000', 'dir:nested:4096', 'file:target file.bin:1536'])
  })

  it('reads DOS/IIS LIST lines with 12-hour and 24-hour times and 2- or 4-digit years', () => {
    const m = byName(parseFtpListing(fixture('ftp-iis-dos.txt'), NOW))
    expect(m.get('dir with space')).to.deep.equal({name: 'dir with space', type: 'dir', size: 0, mtime: Date.UTC(2026, 0, 2, 3, 4) / 1000, mtimePrecision: 60})
    expect(m.get('big file.iso')).to.deep.equal({name: 'big file.iso', type: 'file', size: 100_000, mtime: Date.UTC(2026, 10, 29, 16, 23) / 1000, mtimePrecision: 60})
    expect(m.get('target file.bin')?.mtime).to.equal(Date.UTC(2026, 0, 2, 12, 4) / 1000)
    expect(m.get('midnight.txt')?.mtime).to.equal(Date.UTC(2026, 0, 2, 0, 30) / 1000)
    expect(m.get('four digit year.txt')).to.include({size: 17, mtime: Date.UTC(2026, 0, 2, 15, 4) / 1000})
  })

  it('reads MLSD (RFC 3659) facts: UTC seconds, symlink facts, no cdir/pdir', () => {
    const m = byName(parseFtpListing(fixture('ftp-mlsd-pureftpd.txt'), NOW))
    expect([...m.keys()]).to.deep.equal(['README.txt', 'dir with space', 'linked-dir', 'target file.bin', 'colon:name.txt'])
    expect(m.get('README.txt')).to.deep.equal({name: 'README.txt', type: 'file', size: 42, mtime: Date.UTC(2026, 0, 2, 3, 4, 5) / 1000, mtimePrecision: 1})
    expect(m.get('linked-dir')).to.include({type: 'symlink', link: '/srv/real'})
    expect(m.get('target file.bin')?.mtime).to.equal(Date.UTC(2026, 0, 2, 3, 4, 5) / 1000)
  })
})

describe('FTP dates and URLs', () => {
  it('gives year-less Unix dates the year that puts them in the past', () => {
    expect(parseFtpDate('Nov 29 16:23', NOW)).to.deep.equal({mtime: Date.UTC(2026, 10, 29, 16, 23) / 1000, precision: 60})
    expect(parseFtpDate('Dec 30 10:00', NOW)).to.deep.equal({mtime: Date.UTC(2025, 11, 30, 10, 0) / 1000, precision: 60})
    expect(parseFtpDate('Nov 29 16:23', new Date('2027-01-05T00:00:00Z'))?.mtime).to.equal(Date.UTC(2026, 10, 29, 16, 23) / 1000)
    expect(parseFtpDate('Jan  2  2026', NOW)).to.deep.equal({mtime: JAN2, precision: 86_400})
    expect(parseFtpDate('yesterday', NOW)).to.equal(undefined)
  })

  it('parses ftp:// URLs per RFC 1738 and never repeats the password', () => {
    const t = parseFtpUrl('ftp://mirror:s3cr%40t@ftp.example.org:2121/pub/linux%20isos;type=d')
    expect(t).to.deep.include({host: 'ftp.example.org', port: 2121, user: 'mirror', password: 's3cr@t', secure: false, segments: ['pub', 'linux isos'], absolute: false})
    expect(t.display).to.not.include('s3cr')
    expect(parseFtpUrl('ftp://h/%2Fsrv/ftp').absolute).to.equal(true)
    expect(parseFtpUrl('ftp://h/%2Fsrv/ftp').segments).to.deep.equal(['srv', 'ftp'])
    expect(parseFtpUrl('ftp://h/')).to.deep.include({user: 'anonymous', password: 'mb@', segments: [], port: 21})
    expect(parseFtpUrl('ftps://h/pub').secure).to.equal(true)
    expect(parseFtpUrl('ftp://h/pub', 'implicit')).to.deep.include({secure: 'implicit', port: 990})
    let message = ''
    try {
      parseFtpUrl('http://user:hunter2@h/')
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).to.match(/^Not an FTP URL: http:\/\/user:\*\*\*@h\/;/)
    expect(message).to.not.include('hunter2')
  })
})
