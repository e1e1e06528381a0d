import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {childFromHref, decodeSegment, parseHtmlIndex, parseIndexDate, parseIndexSize, parseJsonIndex, parseXmlIndex, type IndexEntry} from '../../src/lib/scan/http-listing.js'

const fixture = (name: string) => readFileSync(fileURLToPath(new URL(`../fixtures/listings/${name}`, import.meta.url)), 'utf8')
const byName = (entries: IndexEntry[]) => new Map(entries.map((e) => [e.name, e]))
/** 2026-01-02T03:04:05Z, the mirror tree's mtime. */
const T = Date.UTC(2026, 0, 2, 3, 4, 5) / 1000
const T_MIN = T - 5

const ROOT_FILES: Record<string, number> = {
  'README.txt': 42,
  'colon:name.txt': 16,
  'hash#name.txt': 12,
  'link-to-file.bin': 1536,
  'percent%41name.txt': 14,
  'percent%name.txt': 15,
  'plus+name.txt': 13,
  'with space.txt': 11,
  'ütf8-ñame-日本.txt': 17,
}
const ROOT_DIRS = ['a:b dir', 'bulk', 'dir with space', 'empty-dir', 'linked-dir', 'real dir', 'sizes', 'ünï']

describe('HTTP index parsers on recorded listings', () => {
  it('reads nginx autoindex HTML: decoded names, exact sizes, UTC minutes', () => {
    const entries = parseHtmlIndex(fixture('http-nginx-root.html'), new URL('http://127.0.0.1:8080/'))
    const m = byName(entries)
    expect([...m.keys()].sort()).to.deep.equal([...ROOT_DIRS, ...Object.keys(ROOT_FILES)].sort())
    for (const d of ROOT_DIRS) expect(m.get(d)).to.include({type: 'dir', mtime: T_MIN, mtimePrecision: 60})
    for (const [name, size] of Object.entries(ROOT_FILES)) {
      expect(m.get(name), name).to.deep.equal({name, type: 'file', size, mtime: T_MIN, mtimePrecision: 60})
    }
  })

  it('reads nginx HTML of a subdirectory and a name nginx truncates for display', () => {
    const sub = byName(parseHtmlIndex(fixture('http-nginx-subdir.html'), new URL('http://127.0.0.1:8080/real%20dir/')))
    expect([...sub.keys()]).to.deep.equal(['nested', 'big.iso', 'target file.bin'])
    expect(sub.get('big.iso')?.size).to.equal(100_000)
    const long = parseHtmlIndex(fixture('http-nginx-longname.html'), new URL('http://127.0.0.1:8080/empty-dir/'))
    expect(long).to.deep.equal([
      {name: 'a-very-long-file-name-that-nginx-truncates-in-the-listing-display.tar.gz', type: 'file', size: 0, mtime: Date.UTC(2026, 10, 28, 10, 0) / 1000, mtimePrecision: 60},
    ])
  })

  it('reads nginx autoindex_format json with second precision', () => {
    const m = byName(parseJsonIndex(fixture('http-nginx-root.json')))
    expect([...m.keys()].sort()).to.deep.equal([...ROOT_DIRS, ...Object.keys(ROOT_FILES)].sort())
    for (const [name, size] of Object.entries(ROOT_FILES)) expect(m.get(name)).to.deep.equal({name, type: 'file', size, mtime: T, mtimePrecision: 1})
    const sizes = byName(parseJsonIndex(fixture('http-nginx-sizes.json')))
    expect(sizes.get('zero.bin')?.size).to.equal(0)
    expect(sizes.get('1048576.bin')?.size).to.equal(1_048_576)
  })

  it('reads nginx autoindex_format xml', () => {
    const xml =
      '<?xml version="1.0"?>\n<list>\n<directory mtime="2026-01-02T03:04:05Z">a:b dir</directory>\n<file mtime="2026-01-02T03:04:05Z" size="12">hash#name.txt</file>\n<file mtime="2026-01-02T03:04:05Z" size="13">a &amp; b.txt</file>\n</list>\n'
    expect(parseXmlIndex(xml)).to.deep.equal([
      {name: 'a:b dir', type: 'dir', size: 0, mtime: T, mtimePrecision: 1},
      {name: 'hash#name.txt', type: 'file', size: 12, mtime: T, mtimePrecision: 1},
      {name: 'a & b.txt', type: 'file', size: 13, mtime: T, mtimePrecision: 1},
    ])
  })

  it('reads lighttpd mod_dirlisting: human sizes become ranges that hold the true size', () => {
    const m = byName(parseHtmlIndex(fixture('http-lighttpd-root.html'), new URL('http://127.0.0.1:8080/')))
    expect([...m.keys()].sort()).to.deep.equal([...ROOT_DIRS, ...Object.keys(ROOT_FILES)].sort())
    for (const [name, size] of Object.entries(ROOT_FILES)) {
      const e = m.get(name)!
      expect(e, name).to.include({type: 'file', sizeApproximate: true, mtime: T, mtimePrecision: 1})
      expect(e.sizeMin, name).to.be.at.most(size)
      expect(e.sizeMax, name).to.be.at.least(size)
    }
    const sizes = byName(parseHtmlIndex(fixture('http-lighttpd-sizes.html'), new URL('http://127.0.0.1:8080/sizes/')))
    const truth: Record<string, number> = {'zero.bin': 0, 'one.bin': 1, '99.bin': 99, '972.bin': 972, '1023.bin': 1023, '1024.bin': 1024, '5000.bin': 5000, '1048576.bin': 1_048_576}
    expect([...sizes.keys()].sort()).to.deep.equal(Object.keys(truth).sort())
    for (const [name, size] of Object.entries(truth)) {
      const e = sizes.get(name)!
      expect(e.sizeMin! <= size && size <= e.sizeMax!, `${name}: ${size} in [${e.sizeMin}, ${e.sizeMax}]`).to.equal(true)
      // Ranges stay tight enough to catch a truncated copy of a larger file.
      if (size >= 1024) expect(e.sizeMax! - e.sizeMin!).to.be.below(size * 0.3 + 500)
    }
  })

  it('reads an Apache 2.4 HTMLTable index (Debian default): ./ colon links, exact small sizes, 98K ranges, no sort or parent links', () => {
    const entries = parseHtmlIndex(fixture('http-apache-table.html'), new URL('http://127.0.0.1:8080/pub/'))
    const m = byName(entries)
    expect([...m.keys()]).to.deep.equal([
      'a:b dir',
      'dir with space',
      'README.txt',
      'big.iso',
      'colon:name.txt',
      'hash#name.txt',
      'percent%name.txt',
      'plus+name.txt',
      'target file.bin',
      'huge.iso',
      'ütf8-ñame-日本.txt',
    ])
    expect(m.get('README.txt')).to.deep.equal({name: 'README.txt', type: 'file', size: 42, mtime: Date.UTC(2026, 0, 2, 3, 4) / 1000, mtimePrecision: 60})
    expect(m.get('plus+name.txt')?.size).to.equal(13)
    const big = m.get('big.iso')!
    expect(big.sizeApproximate).to.equal(true)
    expect(big.sizeMin).to.be.at.most(100_000)
    expect(big.sizeMax).to.be.at.least(100_000)
    const huge = m.get('huge.iso')!
    expect(huge.sizeMin).to.be.at.most(4_700_000_000)
    expect(huge.sizeMax).to.be.at.least(4_700_000_000)
  })

  it('reads an Apache FancyIndexing <pre> index with IconsAreLinks and dd-Mon-yyyy dates', () => {
    const m = byName(parseHtmlIndex(fixture('http-apache-pre.html'), new URL('http://127.0.0.1:8080/pub/real%20dir/')))
    expect([...m.keys()]).to.deep.equal(['nested', 'big.iso', 'target file.bin', 'small.txt'])
    expect(m.get('small.txt')).to.deep.equal({name: 'small.txt', type: 'file', size: 972, mtime: Date.UTC(2026, 0, 2, 3, 4) / 1000, mtimePrecision: 60})
    expect(m.get('target file.bin')).to.include({sizeApproximate: true})
  })

  it('reads a styled index with plain links, ignoring navigation, other hosts, deeper links and fragments', () => {
    const m = byName(parseHtmlIndex(fixture('http-styled-index.html'), new URL('http://mirror.example.org/pub/')))
    expect([...m.keys()]).to.deep.equal(['releases', 'with space', 'big.iso', 'checksums+txt.sha256', 'notes.txt'])
    expect(m.get('checksums+txt.sha256')).to.deep.equal({name: 'checksums+txt.sha256', type: 'file', size: 1204, mtime: Date.UTC(2026, 0, 2, 3, 4) / 1000, mtimePrecision: 60})
    expect(m.get('big.iso')).to.include({sizeApproximate: true, mtime: T, mtimePrecision: 1})
    expect(m.get('big.iso')!.sizeMin).to.be.at.most(100_000)
    // No size shown: unknown, the widest range.
    expect(m.get('notes.txt')).to.deep.equal({name: 'notes.txt', type: 'file', size: 0, sizeApproximate: true, sizeMin: 0, sizeMax: Number.MAX_SAFE_INTEGER})
  })
})

describe('HTTP index helpers', () => {
  const dir = new URL('http://h.example/pub/sub%20dir/')
  it('accepts only direct children of the directory', () => {
    expect(childFromHref('a%20b.txt', dir)).to.deep.equal({name: 'a b.txt', isDir: false})
    expect(childFromHref('x/', dir)).to.deep.equal({name: 'x', isDir: true})
    expect(childFromHref('/pub/sub dir/y.iso', dir)).to.deep.equal({name: 'y.iso', isDir: false})
    expect(childFromHref('colon:x.txt', dir)).to.deep.equal({name: 'colon:x.txt', isDir: false})
    expect(childFromHref('hash%23x', dir)).to.deep.equal({name: 'hash#x', isDir: false})
    for (const href of ['../', '/', '?C=N;O=D', '#top', 'x/y.txt', 'http://other.example/pub/sub%20dir/z', 'https://h.example/pub/sub%20dir/z', 'ftp://h.example/pub/', 'mailto:a@b', './', '.']) {
      expect(childFromHref(href, dir), href).to.equal(undefined)
    }
  })

  it('decodes percent-escapes, keeps + and falls back to Latin-1 on invalid UTF-8', () => {
    expect(decodeSegment('a%2Bb+c%25%3A%23')).to.equal('a+b+c%:#')
    expect(decodeSegment('%C3%BC')).to.equal('ü')
    expect(decodeSegment('caf%E9')).to.equal('café')
    expect(decodeSegment('100%')).to.equal('100%')
  })

  it('parses the date formats of nginx, Apache, lighttpd and RFC 1123', () => {
    expect(parseIndexDate('  02-Jan-2026 03:04   42')).to.include({mtime: T_MIN, precision: 60})
    expect(parseIndexDate('2026-01-02 03:04  ')).to.include({mtime: T_MIN, precision: 60})
    expect(parseIndexDate('2026-Jan-02 03:04:05')).to.include({mtime: T, precision: 1})
    expect(parseIndexDate('Fri, 02 Jan 2026 03:04:05 GMT')).to.include({mtime: T, precision: 1})
    expect(parseIndexDate('2026-01-02T03:04:05Z')).to.include({mtime: T, precision: 1})
    expect(parseIndexDate('2026-01-02')).to.include({mtime: Date.UTC(2026, 0, 2) / 1000, precision: 86_400})
    expect(parseIndexDate('no date here 42')).to.equal(undefined)
  })

  it('parses sizes: exact bytes, Apache and lighttpd units, decimal and binary units, none', () => {
    expect(parseIndexSize('  42 ')).to.deep.equal({size: 42, approximate: false, min: 42, max: 42})
    expect(parseIndexSize('1,204 bytes')).to.deep.equal({size: 1204, approximate: false, min: 1204, max: 1204})
    expect(parseIndexSize(' - ')).to.equal(undefined)
    expect(parseIndexSize('')).to.equal(undefined)
    const k = parseIndexSize('1.5K')!
    expect(k.approximate).to.equal(true)
    expect(k.min <= 1536 && 1536 <= k.max).to.equal(true)
    const mb = parseIndexSize('700 MB')!
    expect(mb.min <= 700_000_000 && 700 * 1024 * 1024 <= mb.max).to.equal(true)
    const g = parseIndexSize('4.4G')!
    expect(g.min <= 4.4 * 2 ** 30 && 4.4 * 2 ** 30 <= g.max).to.equal(true)
  })
})
