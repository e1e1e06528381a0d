import {expect} from 'chai'
import picomatch from 'picomatch'
import {loadConfig} from '../../src/lib/config/index.js'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {compileMirror, compileMirrors, compileSelectOptions, encodePath, MirrorTable, mirrorUrl} from '../../src/lib/select/index.js'
import {relativeReference} from '../../src/lib/select/url.js'
import {globToLike} from '../../src/lib/lookup/files.js'
import {DEFAULT_ORIGIN_ONLY} from '../../src/lib/select/config.js'
import {ELIGIBILITY_RULES} from '../../src/lib/select/rules.js'

const base = {
  id: 7,
  identifier: 'mirror.example.de',
  http_url: 'http://mirror.example.de/pub',
  https_url: 'https://mirror.example.de/pub/',
  country: 'de',
  continent: null,
  latitude: 50.1,
  longitude: 8.7,
  asn: '4294967295',
  prefixes: ['192.0.2.0/24', '2001:db8::/32'],
  client_prefixes: '{198.51.100.0/24}',
  ftp_url: 'ftp://mirror.example.de/pub',
  rsync_url: 'rsync://scan:secret@mirror.example.de/pub/',
  other_countries: ['at', 'CH'],
  exclude_countries: ['cn'],
  score: 150,
  enabled: true,
  up: true,
  ipv6: null,
  country_only: false,
  region_only: true,
  as_only: false,
  prefix_only: false,
  fallback: false,
  file_maxsize: '4294967296',
  base_path: '/distribution',
  needs_rescan: false,
  last_scan_ok_at: new Date('2026-01-02T03:04:05.678Z'),
} as unknown as MirrorRow

describe('select: compileMirror', () => {
  it('normalises a row for the hot path', () => {
    const m = compileMirror(base)
    expect(m).to.deep.include({
      id: 7,
      identifier: 'mirror.example.de',
      httpUrl: 'http://mirror.example.de/pub/',
      httpsUrl: 'https://mirror.example.de/pub/',
      ftpUrl: 'ftp://mirror.example.de/pub/',
      rsyncUrl: null, // carries credentials: a scan address, never shown to clients
      country: 'DE',
      continent: 'EU',
      latitude: 50.1,
      longitude: 8.7,
      asn: 4294967295,
      score: 150,
      ipv6: null,
      regionOnly: true,
      fileMaxsize: 4294967296,
      basePath: 'distribution/',
      lastScanOkAt: 1767323045,
      needsRescan: false,
    })
    expect(m.prefixes.map(([a, b]) => `${a.toString()}/${b}`)).to.deep.equal(['192.0.2.0/24', '2001:db8::/32'])
    expect(m.clientPrefixes.map(([a, b]) => `${a.toString()}/${b}`)).to.deep.equal(['198.51.100.0/24'])
    expect([...m.otherCountries]).to.deep.equal(['AT', 'CH'])
    expect([...m.excludeCountries]).to.deep.equal(['CN'])
  })
  it('keeps missing values null, and a lone coordinate counts as no position', () => {
    const m = compileMirror({
      ...base,
      http_url: null,
      https_url: '',
      country: null,
      continent: 'oc',
      latitude: 10,
      longitude: null,
      asn: null,
      file_maxsize: null,
      base_path: '',
      last_scan_ok_at: null,
      prefixes: [],
      client_prefixes: [],
    } as unknown as MirrorRow)
    expect(m).to.deep.include({httpUrl: null, httpsUrl: null, country: null, continent: 'OC', latitude: null, longitude: null, asn: null, fileMaxsize: null, basePath: '', lastScanOkAt: null})
    expect(m.prefixes).to.deep.equal([])
  })
  it('keeps the end of a maintenance window to the millisecond (Date or timestamp text), null when none', () => {
    expect(compileMirror({...base, maintenance_until: new Date('2026-12-01T18:00:00.250Z')} as unknown as MirrorRow).maintenanceUntil).to.equal(1796148000.25)
    expect(compileMirror({...base, maintenance_until: '2026-12-01T18:00:00+00:00'} as unknown as MirrorRow).maintenanceUntil).to.equal(1796148000)
    expect(compileMirror(base).maintenanceUntil).to.equal(null)
  })
})

describe('select: mirror URLs', () => {
  const m = compileMirror(base)
  it('encodes every path segment (RFC 3986), keeping / and every pchar of §3.3 literal', () => {
    const cases: Array<[string, string]> = [
      ['distribution/a b.iso', 'a%20b.iso'],
      ['distribution/x#1?.iso', 'x%231%3F.iso'],
      ['distribution/100%.iso', '100%25.iso'],
      ['distribution/c++/g+.tar.gz', 'c++/g+.tar.gz'],
      ['distribution/a:b/c;d=e&f.iso', 'a:b/c;d=e&f.iso'],
      ['distribution/openSUSE:Backports:SLE-15/x@y,z$1.rpm', 'openSUSE:Backports:SLE-15/x@y,z$1.rpm'],
      ['distribution/a[1]{2}|^`"<>\\.iso', 'a%5B1%5D%7B2%7D%7C%5E%60%22%3C%3E%5C.iso'],
      ['distribution/café: 1+1=2.iso', 'caf%C3%A9:%201+1=2.iso'],
      ['distribution/ünïcödé/日本.iso', '%C3%BCn%C3%AFc%C3%B6d%C3%A9/%E6%97%A5%E6%9C%AC.iso'],
      ["distribution/it's (1)!*.iso", "it's%20(1)!*.iso"],
      ['distribution/plain-Name_1.0~rc.iso', 'plain-Name_1.0~rc.iso'],
      ['distribution/sub/dir/', 'sub/dir/'],
    ]
    for (const [path, encoded] of cases) expect(mirrorUrl(m, path, false), path).to.equal(`http://mirror.example.de/pub/${encoded}`)
  })
  it('each encoded URL decodes back to the path', () => {
    const path = 'distribution/dir with space/a#b?c%d+e:f/ünï.iso'
    const url = new URL(mirrorUrl(m, path, true))
    expect(url.hash).to.equal('')
    expect(url.search).to.equal('')
    expect(decodeURIComponent(url.pathname)).to.equal('/pub/dir with space/a#b?c%d+e:f/ünï.iso')
  })
  it('chooses the scheme: https for HTTPS clients, http (else https) for HTTP clients', () => {
    expect(mirrorUrl(m, 'distribution/x', true)).to.equal('https://mirror.example.de/pub/x')
    const httpsOnly = compileMirror({...base, http_url: null} as unknown as MirrorRow)
    expect(mirrorUrl(httpsOnly, 'distribution/x', false)).to.equal('https://mirror.example.de/pub/x')
  })
  it('refuses a path outside the subtree and a mirror without URLs', () => {
    expect(() => mirrorUrl(m, 'other/x.iso', false)).to.throw('outside the subtree distribution/')
    const none = compileMirror({...base, http_url: null, https_url: null} as unknown as MirrorRow)
    expect(() => mirrorUrl(none, 'distribution/x', false)).to.throw('has no HTTP or HTTPS URL')
  })
  it('relativeReference keeps a first segment with : from reading as a scheme (RFC 3986 §4.2)', () => {
    expect(relativeReference('a:b.iso')).to.equal('./a:b.iso')
    expect(relativeReference('dir/a:b.iso')).to.equal('dir/a:b.iso')
    expect(relativeReference('a b.iso')).to.equal('a%20b.iso')
  })
  it('encodePath replaces lone surrogates instead of throwing', () => {
    expect(encodePath('a/\uD800b')).to.equal('a/%EF%BF%BDb')
  })
})

describe('select: options', () => {
  it('has the documented defaults', () => {
    const o = compileSelectOptions()
    expect(o).to.deep.include({minSize: 4096, clientPrefixV4: 24, clientPrefixV6: 48, distanceFactor: 1.5, distanceFloorKm: 100, maxScanAgeSeconds: null, maxAlternatives: 5})
    expect(o.originOnly).to.deep.equal(DEFAULT_ORIGIN_ONLY)
    expect([...o.countrySubstitutions]).to.deep.equal([['NZ', 'AU']])
  })
  it('reads the select: section through the config loader and reports bad values with their key', () => {
    const {config} = loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_user_agents': ['^curl/'], 'select.country_substitutions': {nz: 'au', at: 'DE'}}})
    const o = compileSelectOptions(config.select)
    expect(o.excludeUserAgents.map((r) => r.source)).to.deep.equal(['^curl\\/'])
    expect([...o.countrySubstitutions]).to.deep.equal([
      ['NZ', 'AU'],
      ['AT', 'DE'],
    ])
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_user_agents': ['(unclosed']}})).to.throw(/select\.exclude_user_agents\.0.*not a valid regular expression/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.country_substitutions': {NZ: 'XX'}}})).to.throw(/select\.country_substitutions\.NZ.*ISO 3166-1/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_clients': ['10.0.0.1/8']}})).to.throw(/host bits are set/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.distance_factor': 0.5}})).to.throw(/select\.distance_factor/)
  })
  it('refuses legacy address forms in every config CIDR (flags and environment), naming the fix', () => {
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {trusted_proxies: ['010.0.0.0/8']}})).to.throw(/trusted_proxies.*leading zeros are not allowed \(write 10\.0\.0\.0\)/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none', MB_TRUSTED_PROXIES: '127.0.0.1/32,127.1'}, flags: {}})).to.throw(/trusted_proxies.*not a full IPv4 address \(four parts\)/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_clients': ['1.2.3']}})).to.throw(/select\.exclude_clients\.0.*not a full IPv4 address/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_clients': ['0x0a.0.0.0/8']}})).to.throw(/hexadecimal parts are not allowed/)
    expect(() => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.exclude_clients': ['fe80::%eth0/64']}})).to.throw(/zone ids/)
    expect(loadConfig({env: {MB_CONFIG: 'none', MB_TRUSTED_PROXIES: '10.1.0.0/16, ::1'}, flags: {}}).config.trusted_proxies).to.deep.equal(['10.1.0.0/16', '::1/128'])
  })
  it('origin_only matches basenames and full paths; mime globs are case-insensitive', () => {
    const o = compileSelectOptions({origin_only: ['*.meta4', 'repo/**/repodata/*'], exclude_mime: ['TEXT/*']})
    expect(o.originOnlyMatch('a/b/file.meta4')).to.equal('*.meta4')
    expect(o.originOnlyMatch('repo/15.6/repodata/primary.xml.gz')).to.equal('repo/**/repodata/*')
    expect(o.originOnlyMatch('other/repodata/primary.xml.gz')).to.equal(undefined)
    expect(o.originOnlyMatch('.hidden.meta4')).to.equal('*.meta4')
    expect(o.excludeMimeMatch('text/plain')).to.equal('TEXT/*')
    expect(o.excludeMimeMatch('application/x-iso9660-image')).to.equal(undefined)
  })
})

describe('select: globToLike', () => {
  const cases: Array<[string, string, string[], string[]]> = [
    ['*.iso', '%.iso', ['a.iso', 'x/y/b.iso'], ['a.iso.sig']],
    ['iso/*.iso', 'iso/%.iso', ['iso/a.iso'], ['iso/x/a.iso', 'isos/a.iso']],
    ['iso/**', 'iso/%', ['iso/a', 'iso/x/y'], ['other/a']],
    ['{a,b}/*.tar.xz', '%.tar.xz', ['a/x.tar.xz', 'b/y.tar.xz'], ['c/x.tar.xz']],
    ['dir_1/100%/*.iso', 'dir\\_1/100\\%/%.iso', ['dir_1/100%/a.iso'], ['dirX1/100%/a.iso']],
  ]
  for (const [glob, like, matches, misses] of cases) {
    it(`${glob} -> LIKE ${like}, a superset of the glob`, () => {
      expect(globToLike(glob)).to.equal(like)
      const re = new RegExp(
        `^${like.replace(/\\([%_\\])|([%_])|([^%_\\])/g, (_, esc, wild, lit) => (esc ? esc.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') : wild === '%' ? '.*' : wild === '_' ? '.' : lit.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))}$`,
      )
      const match = picomatch(glob, {dot: true, basename: !glob.includes('/')})
      for (const path of matches) {
        expect(match(path), `${glob} matches ${path}`).to.equal(true)
        expect(re.test(path), `LIKE ${like} keeps ${path}`).to.equal(true)
      }
      for (const path of misses) expect(match(path), `${glob} misses ${path}`).to.equal(false)
    })
  }
})

describe('compileMirrors: MirrorTable', () => {
  it('is a read-only map by id with a dense byId array, of frozen mirrors', () => {
    const table = compileMirrors([{...base, id: 3} as unknown as MirrorRow, {...base, id: 9, identifier: 'other.example'} as unknown as MirrorRow])
    expect(table).to.be.instanceOf(MirrorTable).and.instanceOf(Map)
    expect([...table.keys()]).to.deep.equal([3, 9])
    expect(table.byId[9]).to.equal(table.get(9))
    expect(table.byId[4]).to.equal(undefined)
    expect(() => table.set(4, table.get(3)!)).to.throw(TypeError, /read-only/)
    expect(() => table.delete(3)).to.throw(TypeError, /read-only/)
    expect(() => table.clear()).to.throw(TypeError, /read-only/)
    expect(table.size).to.equal(2)
    expect(Object.isFrozen(table.get(3))).to.equal(true)
  })
})

describe('select: the table of exclusion rules', () => {
  it('names each reason once', () => {
    const reasons = ELIGIBILITY_RULES.map((r) => r.reason)
    expect(new Set(reasons).size).to.equal(reasons.length)
    expect(reasons).to.include.members(['disabled', 'maintenance', 'not_held', 'scan_too_old', 'country_excluded'])
  })
  it('compiles the mirror and scheme rules per client class, and only the request rules that apply', () => {
    const table = compileMirrors([
      {...base, id: 1, https_url: null, client_prefixes: [], exclude_countries: [], base_path: '', file_maxsize: null} as unknown as MirrorRow,
      {...base, id: 2, enabled: false, maintenance_until: new Date()} as unknown as MirrorRow,
    ])
    // Mirror 1 has no https_url: excluded for the HTTPS classes (bits 1, 3, 5 and 7: with
    // and without IPv6 and Range) only.
    expect(table.excludedFor[1]).to.equal(0b10101010)
    expect(table.excludedFor[2]).to.equal(0b11111111)
    const plain = compileSelectOptions({})
    expect(table.requestRules(plain)[1]).to.deep.equal([])
    expect(table.requestRules(plain)[2].map((r) => r.reason)).to.deep.equal(['maintenance', 'not_in_subtree', 'too_large', 'client_not_allowed', 'country_excluded'])
    expect(table.requestRules(compileSelectOptions({max_scan_age_seconds: 60}))[1].map((r) => r.reason)).to.deep.equal(['scan_too_old'])
  })
})
