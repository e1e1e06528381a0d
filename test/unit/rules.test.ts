import {expect} from 'chai'
import {UsageError} from '../../src/lib/errors.js'
import {parseIp} from '../../src/lib/net.js'
import {compileRules, globBaseLength, type RuleRecord, ruleLocation} from '../../src/lib/rules/rule.js'
import {mergeRuleInput, type RuleValues} from '../../src/lib/rules/validate.js'
import {compileMirror} from '../../src/lib/select/mirror.js'
import type {ClientInfo, SelectMirror} from '../../src/lib/select/types.js'
import type {MirrorRow} from '../../src/lib/db/schema.js'

function rule(name: string, fields: Partial<RuleRecord>): RuleRecord {
  return {
    id: 1,
    name,
    priority: 100,
    enabled: true,
    path_glob: '**',
    countries: [],
    not_countries: [],
    continents: [],
    clients: [],
    asns: [],
    target: 'origin',
    url: null,
    append_path: false,
    mirrors: [],
    status: 302,
    comment: null,
    ...fields,
  }
}

function client(ip: string, country?: string, continent?: string, asn?: number): ClientInfo {
  return {ip, address: parseIp(ip), country, continent, asn, https: false}
}

function mirror(id: number, identifier: string): SelectMirror {
  return compileMirror({id, identifier, http_url: `http://${identifier}/`, https_url: null, country: 'CN', continent: 'AS', enabled: true, up: true, score: 100} as unknown as MirrorRow)
}

const MIRRORS = new Map([1, 2, 3].map((id) => [id, mirror(id, `m${id}.example.org`)]))

const RULES = compileRules(
  [
    rule('intlstore', {priority: 10, path_glob: 'store/**', not_countries: ['US', 'CA'], target: 'url', url: 'https://intl.example.org/', append_path: true}),
    rule('cn', {priority: 20, countries: ['CN'], target: 'mirrors', mirrors: ['m1.example.org', 'M2.example.org', 'gone.example.org']}),
    rule('campus', {priority: 5, path_glob: 'iso/**', clients: ['10.0.0.0/8', '2001:db8::/32'], target: 'origin'}),
    rule('oceania-as', {priority: 30, path_glob: '*.iso', continents: ['OC'], asns: [64500], target: 'url', url: 'https://oc.example.org/get', status: 307}),
    rule('off', {priority: 1, enabled: false}),
    // Same priority as cn: the name orders them, so cn (c < z) is tried first.
    rule('zz-late', {priority: 20, countries: ['CN'], target: 'origin'}),
  ],
  MIRRORS,
)

describe('rules: matching', () => {
  const cases: Array<[string, string, ClientInfo, string | undefined]> = [
    ['GB client, store path', 'store/cart.html', client('81.2.69.142', 'GB', 'EU'), 'intlstore'],
    ['JP client, store path', 'store/a/b.html', client('2001:218::1', 'JP', 'AS'), 'intlstore'],
    ['unknown country counts as not US/CA', 'store/x', client('192.0.2.1'), 'intlstore'],
    ['US client, store path: no rule', 'store/cart.html', client('216.160.83.56', 'US', 'NA'), undefined],
    ['CA client, store path: no rule', 'store/cart.html', client('216.160.83.57', 'CA', 'NA'), undefined],
    ['CN client, store path: intlstore is tried first', 'store/cart.html', client('175.16.199.1', 'CN', 'AS'), 'intlstore'],
    ['CN client, other path', 'iso/big.iso', client('175.16.199.1', 'CN', 'AS'), 'cn'],
    ['campus IPv4 client beats cn by priority', 'iso/big.iso', client('10.1.2.3', 'CN', 'AS'), 'campus'],
    ['campus IPv6 client', 'iso/x/y.iso', client('2001:db8::5', undefined), 'campus'],
    ['campus path only', 'src/big.tar', client('10.1.2.3', 'DE', 'EU'), undefined],
    ['continent and AS both hold', 'pub/deep/distro.iso', client('203.0.113.1', 'AU', 'OC', 64500), 'oceania-as'],
    ['continent holds, AS does not', 'pub/distro.iso', client('203.0.113.1', 'AU', 'OC', 64501), undefined],
    ['basename glob does not match another extension', 'pub/distro.img', client('203.0.113.1', 'AU', 'OC', 64500), undefined],
    ['dot files match', 'store/.hidden', client('81.2.69.142', 'GB', 'EU'), 'intlstore'],
    ['disabled rule never matches', 'x', client('198.51.100.1', 'DE', 'EU'), undefined],
  ]
  for (const [title, path, c, expected] of cases) {
    it(title, () => {
      expect(RULES.match(path, c)?.name).to.equal(expected)
    })
  }

  it('orders by priority then name, without disabled rules', () => {
    expect(RULES.rules.map((r) => r.record.name)).to.deep.equal(['campus', 'intlstore', 'cn', 'zz-late', 'oceania-as'])
  })

  it('a mirrors target keeps the named mirrors that exist (ignoring case)', () => {
    const cn = RULES.rules.find((r) => r.record.name === 'cn')!
    expect([...cn.mirrors!.keys()]).to.deep.equal([1, 2])
  })

  it('an empty rule set is empty', () => {
    expect(compileRules([], MIRRORS).empty).to.equal(true)
    expect(RULES.empty).to.equal(false)
  })
})

describe('rules: the Location of a url rule', () => {
  const cases: Array<[string, Partial<RuleRecord>, string, string]> = [
    ['appends the rest below the glob base', {path_glob: 'store/**', url: 'https://intl.example.org/', append_path: true}, 'store/cart/x y.html', 'https://intl.example.org/cart/x%20y.html'],
    ['adds a slash to a URL without one', {path_glob: 'store/**', url: 'https://intl.example.org/shop', append_path: true}, 'store/a', 'https://intl.example.org/shop/a'],
    ['a glob without base appends the whole path', {path_glob: '**/*.iso', url: 'https://x.example.org/', append_path: true}, 'a/b.iso', 'https://x.example.org/a/b.iso'],
    ['without append-path the URL alone', {path_glob: 'store/**', url: 'https://intl.example.org/', append_path: false}, 'store/cart', 'https://intl.example.org/'],
  ]
  for (const [title, fields, path, expected] of cases) {
    it(title, () => {
      const [compiled] = compileRules([rule('r', {target: 'url', ...fields})], MIRRORS).rules
      expect(ruleLocation(compiled, path)).to.equal(expected)
    })
  }

  it('glob base lengths', () => {
    expect([globBaseLength('downloads/**'), globBaseLength('**/*.iso'), globBaseLength('a/b.iso'), globBaseLength('a/b/*.iso')]).to.deep.equal([10, 0, 2, 4])
  })
})

describe('rules: input checks', () => {
  const base: RuleValues = {...rule('base', {}), path_glob: 'x/**'}
  const bad: Array<[string, Parameters<typeof mergeRuleInput>[1], string]> = [
    ['bad country code', {country: 'US,XX'}, 'Invalid --country "XX"'],
    ['bad not-country code', {notCountry: 'usa'}, 'Invalid --not-country "USA"'],
    ['empty path glob', {path: '  '}, 'Invalid --path'],
    ['malformed path glob', {path: '['}, 'Invalid --path "[": not a valid glob: a "[" is not closed by "]"'],
    ['unclosed brace in path glob', {path: 'iso/*.{iso'}, 'not a valid glob: a "{" is not closed'],
    ['ftp target', {to: 'ftp://files.example.org/'}, 'must be an http:// or https:// URL (scheme ftp: cannot be a redirect target)'],
    ['javascript target', {to: 'javascript:alert(1)'}, 'must be an http:// or https:// URL (scheme javascript: cannot be a redirect target)'],
    ['relative target', {to: '/store'}, 'expected an absolute http:// or https:// URL'],
    ['credentials in target', {to: 'https://u:p@x.example.org/'}, 'credentials are not allowed'],
    ['bad status', {status: '303'}, 'expected 301, 302 or 307'],
    ['bad continent', {continent: 'EU,XX'}, 'Invalid --continent "XX"'],
    ['bad CIDR', {client: '10.0.0.1/8'}, 'host bits are set'],
    ['bad ASN', {asn: 'AS0'}, 'Invalid --asn "AS0"'],
    ['two targets', {to: 'https://x.example.org/', origin: true}, 'Give one target'],
    ['country and not-country', {country: 'DE', notCountry: 'US'}, 'exclude each other'],
    ['append-path without url', {origin: true, appendPath: true}, '--append-path goes with --to URL only'],
  ]
  for (const [title, input, message] of bad) {
    it(`refuses ${title}`, () => {
      expect(() => mergeRuleInput(base, input))
        .to.throw(UsageError)
        .with.property('message')
        .that.contains(message)
    })
  }

  it('normalises good input', () => {
    const v = mergeRuleInput(base, {path: '/store/**', notCountry: 'us, ca', client: '10.0.0.0/8,10.0.0.0/8', asn: 'AS3320', to: 'HTTPS://Intl.Example.org', appendPath: true, status: '301'})
    expect([v.path_glob, v.not_countries, v.clients, v.asns, v.target, v.url, v.append_path, v.status]).to.deep.equal([
      'store/**',
      ['US', 'CA'],
      ['10.0.0.0/8'],
      [3320],
      'url',
      'https://intl.example.org/',
      true,
      301,
    ])
  })
})
