import {expect} from 'chai'
import {UsageError} from '../../src/lib/errors.js'
import {
  CLEARED_VALUES,
  checkMirrorRow,
  normalizeBasePath,
  normalizeEmail,
  normalizePatterns,
  parseAsn,
  parseFileSize,
  parseScore,
  validateIdentifier,
  validateMirrorInput,
} from '../../src/lib/mirrors/validate.js'
import {checkPrefixes, normalizeCidrList, normalizeContinent, normalizeCountry, normalizeCountryList, parseLatitude, parseLongitude, prefixOverride} from '../../src/lib/mirrors/location.js'
import {normalizeMirrorUrl} from '../../src/lib/mirrors/urls.js'
import type {PublicMirror} from '../../src/lib/mirrors/public.js'
import {MIRROR_SHOW_FIELDS, scanResult} from '../../src/lib/mirrors/render.js'

/** Asserts that fn throws a UsageError (exit 2) whose message matches every pattern. */
function rejects(fn: () => unknown, ...patterns: RegExp[]): UsageError {
  try {
    fn()
  } catch (error) {
    expect(error).to.be.instanceOf(UsageError)
    const usage = error as UsageError
    expect(usage.exitCode).to.equal(2)
    for (const pattern of patterns) expect(usage.message).to.match(pattern)
    return usage
  }
  throw new Error('expected a UsageError, but nothing was thrown')
}

describe('mirror validation', () => {
  describe('identifier', () => {
    it('accepts host-like names, and refuses surrounding whitespace instead of trimming it', () => {
      rejects(() => validateIdentifier(' ftp.example.de '), /NAME/, /whitespace/)
      rejects(() => validateIdentifier('m1\n'), /NAME/, /U\+000A/)
      expect(validateIdentifier('ftp.example.de')).to.equal('ftp.example.de')
      expect(validateIdentifier('mirror_1-a')).to.equal('mirror_1-a')
    })
    it('refuses empty names, whitespace, slashes and a leading dash', () => {
      rejects(() => validateIdentifier(''), /NAME/, /empty/)
      rejects(() => validateIdentifier('ftp example'), /"ftp example"/, /whitespace/)
      rejects(() => validateIdentifier('ftp/example'), /slash/)
      rejects(() => validateIdentifier('-x'), /"-x"/)
      rejects(() => validateIdentifier('a\tb'))
    })
    it('allows only letters, digits, ".", "-" and "_", 1-253 characters, starting with a letter or digit', () => {
      expect(validateIdentifier('A.b-c_9')).to.equal('A.b-c_9')
      expect(validateIdentifier('9mirror')).to.equal('9mirror')
      expect(validateIdentifier('m'.repeat(253))).to.equal('m'.repeat(253))
      rejects(() => validateIdentifier('m'.repeat(254)), /at most 253 characters/)
      rejects(() => validateIdentifier('mïrror€'), /"mïrror€"/, /character "ï" \(U\+00EF\) is not allowed/, /letters, digits, "\.", "-" and "_"/)
      rejects(() => validateIdentifier('m€'), /character "€" \(U\+20AC\)/)
      rejects(() => validateIdentifier('m😀'), /character "😀" \(U\+1F600\)/)
      rejects(() => validateIdentifier('a\u0001b'), /U\+0001 \(a control character\)/)
      rejects(() => validateIdentifier('a:b'), /character ":"/)
      rejects(() => validateIdentifier('_m'), /must start with a letter or digit, not "_"/)
      rejects(() => validateIdentifier('.m'), /must start with a letter or digit/)
    })
  })

  describe('URLs per field', () => {
    it('normalises base URLs to end with a slash', () => {
      expect(normalizeMirrorUrl('http_url', 'http://ftp.example.de/pub')).to.equal('http://ftp.example.de/pub/')
      expect(normalizeMirrorUrl('https_url', 'https://FTP.Example.de')).to.equal('https://ftp.example.de/')
      expect(normalizeMirrorUrl('https_url', 'https://[2001:db8::1]:8443/m/')).to.equal('https://[2001:db8::1]:8443/m/')
      expect(normalizeMirrorUrl('ftp_url', 'ftps://ftp.example.de/pub')).to.equal('ftps://ftp.example.de/pub/')
      expect(normalizeMirrorUrl('ftp_url', 'ftp://anon:pw@ftp.example.de/pub/')).to.equal('ftp://anon:pw@ftp.example.de/pub/')
    })
    it('accepts rsync:// and host::module forms, rewriting the latter', () => {
      expect(normalizeMirrorUrl('rsync_url', 'rsync://rsync.example.de:8873/pub')).to.equal('rsync://rsync.example.de:8873/pub/')
      expect(normalizeMirrorUrl('rsync_url', 'rsync.example.de::pub/linux')).to.equal('rsync://rsync.example.de/pub/linux/')
      expect(normalizeMirrorUrl('rsync_url', 'user@rsync.example.de::pub')).to.equal('rsync://user@rsync.example.de/pub/')
      expect(normalizeMirrorUrl('rsync_url', 'rsync://u:secret@rsync.example.de/pub/')).to.equal('rsync://u:secret@rsync.example.de/pub/')
    })
    it('refuses the wrong scheme for each field', () => {
      rejects(() => normalizeMirrorUrl('http_url', 'https://x.example/'), /--http-url/, /"https:\/\/x\.example\/"/, /http:\/\/ URLs only/)
      rejects(() => normalizeMirrorUrl('https_url', 'http://x.example/'), /--https-url/, /https:\/\/ URLs only/)
      rejects(() => normalizeMirrorUrl('rsync_url', 'ftp://x.example/pub/'), /--rsync-url/, /rsync:\/\//)
      rejects(() => normalizeMirrorUrl('ftp_url', 'http://x.example/'), /--ftp-url/, /ftp:\/\/ or ftps:\/\//)
      rejects(() => normalizeMirrorUrl('http_url', 'x.example/pub'), /expected a URL/)
    })
    it('refuses queries, fragments, credentials in HTTP(S) URLs and rsync URLs without a module', () => {
      rejects(() => normalizeMirrorUrl('http_url', 'http://x.example/pub/?a=1'), /no query or fragment/)
      rejects(() => normalizeMirrorUrl('https_url', 'https://x.example/pub/#top'), /no query or fragment/)
      rejects(() => normalizeMirrorUrl('https_url', 'https://user:pw@x.example/'), /credentials are not allowed/)
      rejects(() => normalizeMirrorUrl('rsync_url', 'rsync://x.example/'), /names a module/)
    })
    it('refuses a host written as a legacy IPv4 form, which the URL parser would rewrite', () => {
      rejects(() => normalizeMirrorUrl('http_url', 'http://010.0.0.1/pub/'), /--http-url/, /legacy form: leading zeros are not allowed \(write 10\.0\.0\.1\)/)
      rejects(() => normalizeMirrorUrl('https_url', 'https://1.2.3/'), /--https-url/, /not a full IPv4 address \(four parts\)/)
      rejects(() => normalizeMirrorUrl('ftp_url', 'ftp://u:p@0x7f.1:21/pub/'), /--ftp-url/, /hexadecimal/)
      rejects(() => normalizeMirrorUrl('rsync_url', 'rsync://2130706433/pub/'), /--rsync-url/, /four parts/)
      rejects(() => normalizeMirrorUrl('rsync_url', '0177.0.0.1::pub'), /--rsync-url/, /leading zeros/)
      expect(normalizeMirrorUrl('http_url', 'http://192.0.2.10:8080/pub')).to.equal('http://192.0.2.10:8080/pub/')
      expect(normalizeMirrorUrl('http_url', 'http://1.2.3.4./')).to.equal('http://1.2.3.4/')
      expect(normalizeMirrorUrl('https_url', 'https://0.example.org/')).to.equal('https://0.example.org/')
      expect(normalizeMirrorUrl('http_url', 'http://[2001:db8::1]/')).to.equal('http://[2001:db8::1]/')
    })
    it('never shows a password in an error message', () => {
      const error = rejects(() => normalizeMirrorUrl('ftp_url', 'http://u:hunter2@x.example/'), /u:\*\*\*@x\.example/)
      expect(error.message).not.to.contain('hunter2')
      const rsync = rejects(() => normalizeMirrorUrl('rsync_url', 'rsync://u:hunter2@x.example/'))
      expect(rsync.message).not.to.contain('hunter2')
    })
  })

  describe('location', () => {
    it('upper-cases valid country and continent codes', () => {
      expect(normalizeCountry('de')).to.equal('DE')
      expect(normalizeCountry('GB')).to.equal('GB')
      expect(normalizeContinent('eu')).to.equal('EU')
    })
    it('refuses unknown and malformed country codes', () => {
      rejects(() => normalizeCountry('XX'), /--country/, /"XX"/, /ISO 3166-1 alpha-2/)
      rejects(() => normalizeCountry('gbr'), /"gbr"/)
      rejects(() => normalizeCountry('Germany'))
      rejects(() => normalizeContinent('EA'), /--continent/, /AF AN AS EU NA OC SA/)
    })
    it('parses country lists, comma-separated or repeated, deduplicated', () => {
      expect(normalizeCountryList('other_countries', 'lu, be,LU')).to.deep.equal(['LU', 'BE'])
      expect(normalizeCountryList('exclude_countries', ['cn', 'ru'])).to.deep.equal(['CN', 'RU'])
      expect(normalizeCountryList('other_countries', '')).to.deep.equal([])
      rejects(() => normalizeCountryList('exclude_countries', 'DE,XX'), /--exclude-countries/, /"XX"/)
    })
    it('checks latitude and longitude ranges', () => {
      expect(parseLatitude('-33.9')).to.equal(-33.9)
      expect(parseLongitude('151.2')).to.equal(151.2)
      expect(parseLatitude(90)).to.equal(90)
      rejects(() => parseLatitude('91'), /--lat/, /-90 to 90/)
      rejects(() => parseLongitude('-180.5'), /--lon/, /-180 to 180/)
      rejects(() => parseLatitude('north'), /--lat/)
    })
    it('checks AS numbers (1..4294967295, AS prefix allowed)', () => {
      expect(parseAsn('3320')).to.equal(3320)
      expect(parseAsn('AS15169')).to.equal(15169)
      expect(parseAsn('4294967295')).to.equal(4294967295)
      rejects(() => parseAsn('0'), /--asn/, /1 to 4294967295/)
      rejects(() => parseAsn('4294967296'), /--asn/)
      rejects(() => parseAsn('-5'))
      rejects(() => parseAsn('12.5'))
    })
  })

  describe('prefixes', () => {
    it('normalises CIDRs, bare addresses and comma lists', () => {
      expect(normalizeCidrList('prefixes', ['192.0.2.0/24', '2001:DB8::/32,198.51.100.7'])).to.deep.equal(['192.0.2.0/24', '2001:db8::/32', '198.51.100.7/32'])
      expect(normalizeCidrList('client_prefixes', ['10.0.0.0/8', '10.0.0.0/8'])).to.deep.equal(['10.0.0.0/8'])
    })
    it('refuses bad CIDRs, including host bits set', () => {
      rejects(() => normalizeCidrList('prefixes', ['192.0.2.1/24']), /--prefix/, /"192\.0\.2\.1\/24"/, /host bits are set/, /192\.0\.2\.0\/24/)
      rejects(() => normalizeCidrList('client_prefixes', ['10.0.0.0/33']), /--client-prefix/)
      rejects(() => normalizeCidrList('prefixes', ['example.org/24']), /--prefix/)
    })
    it('refuses legacy address forms in --prefix and --client-prefix, saying why', () => {
      rejects(() => normalizeCidrList('prefixes', ['010.0.0.0/8']), /--prefix/, /"010\.0\.0\.0\/8"/, /leading zeros are not allowed \(write 10\.0\.0\.0\)/)
      rejects(() => normalizeCidrList('client_prefixes', ['1.2.3']), /--client-prefix/, /"1\.2\.3"/, /not a full IPv4 address \(four parts\)/)
      rejects(() => normalizeCidrList('client_prefixes', ['0x7f.0.0.1']), /--client-prefix/, /hexadecimal/)
      rejects(() => normalizeCidrList('prefixes', ['81.2.69.0/24,2130706433']), /--prefix/, /four parts/)
      rejects(() => normalizeCidrList('prefixes', ['fe80::%eth0/64']), /--prefix/, /zone ids/)
      rejects(() => normalizeCidrList('prefixes', ['::ffff:010.0.0.0/104']), /--prefix/, /embedded IPv4 part/)
    })
    it('classifies prefixes that need --force: broad (< /16, < /32) and reserved ranges; documentation blocks are ordinary', () => {
      for (const broad of ['0.0.0.0/0', '::/0', '81.0.0.0/8', '81.2.0.0/15', '2a00::/31', '10.0.0.0/8']) expect(prefixOverride(broad), broad).to.equal('broad')
      for (const reserved of ['10.1.0.0/16', '127.0.0.1/32', '169.254.0.0/16', '172.16.0.0/16', '192.168.1.0/24', '100.64.0.0/16', '224.0.0.0/16', '::1/128', 'fe80::/64', 'fc00::/32', 'ff02::/32']) {
        expect(prefixOverride(reserved), reserved).to.equal('reserved')
      }
      for (const ok of ['81.2.0.0/16', '81.2.69.0/24', '2a00:1450::/32', '192.0.2.0/24', '198.51.100.7/32', '203.0.113.0/25', '2001:db8::/32', '2001:db8:1::/48'])
        expect(prefixOverride(ok), ok).to.equal(undefined)
    })
    it('refuses a too-broad or reserved --prefix without force, saying why and how', () => {
      rejects(() => checkPrefixes(['81.2.69.0/24', '0.0.0.0/0'], false), /--prefix 0\.0\.0\.0\/0 is shorter than \/16/, /every client in that range would be sent to this mirror/, /--force/)
      rejects(() => checkPrefixes(['::/0'], false), /--prefix ::\/0 is shorter than \/32/, /--force/)
      rejects(() => checkPrefixes(['10.1.0.0/16'], false), /--prefix 10\.1\.0\.0\/16 is in a reserved range \(private, loopback/, /--force/)
      expect(() => checkPrefixes(['0.0.0.0/0', '::/0', '10.0.0.0/8'], true)).not.to.throw()
      expect(() => checkPrefixes(['81.2.69.0/24', '192.0.2.0/24'], false)).not.to.throw()
    })
  })

  describe('numbers', () => {
    it('takes scores >= 0 as whole numbers', () => {
      expect(parseScore('0')).to.equal(0)
      expect(parseScore(150)).to.equal(150)
      rejects(() => parseScore('-1'), /--score/, /"-1"/, />= 0/)
      rejects(() => parseScore('1.5'), /--score/)
      rejects(() => parseScore('lots'), /--score/)
    })
    it('parses file sizes with binary suffixes', () => {
      expect(parseFileSize('4294967296')).to.equal(4294967296)
      expect(parseFileSize('4G')).to.equal(4 * 1024 ** 3)
      expect(parseFileSize('700M')).to.equal(700 * 1024 ** 2)
      expect(parseFileSize('1.5GiB')).to.equal(1.5 * 1024 ** 3)
      expect(parseFileSize('512kb')).to.equal(512 * 1024)
      rejects(() => parseFileSize('4X'), /--file-maxsize/, /"4X"/)
      rejects(() => parseFileSize('0'), /--file-maxsize/)
      rejects(() => parseFileSize('-1G'), /--file-maxsize/)
    })
  })

  describe('paths and patterns', () => {
    it('normalises base paths to a relative form', () => {
      expect(normalizeBasePath('/pub/iso/')).to.equal('pub/iso')
      expect(normalizeBasePath('pub//./iso')).to.equal('pub/iso')
      expect(normalizeBasePath('/')).to.equal('')
    })
    it('refuses hostile base paths', () => {
      rejects(() => normalizeBasePath('../x'), /--base-path/, /"\.\.\/x"/, /"\.\." is not allowed/)
      rejects(() => normalizeBasePath('pub/../../etc'), /--base-path/)
      rejects(() => normalizeBasePath('pub\\x'), /--base-path/)
      rejects(() => normalizeBasePath('pub/\u0000x'), /--base-path/)
    })
    it('keeps glob patterns and refuses control characters', () => {
      expect(normalizePatterns('include_patterns', ['*.iso', 'debug/**', '*.iso', ''])).to.deep.equal(['*.iso', 'debug/**'])
      rejects(() => normalizePatterns('exclude_patterns', ['a\nb']), /--exclude/)
    })
    it('checks e-mail addresses', () => {
      expect(normalizeEmail(' admin@example.org ')).to.equal('admin@example.org')
      rejects(() => normalizeEmail('admin at example'), /--admin-email/)
    })
  })

  describe('validateMirrorInput', () => {
    it('normalises every given field and leaves the others out', () => {
      const values = validateMirrorInput({
        identifier: 'ftp.example.de',
        http_url: 'http://ftp.example.de/pub',
        country: 'de',
        latitude: '50.1',
        longitude: '8.7',
        asn: 'AS3320',
        prefixes: ['192.0.2.0/24'],
        score: '150',
        other_countries: 'at,ch',
        file_maxsize: '700M',
        country_only: true,
        base_path: '/pub/',
        exclude_patterns: ['*.src.rpm'],
      })
      expect(values).to.deep.equal({
        identifier: 'ftp.example.de',
        http_url: 'http://ftp.example.de/pub/',
        country: 'DE',
        latitude: 50.1,
        longitude: 8.7,
        asn: 3320,
        prefixes: ['192.0.2.0/24'],
        score: 150,
        other_countries: ['AT', 'CH'],
        file_maxsize: 700 * 1024 ** 2,
        country_only: true,
        base_path: 'pub',
        exclude_patterns: ['*.src.rpm'],
      })
    })
    it('turns empty values into cleared values', () => {
      expect(validateMirrorInput({asn: '', prefixes: [''], comment: ' ', base_path: '', https_url: ''})).to.deep.equal({asn: null, prefixes: [], comment: null, base_path: '', https_url: null})
    })
    it('refuses an empty score and the first bad field', () => {
      rejects(() => validateMirrorInput({score: ''}), /--score/)
      rejects(() => validateMirrorInput({http_url: 'http://ok.example/', country: 'XX'}), /--country/)
    })
  })

  describe('checkMirrorRow', () => {
    const base = {identifier: 'm', http_url: 'http://m.example/', https_url: null, latitude: null, longitude: null, country_only: false, region_only: false, as_only: false, prefix_only: false}
    it('accepts a row with an HTTP URL and consistent fields', () => {
      expect(() => checkMirrorRow(base)).not.to.throw()
      expect(() => checkMirrorRow({...base, http_url: null, https_url: 'https://m.example/', latitude: 1, longitude: 2, as_only: true})).not.to.throw()
    })
    it('requires an HTTP or HTTPS URL', () => {
      rejects(() => checkMirrorRow({...base, http_url: null}), /--http-url/, /--https-url/)
    })
    it('requires lat and lon together', () => {
      rejects(() => checkMirrorRow({...base, latitude: 10}), /--lat and --lon go together/)
      rejects(() => checkMirrorRow({...base, longitude: 10}), /--lat and --lon/)
    })
    it('refuses conflicting *_only flags', () => {
      rejects(() => checkMirrorRow({...base, country_only: true, as_only: true}), /--country-only and --as-only exclude each other/, /--no-country-only/)
      rejects(() => checkMirrorRow({...base, region_only: true, prefix_only: true, as_only: true}), /--region-only and --as-only and --prefix-only/)
    })
  })
})

describe('mirror rendering', () => {
  const mirror: PublicMirror = {
    ...CLEARED_VALUES,
    sign_ttl_seconds: 21600,
    id: 1,
    identifier: 'm',
    enabled: true,
    base_url: 'https://m.example/',
    https_url: 'https://m.example/',
    country: 'DE',
    continent: 'EU',
    score: 100,
    country_only: false,
    region_only: false,
    as_only: false,
    prefix_only: false,
    fallback: false,
    up: true,
    ipv6: null,
    status: {},
    status_reason: null,
    status_changed_at: null,
    needs_rescan: false,
    scan_refused_at: null,
    bad_copies_suspect_at: null,
    range_ok: null,
    url_changed_at: null,
    synced_at: null,
    sync_lag_seconds: null,
    sync_error: null,
    last_scan_at: '2026-01-02T03:04:05.000Z',
    last_scan_ok_at: '2026-01-02T03:04:05.000Z',
    last_scan_error: null,
    last_scan_protocol: 'rsync',
    last_scan_files: 1300,
    last_scan_matched: 1200,
    last_scan_seconds: 1.5,
    last_push_at: null,
    last_push_ok_at: null,
    last_push_error: null,
    created_at: null,
    updated_at: null,
  }
  it('shows every public field in mirror show', () => {
    const labels = MIRROR_SHOW_FIELDS.map(([label]) => label)
    // The signing secret is cleared with the rest but never shown.
    for (const key of Object.keys(mirror).filter((k) => k !== 'sign_secret')) expect(labels, key).to.include(key)
    expect(labels).to.not.include('sign_secret')
  })
  it('summarises the last scan', () => {
    expect(scanResult(mirror)).to.equal('ok rsync 1200/1300')
    expect(scanResult({...mirror, last_scan_at: '2026-01-03T00:00:00.000Z', last_scan_error: 'connection refused'})).to.equal('failed: connection refused')
    expect(scanResult({...mirror, last_scan_at: null})).to.equal(null)
    const refused = {...mirror, last_scan_at: '2026-01-03T00:00:00.000Z', scan_refused_at: '2026-01-03T00:00:00.000Z', last_scan_error: 'rsync: Scan of m matched only 0 file(s)'}
    expect(scanResult(refused)).to.equal('refused, suspect: rsync: Scan of m matched only 0 file(s)')
    const suspect = MIRROR_SHOW_FIELDS.find(([label]) => label === 'suspect')![1]
    expect(suspect(mirror)).to.equal('no')
    expect(suspect(refused)).to.equal(
      'yes, since 2026-01-03T00:00:00Z: the last scan was refused by the safety check, so no client is sent here (scan_refused) until a good `mb scan m` or `mb mirror edit m --trust-scan`',
    )
  })
  it('names a mirror that does not honour Range, and a URL change awaiting its scan', () => {
    const field = (label: string) => MIRROR_SHOW_FIELDS.find(([l]) => l === label)![1]
    expect(field('range_ok')({...mirror, range_ok: false})).to.equal('no: answers Range with the whole file (200); ranged requests are not sent here')
    expect(field('range_ok')({...mirror, range_ok: true})).to.equal('yes')
    expect(field('range_ok')(mirror)).to.equal('unknown')
    expect(field('url_changed_at')({...mirror, url_changed_at: '2026-01-03T00:00:00.000Z'})).to.equal('2026-01-03T00:00:00Z (URL changed, awaiting scan)')
  })
  it('marks prefixes stored with --force', () => {
    const prefixes = MIRROR_SHOW_FIELDS.find(([label]) => label === 'prefixes')![1]
    expect(prefixes({...mirror, prefixes: ['0.0.0.0/0', '10.0.0.0/16', '81.2.69.0/24', '192.0.2.0/24']})).to.deep.equal([
      '0.0.0.0/0 (broad, forced)',
      '10.0.0.0/16 (reserved, forced)',
      '81.2.69.0/24',
      '192.0.2.0/24',
    ])
  })
})
