import {expect} from 'chai'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {distanceKm} from '../../src/lib/geo/distance.js'
import {parseIp} from '../../src/lib/net.js'
import {
  type ClientInfo,
  type SelectFile,
  type SelectMirror,
  type Selection,
  clientNetworkKey,
  compileMirror,
  compileSelectOptions,
  MirrorTable,
  select as selectFn,
  uniform,
} from '../../src/lib/select/index.js'
import {mirrorRow, ROW_NOW} from '../helpers/mirror-row.js'

/**
 * `select()`, with every explained call checked against the hot path (explain false), which
 * decides from compiled per-mirror data: both must rank the same mirrors, in the same order,
 * with the same realm and URLs, and send the same files to the origin.
 */
function select(...args: Parameters<typeof selectFn>): Selection {
  const s = selectFn(...args)
  if (args[4] !== false) {
    const lean = selectFn(args[0], args[1], args[2], args[3], false)
    const shape = (x: Selection) => ({realm: x.realm, origin: x.origin?.reason, ranked: x.ranked.map((c) => [c.mirror.id, c.realm, c.rank, c.url])})
    expect(shape(lean), 'hot path (explain false)').to.deep.equal(shape(s))
    // The snapshot's MirrorTable (dense lookup by id) decides the same.
    const table = selectFn(args[0], args[1], new MirrorTable(args[2].values()), args[3], false)
    expect(shape(table), 'hot path on a MirrorTable').to.deep.equal(shape(s))
  }
  return s
}

const NOW = ROW_NOW // fixed clock, Unix seconds

/** A mirror row with defaults, as the database returns it. */
function row(id: number, overrides: Partial<MirrorRow> = {}): MirrorRow {
  return mirrorRow(id, {
    http_url: `http://m${id}.example.org/pub`,
    country: null,
    continent: null,
    http_up: undefined,
    https_up: undefined,
    country_only: false,
    region_only: false,
    as_only: false,
    prefix_only: false,
    fallback: false,
    status_reason: null,
    status_changed_at: null,
    last_scan_at: new Date((NOW - 600) * 1000),
    last_scan_error: null,
    last_scan_protocol: 'rsync',
    last_scan_files: 10,
    last_scan_matched: 10,
    last_scan_seconds: 1,
    created_at: new Date(0),
    updated_at: new Date(0),
    txid: '1',
    ...overrides,
  })
}

function mirrors(...rows: MirrorRow[]): Map<number, SelectMirror> {
  return new Map(rows.map((r) => [Number(r.id), compileMirror(r)]))
}

const options = compileSelectOptions({})
options.now = () => NOW

function file(held: number[], overrides: Partial<SelectFile> = {}): SelectFile {
  return {path: 'iso/distro-1.0.iso', size: 1_000_000, mtime: NOW - 86_400, mirrors: held, ...overrides}
}

const GB: ClientInfo = {ip: '81.2.69.142', https: false, country: 'GB', continent: 'EU'}
const NZ: ClientInfo = {ip: '203.0.113.9', https: false, country: 'NZ', continent: 'OC'}
const IE: ClientInfo = {ip: '198.51.100.20', https: false, country: 'IE', continent: 'EU'}

function winner(s: Selection): string | undefined {
  return s.ranked[0]?.mirror.identifier
}
function reasons(s: Selection): Record<string, string> {
  return Object.fromEntries(s.excluded.map((e) => [e.mirror.identifier, e.reason]))
}
function detail(s: Selection, identifier: string): string | undefined {
  return s.excluded.find((e) => e.mirror.identifier === identifier)?.detail
}
function order(s: Selection): Array<[string, string]> {
  return s.ranked.map((c) => [c.mirror.identifier, c.realm])
}

describe('select(): pools', () => {
  interface Case {
    name: string
    client: ClientInfo
    rows: MirrorRow[]
    held?: number[]
    realm: string | null
    mirror?: string
    ranked?: Array<[string, string]>
    excluded?: Record<string, string>
    opts?: Parameters<typeof compileSelectOptions>[0]
  }
  const cases: Case[] = [
    {
      name: 'prefix: the client address lies in a mirror prefix',
      client: {...GB, ip: '10.1.2.3'},
      rows: [row(1, {country: 'DE', prefixes: ['10.1.0.0/16']}), row(2, {country: 'GB'})],
      realm: 'prefix',
      ranked: [
        ['m1', 'prefix'],
        ['m2', 'country'],
      ],
    },
    {
      name: 'prefix: IPv6 client in an IPv6 prefix; IPv4 prefixes never match it',
      client: {...GB, ip: '2001:db8:42::7'},
      rows: [row(1, {country: 'US', prefixes: ['2001:db8:42::/48']}), row(2, {country: 'GB', prefixes: ['0.0.0.0/0']})],
      realm: 'prefix',
      ranked: [
        ['m1', 'prefix'],
        ['m2', 'country'],
      ],
    },
    {
      name: 'as: a mirror without an ASN never matches, nor does a client without one',
      client: GB,
      rows: [row(1, {country: 'US', asn: 64500}), row(2, {country: 'SE', asn: null})],
      realm: 'continent',
      ranked: [
        ['m2', 'continent'],
        ['m1', 'world'],
      ],
    },
    {
      name: 'as: same autonomous system beats same country',
      client: {...GB, asn: 64500},
      rows: [row(1, {country: 'US', asn: 64500}), row(2, {country: 'GB'})],
      realm: 'as',
      ranked: [
        ['m1', 'as'],
        ['m2', 'country'],
      ],
    },
    {
      name: 'country: same country beats same continent',
      client: GB,
      rows: [row(1, {country: 'SE'}), row(2, {country: 'GB'}), row(3, {country: 'US'})],
      realm: 'country',
      ranked: [
        ['m2', 'country'],
        ['m1', 'continent'],
        ['m3', 'world'],
      ],
    },
    {
      name: 'continent: no mirror in the country',
      client: GB,
      rows: [row(1, {country: 'US'}), row(2, {country: 'SE'})],
      realm: 'continent',
      ranked: [
        ['m2', 'continent'],
        ['m1', 'world'],
      ],
    },
    {
      name: 'world: nothing nearer',
      client: GB,
      rows: [row(1, {country: 'US'}), row(2, {country: 'JP'})],
      realm: 'world',
      mirror: undefined,
    },
    {
      name: 'world: a client with unknown location',
      client: {ip: '192.0.2.1', https: false},
      rows: [row(1, {country: 'GB'})],
      realm: 'world',
      ranked: [['m1', 'world']],
    },
    {
      name: 'other_countries: a GB mirror serving IE counts as IE when IE has no mirror',
      client: IE,
      rows: [row(1, {country: 'GB', other_countries: ['IE']}), row(2, {country: 'FR'})],
      realm: 'country',
      ranked: [
        ['m1', 'country'],
        ['m2', 'continent'],
      ],
    },
    {
      name: 'other_countries: in the country pool beside the client country own mirror (MirrorBrain)',
      client: IE,
      rows: [row(1, {country: 'GB', other_countries: ['IE']}), row(2, {country: 'IE'}), row(3, {country: 'FR'})],
      realm: 'country',
      ranked: [
        ['m1', 'country'],
        ['m2', 'country'],
        ['m3', 'continent'],
      ],
    },
    {
      name: 'other_countries: an own-country mirror that is not eligible does not count',
      client: IE,
      rows: [row(1, {country: 'GB', other_countries: ['IE']}), row(2, {country: 'IE', enabled: false})],
      realm: 'country',
      ranked: [['m1', 'country']],
      excluded: {m2: 'disabled'},
    },
    {
      name: 'fallback: used only when no regular mirror is eligible',
      client: GB,
      rows: [row(1, {country: 'GB', fallback: true}), row(2, {country: 'US', up: false})],
      realm: 'fallback',
      ranked: [['m1', 'fallback']],
      excluded: {m2: 'down'},
    },
    {
      name: 'fallback: ranked after every regular pool otherwise',
      client: GB,
      rows: [row(1, {country: 'GB', fallback: true}), row(2, {country: 'US'})],
      realm: 'world',
      ranked: [
        ['m2', 'world'],
        ['m1', 'fallback'],
      ],
    },
    {
      name: 'no mirror: the origin serves',
      client: GB,
      rows: [row(1, {country: 'GB'})],
      held: [],
      realm: null,
      excluded: {m1: 'not_held'},
    },
  ]
  for (const c of cases) {
    it(c.name, () => {
      const ms = mirrors(...c.rows)
      const s = select(c.client, file(c.held ?? [...ms.keys()]), ms, c.opts ? Object.assign(compileSelectOptions(c.opts), {now: () => NOW}) : options)
      expect(s.realm).to.equal(c.realm)
      if (c.ranked) expect(order(s)).to.deep.equal(c.ranked)
      if (c.mirror) expect(winner(s)).to.equal(c.mirror)
      expect(reasons(s)).to.deep.equal(c.excluded ?? {})
      if (c.realm === null) expect(s.origin?.reason).to.equal('no_mirror')
      else expect(s.origin).to.equal(undefined)
      for (const [i, candidate] of s.ranked.entries()) expect(candidate.rank).to.equal(i + 1)
    })
  }
})

describe('select(): mirror flags narrow the pools', () => {
  const cases: Array<{name: string; client: ClientInfo; flagged: Partial<MirrorRow>; realm: string; excluded?: string; detail?: string}> = [
    {name: 'prefix_only, client inside', client: {...GB, ip: '10.9.8.7'}, flagged: {prefix_only: true, prefixes: ['10.9.0.0/16'], country: 'DE'}, realm: 'prefix'},
    {
      name: 'prefix_only, client outside',
      client: GB,
      flagged: {prefix_only: true, prefixes: ['10.9.0.0/16'], country: 'GB'},
      realm: 'continent',
      excluded: 'prefix_only',
      detail: 'client 81.2.69.142 is outside its prefixes 10.9.0.0/16',
    },
    {name: 'as_only, same AS', client: {...GB, asn: 65001}, flagged: {as_only: true, asn: 65001, country: 'US'}, realm: 'as'},
    {
      name: 'as_only, other AS (even in the same country)',
      client: {...GB, asn: 65002},
      flagged: {as_only: true, asn: 65001, country: 'GB'},
      realm: 'continent',
      excluded: 'as_only',
      detail: 'mirror in AS65001, client in AS65002',
    },
    {name: 'as_only, in the prefix pool', client: {...GB, ip: '10.9.8.7'}, flagged: {as_only: true, asn: 65001, prefixes: ['10.9.0.0/16']}, realm: 'prefix'},
    {name: 'country_only, same country', client: GB, flagged: {country_only: true, country: 'GB'}, realm: 'country'},
    {name: 'country_only, other country', client: GB, flagged: {country_only: true, country: 'FR'}, realm: 'continent', excluded: 'country_only', detail: 'mirror in FR, client in GB'},
    {
      name: 'country_only, client location unknown',
      client: {ip: '10.0.0.1', https: false},
      flagged: {country_only: true, country: 'FR'},
      realm: 'world',
      excluded: 'country_only',
      detail: 'mirror in FR, client location unknown',
    },
    {
      name: 'as_only, neither AS known',
      client: GB,
      flagged: {as_only: true, country: 'GB'},
      realm: 'continent',
      excluded: 'as_only',
      detail: 'mirror AS unknown, client AS unknown',
    },
    {name: 'region_only, same continent', client: GB, flagged: {region_only: true, country: 'FR'}, realm: 'continent'},
    {
      name: 'region_only, other continent',
      client: {...GB, country: 'US', continent: 'NA'},
      flagged: {region_only: true, country: 'FR'},
      realm: 'world',
      excluded: 'region_only',
      detail: 'mirror in EU, client in NA',
    },
  ]
  it('no pool-flag detail repeats its flag', () => {
    for (const c of cases) if (c.detail) expect(c.detail.startsWith(`${c.excluded}:`), c.name).to.equal(false)
  })
  for (const c of cases) {
    it(c.name, () => {
      // m1 is the flagged mirror; m2 is an ordinary mirror in SE (continent EU) so a pool always exists.
      const ms = mirrors(row(1, c.flagged), row(2, {country: 'SE'}))
      const s = select(c.client, file([1, 2]), ms, options)
      expect(s.realm).to.equal(c.realm)
      if (c.excluded) {
        expect(reasons(s)).to.deep.equal({m1: c.excluded})
        expect(detail(s, 'm1')).to.equal(c.detail)
        expect(s.ranked.map((r) => r.mirror.identifier)).to.deep.equal(['m2'])
      } else {
        expect(reasons(s)).to.deep.equal({})
        expect(s.ranked.find((r) => r.mirror.identifier === 'm1')?.realm).to.equal(c.realm)
      }
    })
  }

  it('a country_only mirror serves the countries of its other_countries, beside their own mirrors', () => {
    const ms = mirrors(row(1, {country: 'GB', country_only: true, other_countries: ['IE']}), row(2, {country: 'IE'}))
    const s = select(IE, file([1, 2]), ms, options)
    expect(s.realm).to.equal('country')
    expect(order(s)).to.deep.equal([
      ['m1', 'country'],
      ['m2', 'country'],
    ])
    expect(s.excluded).to.deep.equal([])
  })
})

describe('select(): country substitution', () => {
  it('NZ clients pick from AU in the country pool by default', () => {
    const ms = mirrors(row(1, {country: 'US'}), row(2, {country: 'AU'}), row(3, {country: 'FJ'}))
    const s = select(NZ, file([1, 2, 3]), ms, options)
    expect(s.realm).to.equal('country')
    expect(order(s)).to.deep.equal([
      ['m2', 'country'],
      ['m3', 'continent'],
      ['m1', 'world'],
    ])
  })
  it('without the substitution AU is only a continent mirror, tied with FJ', () => {
    const ms = mirrors(row(1, {country: 'US'}), row(2, {country: 'AU'}), row(3, {country: 'FJ'}))
    const s = select(NZ, file([1, 2, 3]), ms, Object.assign(compileSelectOptions({country_substitutions: {}}), {now: () => NOW}))
    expect(s.realm).to.equal('continent')
    expect(
      s.ranked
        .filter((c) => c.realm === 'continent')
        .map((c) => c.mirror.identifier)
        .sort(),
    ).to.deep.equal(['m2', 'm3'])
  })
  it('the client country own mirrors stay in the country pool beside the substitute', () => {
    const ms = mirrors(row(1, {country: 'NZ'}), row(2, {country: 'AU'}))
    const s = select(NZ, file([1, 2]), ms, options)
    expect(s.realm).to.equal('country')
    expect(s.ranked.map((c) => c.realm)).to.deep.equal(['country', 'country'])
  })
  it('a configured map applies to other countries (AT -> DE)', () => {
    const ms = mirrors(row(1, {country: 'DE'}), row(2, {country: 'FR'}))
    const s = select({ip: '192.0.2.5', https: false, country: 'AT', continent: 'EU'}, file([1, 2]), ms, Object.assign(compileSelectOptions({country_substitutions: {at: 'de'}}), {now: () => NOW}))
    expect(order(s)).to.deep.equal([
      ['m1', 'country'],
      ['m2', 'continent'],
    ])
  })
})

describe('select(): restrictions and exclusions', () => {
  const cases: Array<{
    name: string
    client?: ClientInfo
    mirror: Partial<MirrorRow>
    file?: Partial<SelectFile>
    held?: boolean
    reason: string
    detail: string
    opts?: Parameters<typeof compileSelectOptions>[0]
  }> = [
    {name: 'disabled', mirror: {enabled: false}, reason: 'disabled', detail: 'disabled by the operator (`mb mirror enable` turns it back on)'},
    {name: 'down', mirror: {up: false}, reason: 'down', detail: 'the last probe failed'},
    {name: 'zero score', mirror: {score: 0}, reason: 'zero_score', detail: 'score is 0 (takes no traffic)'},
    {name: 'not held', mirror: {}, held: false, reason: 'not_held', detail: 'its last scan did not list this file'},
    {name: 'not held, never scanned', mirror: {last_scan_ok_at: null}, held: false, reason: 'not_held', detail: 'no successful scan yet'},
    {
      name: 'corrupt copy (content check)',
      mirror: {},
      held: false,
      file: {corrupt: new Map([[1, {piece: 3, foundAt: NOW - 60}]]), stale: new Map([[1, {size: 60000, mtime: null}]])},
      reason: 'corrupt',
      detail: 'piece 3 of the copy did not match the index at 2027-01-15T07:59:00Z (a scan seeing another size or mtime, or `mb probe --content m1` passing, brings it back)',
    },
    {name: 'stale size', mirror: {}, held: false, file: {size: 65536, stale: new Map([[1, {size: 60000, mtime: null}]])}, reason: 'stale', detail: 'outdated copy: 60000 bytes, origin 65536'},
    {
      name: 'stale mtime',
      mirror: {},
      held: false,
      file: {size: 65536, mtime: 1_700_000_000, stale: new Map([[1, {size: 65536, mtime: 1_600_000_000}]])},
      reason: 'stale',
      detail: 'outdated copy: mtime 2020-09-13T12:26:40Z, origin 2023-11-14T22:13:20Z',
    },
    {name: 'file larger than file_maxsize', mirror: {file_maxsize: 999_999}, reason: 'too_large', detail: '1000000 bytes, above its file_maxsize 999999'},
    {name: 'file_maxsize as a bigint string', mirror: {file_maxsize: '500000' as unknown as number}, reason: 'too_large', detail: '1000000 bytes, above its file_maxsize 500000'},
    {
      name: 'scan older than max_scan_age_seconds',
      mirror: {last_scan_ok_at: new Date((NOW - 7200) * 1000)},
      opts: {max_scan_age_seconds: 3600},
      reason: 'scan_too_old',
      detail: 'last successful scan 7200 s ago, max_scan_age_seconds 3600',
    },
    {name: 'needs a rescan', mirror: {needs_rescan: true}, reason: 'needs_rescan', detail: 'was down; needs a fresh scan before it is used again'},
    {
      name: 'URL changed, awaiting scan',
      mirror: {url_changed_at: new Date((NOW - 60) * 1000), needs_rescan: true},
      reason: 'url_changed',
      detail: 'URL changed at 2027-01-15T07:59:00Z, awaiting scan (`mb scan m1`)',
    },
    {
      name: 'IPv4 client, the mirror down on IPv4 and up on IPv6',
      mirror: {up: true, status: {checks: {'http/ipv4': {up: false}, 'http/ipv6': {up: true}}} as never},
      reason: 'family_down',
      detail: "IPv4 client and the mirror's HTTP over IPv4 failed its probes (over IPv6 it works); `mb probe m1` shows why",
    },
    {
      name: 'IPv4 client, the mirror reachable over IPv6 only',
      mirror: {up: true, status: {checks: {'http/ipv6': {up: true}}} as never},
      reason: 'family_down',
      detail: "IPv4 client and the mirror's HTTP host has no IPv4 address (probed over IPv6 only)",
    },
    {
      name: 'IPv6 client, the mirror down on IPv6 whatever its IPv4 (select.ipv6 prefer)',
      client: {...GB, ip: '2001:db8::1'},
      mirror: {ipv6: false, status: {checks: {'http/ipv4': {up: true}, 'http/ipv6': {up: false}}} as never},
      reason: 'family_down',
      detail: "IPv6 client and the mirror's HTTP over IPv6 failed its probes (over IPv4 it works); `mb probe m1` shows why",
    },
    {
      name: 'a ranged request, the mirror ignores Range',
      client: {...GB, range: true},
      mirror: {range_ok: false},
      reason: 'no_range',
      detail: 'the request carries Range, and probing found the mirror answers a ranged request with the whole file (200, not 206)',
    },
    {name: 'HTTPS client, mirror without https_url', client: {...GB, https: true}, mirror: {https_url: null}, reason: 'no_https', detail: 'HTTPS client and the mirror has no https_url'},
    {name: 'mirror without any HTTP URL', mirror: {http_url: null, https_url: null, rsync_url: 'rsync://m1/pub/'}, reason: 'no_http', detail: 'the mirror has no http_url or https_url'},
    {
      name: 'IPv6 client, mirror probed without IPv6, select.ipv6 require',
      client: {...GB, ip: '2001:db8::1'},
      mirror: {ipv6: false},
      opts: {ipv6: 'require'},
      reason: 'no_ipv6',
      detail: 'IPv6 client, probing found no IPv6 on the mirror, and select.ipv6 is require',
    },
    {
      name: 'client outside client_prefixes',
      mirror: {client_prefixes: ['10.0.0.0/8', '2001:db8::/32']},
      reason: 'client_not_allowed',
      detail: 'serves only clients in 10.0.0.0/8, 2001:db8::/32; client 81.2.69.142',
    },
    {name: 'client country excluded', mirror: {exclude_countries: ['GB']}, reason: 'country_excluded', detail: 'excludes clients from GB'},
    {
      name: 'suspect: its last scan was refused',
      mirror: {scan_refused_at: new Date((NOW - 60) * 1000)},
      reason: 'scan_refused',
      detail:
        'suspect: its last scan, at 2027-01-15T07:59:00Z, was refused by the safety check (far fewer files than before: a wiped or truncated tree); a good `mb scan m1` or `mb mirror edit m1 --trust-scan` brings it back',
    },
    {
      name: 'suspect: too many corrupt copies',
      mirror: {bad_copies_suspect_at: new Date((NOW - 60) * 1000)},
      reason: 'bad_copies',
      detail:
        'suspect: since 2027-01-15T07:59:00Z, content checks have found at least `probe.suspect_bad_copies` corrupt copies on it (`mb mirror show m1`); a content round that finds fewer or `mb mirror edit m1 --trust-scan` brings it back',
    },
    {name: 'outside the mirror subtree', mirror: {base_path: 'other'}, reason: 'not_in_subtree', detail: 'carries only other/'},
    {
      name: 'in a maintenance window',
      mirror: {maintenance_until: new Date((NOW + 3600) * 1000)},
      reason: 'maintenance',
      detail: 'in maintenance until 2027-01-15T09:00:00Z (`mb mirror edit m1 --maintenance-until none` ends it)',
    },
    {
      name: 'in a maintenance window (timestamp text), before it holds the file',
      mirror: {maintenance_until: '2027-01-15T08:00:00.5Z' as unknown as Date},
      held: false,
      reason: 'maintenance',
      detail: 'in maintenance until 2027-01-15T08:00:00.500Z (`mb mirror edit m1 --maintenance-until none` ends it)',
    },
  ]
  it('no detail repeats its reason (every view prints the two side by side)', () => {
    for (const c of cases) expect(c.detail.toLowerCase().replace(/ /g, '_').startsWith(`${c.reason}:`), c.name).to.equal(false)
  })
  for (const c of cases) {
    it(c.name, () => {
      const ms = mirrors(row(1, {country: 'GB', ...c.mirror}), row(2, {country: 'SE', https_url: 'https://m2.example.org/'}))
      const opts = c.opts ? Object.assign(compileSelectOptions(c.opts), {now: () => NOW}) : options
      const s = select(c.client ?? GB, file(c.held === false ? [2] : [1, 2], c.file), ms, opts)
      expect(s.excluded.map((e) => [e.mirror.identifier, e.reason, e.detail])).to.deep.equal([['m1', c.reason, c.detail]])
      expect(s.realm).to.equal('continent')
      expect(order(s)).to.deep.equal([['m2', 'continent']])
    })
  }

  it('a maintenance window ends at its end time: the mirror is used again from then on', () => {
    for (const end of [NOW, NOW - 1]) {
      const s = select(GB, file([1]), mirrors(row(1, {country: 'GB', maintenance_until: new Date(end * 1000)})), options)
      expect(order(s), `end ${end}`).to.deep.equal([['m1', 'country']])
      expect(s.excluded).to.deep.equal([])
    }
  })
  it('a maintenance window is read against the clock of each call, not when the table is built', () => {
    const ms = new MirrorTable(mirrors(row(1, {country: 'GB', maintenance_until: new Date((NOW + 60) * 1000)})).values())
    const at = (now: number) => Object.assign(compileSelectOptions({}), {now: () => now})
    expect(selectFn(GB, file([1]), ms, at(NOW), false).ranked).to.deep.equal([])
    expect(selectFn(GB, file([1]), ms, at(NOW + 60), false).ranked.map((c) => c.mirror.identifier)).to.deep.equal(['m1'])
  })
  it("a mirror whose sync trace is further behind the origin's than sync.max_lag_seconds leaves selection (sync_lag); one without a trace stays", () => {
    const ms = mirrors(row(1, {country: 'GB', synced_at: new Date((NOW - 7200) * 1000)}), row(2, {country: 'GB', synced_at: new Date((NOW - 600) * 1000)}), row(3, {country: 'GB'}))
    const limit = (maxLagSeconds: number, originTrace?: () => number | null) => Object.assign(compileSelectOptions({}, {maxLagSeconds, ...(originTrace ? {originTrace} : {})}), {now: () => NOW})
    const s = select(
      GB,
      file([1, 2, 3]),
      ms,
      limit(3600, () => NOW - 60),
    )
    expect(s.excluded.map((e) => [e.mirror.identifier, e.reason, e.detail])).to.deep.equal([
      ['m1', 'sync_lag', "its sync trace says 2027-01-15T06:00:00Z, 1h59m behind the origin's, above sync.max_lag_seconds 3600"],
    ])
    // The redirect path (a MirrorTable) agrees; without the origin's trace the clock is the reference.
    const table = new MirrorTable(ms.values())
    const served = (options: ReturnType<typeof limit>) =>
      selectFn(GB, file([1, 2, 3]), table, options, false)
        .ranked.map((c) => c.mirror.identifier)
        .sort()
    expect(served(limit(3600, () => NOW - 60))).to.deep.equal(['m2', 'm3'])
    expect(served(limit(7150, () => null))).to.deep.equal(['m2', 'm3'])
    expect(served(limit(7150, () => NOW - 60))).to.deep.equal(['m1', 'm2', 'm3'])
    expect(select(GB, file([1, 2, 3]), ms, options).excluded).to.deep.equal([])
  })
  it('an IPv6 client may use a mirror whose IPv6 is not probed yet (null)', () => {
    const ms = mirrors(row(1, {country: 'GB', ipv6: null}), row(2, {country: 'GB', ipv6: true}))
    const s = select({...GB, ip: '2001:db8::1'}, file([1, 2]), ms, options)
    expect(s.ranked.map((c) => c.mirror.identifier).sort()).to.deep.equal(['m1', 'm2'])
    expect(s.excluded).to.deep.equal([])
  })
  it('a mirror down on IPv4 and up on IPv6 serves IPv6 clients, not IPv4 ones', () => {
    // Its summary `up` is the IPv4 checks' (false), its HTTP summary too.
    const status = {checks: {'http/ipv4': {up: false}, 'http/ipv6': {up: true}}} as never
    const ms = mirrors(row(1, {country: 'GB', up: false, http_up: false, ipv6: true, https_url: null, status}))
    expect(order(select({...GB, ip: '2001:db8::1'}, file([1]), ms, options))).to.deep.equal([['m1', 'country']])
    expect(reasons(select(GB, file([1]), ms, options))).to.deep.equal({m1: 'down'})
  })
  it('a mirror up on both families serves both; one without Range serves requests without Range', () => {
    const status = {checks: {'http/ipv4': {up: true}, 'http/ipv6': {up: true}}} as never
    const ms = mirrors(row(1, {country: 'GB', ipv6: true, status, range_ok: false}))
    for (const client of [GB, {...GB, ip: '2001:db8::1'}]) expect(order(select(client, file([1]), ms, options)), client.ip).to.deep.equal([['m1', 'country']])
    expect(order(select({...GB, range: true}, file([1]), mirrors(row(1, {country: 'GB', range_ok: true})), options))).to.deep.equal([['m1', 'country']])
  })
  it('an IPv4 client may use a mirror without IPv6', () => {
    const s = select(GB, file([1]), mirrors(row(1, {country: 'GB', ipv6: false})), options)
    expect(order(s)).to.deep.equal([['m1', 'country']])
  })
  it('a client inside client_prefixes (IPv4-mapped IPv6 text) may use the mirror', () => {
    const s = select({...GB, ip: '::ffff:10.1.2.3'}, file([1]), mirrors(row(1, {country: 'GB', client_prefixes: ['10.0.0.0/8']})), options)
    expect(order(s)).to.deep.equal([['m1', 'country']])
  })
  it('explain=false returns the same ranking without exclusions', () => {
    const ms = mirrors(row(1, {country: 'GB', enabled: false}), row(2, {country: 'SE'}), row(3, {country: 'US'}))
    const full = select(GB, file([1, 2, 3]), ms, options)
    const lean = select(GB, file([1, 2, 3]), ms, options, false)
    expect(lean.excluded).to.deep.equal([])
    expect(lean.realm).to.equal(full.realm)
    expect(lean.ranked).to.deep.equal(full.ranked)
    expect(reasons(full)).to.deep.equal({m1: 'disabled'})
  })
})

describe('select(): files the origin serves itself', () => {
  const ms = mirrors(row(1, {country: 'GB'}))
  const cases: Array<{name: string; path?: string; size?: number; client?: Partial<ClientInfo>; opts?: Parameters<typeof compileSelectOptions>[0]; reason: string; detail: string}> = [
    {name: 'small file', size: 4095, reason: 'small_file', detail: '4095 bytes, below min_size 4096'},
    {name: 'repomd.xml', path: 'repo/x86_64/repodata/repomd.xml', reason: 'origin_only', detail: 'matches origin_only pattern repomd.xml'},
    {name: 'Release', path: 'debian/dists/stable/Release', reason: 'origin_only', detail: 'matches origin_only pattern Release'},
    {name: 'InRelease', path: 'debian/dists/stable/InRelease', reason: 'origin_only', detail: 'matches origin_only pattern InRelease'},
    {name: 'Packages.xz', path: 'debian/dists/stable/main/binary-amd64/Packages.xz', reason: 'origin_only', detail: 'matches origin_only pattern Packages*'},
    {name: '*.asc', path: 'iso/distro.iso.asc', reason: 'origin_only', detail: 'matches origin_only pattern *.asc'},
    {name: '*.sig', path: 'iso/distro.iso.sig', reason: 'origin_only', detail: 'matches origin_only pattern *.sig'},
    {name: '*.sha256', path: 'iso/distro.iso.sha256', reason: 'origin_only', detail: 'matches origin_only pattern *.sha256'},
    {name: 'a full-path pattern', path: 'iso/latest/distro.iso', opts: {origin_only: ['iso/latest/**']}, reason: 'origin_only', detail: 'matches origin_only pattern iso/latest/**'},
    {name: 'excluded user agent', client: {userAgent: 'Wget/1.21 SomeBot'}, opts: {exclude_user_agents: ['somebot']}, reason: 'excluded_agent', detail: 'User-Agent matches somebot'},
    {name: 'excluded client CIDR', client: {ip: '192.0.2.77'}, opts: {exclude_clients: ['192.0.2.0/24']}, reason: 'excluded_client', detail: 'client 192.0.2.77 is in excluded 192.0.2.0/24'},
    {name: 'excluded MIME type', path: 'docs/index.html', opts: {exclude_mime: ['text/*']}, reason: 'excluded_mime', detail: 'MIME type text/html matches text/*'},
  ]
  for (const c of cases) {
    it(c.name, () => {
      const opts = c.opts ? compileSelectOptions(c.opts) : options
      const s = select({...GB, ...c.client}, file([1], {path: c.path ?? 'iso/distro.iso', size: c.size ?? 1_000_000}), ms, opts)
      expect(s).to.deep.equal({realm: null, ranked: [], excluded: [], origin: {reason: c.reason, detail: c.detail}})
    })
  }
  it('ordinary files and look-alikes still go to mirrors', () => {
    for (const path of ['iso/distro.iso', 'iso/Releases/distro.iso', 'pool/main/p/pkg.deb', 'iso/sha256sums.txt', 'a/repomd.xml.gz.bak']) {
      const s = select(GB, file([1], {path, size: 4096}), ms, options)
      expect(s.realm, path).to.equal('country')
    }
  })
  it('a file of exactly min_size goes to mirrors', () => {
    expect(select(GB, file([1], {size: 4096}), ms, options).realm).to.equal('country')
  })
})

describe('select(): weighted rendezvous hashing', () => {
  function clientFor(i: number): ClientInfo {
    const ip = `${11 + (i >>> 16)}.${(i >>> 8) & 255}.${i & 255}.7`
    return {ip, address: parseIp(ip), https: false}
  }

  it('the hash is fixed across processes and versions (golden values)', () => {
    const k4 = clientNetworkKey(parseIp('192.0.2.77')!, 24, 48)
    const k6 = clientNetworkKey(parseIp('2001:db8:1234:5678::1')!, 24, 48)
    expect(k4).to.equal(1548918039)
    expect(k6).to.equal(3047501138)
    expect(uniform(k4, 1)).to.equal(0.8201804803130419)
    expect(uniform(k4, 2)).to.equal(0.5430731819054062)
    expect(uniform(k6, 1)).to.equal(0.9827043948390284)
  })

  it('the client network is the /24 (IPv4) and /48 (IPv6), configurable', () => {
    const key = (ip: string, v4 = 24, v6 = 48) => clientNetworkKey(parseIp(ip)!, v4, v6)
    expect(key('192.0.2.1')).to.equal(key('192.0.2.254'))
    expect(key('192.0.2.1')).to.not.equal(key('192.0.3.1'))
    expect(key('192.0.2.1', 16)).to.equal(key('192.0.3.1', 16))
    expect(key('2001:db8:1:ffff::1')).to.equal(key('2001:db8:1::2'))
    expect(key('2001:db8:1::1')).to.not.equal(key('2001:db8:2::1'))
    expect(key('2001:db8:1::1', 24, 32)).to.equal(key('2001:db8:2::1', 24, 32))
  })

  it('shares follow the scores: 200 vs 100 gives 2:1 within 2% over 100,000 clients', () => {
    const ms = mirrors(row(1, {score: 200}), row(2, {score: 100}))
    const wins = {m1: 0, m2: 0} as Record<string, number>
    for (let i = 0; i < 100_000; i++) wins[winner(select(clientFor(i), file([1, 2]), ms, options, false))!]++
    const ratio = wins.m1 / wins.m2
    expect(ratio, `m1 ${wins.m1}, m2 ${wins.m2}`).to.be.within(2 * 0.98, 2 * 1.02)
  })

  it('shares follow the scores across several mirrors (50/100/150/200 within 2% each)', () => {
    const scores = [50, 100, 150, 200]
    const ms = mirrors(...scores.map((score, i) => row(i + 1, {score})))
    const wins = new Map<number, number>()
    const N = 100_000
    for (let i = 0; i < N; i++) {
      const id = select(clientFor(i), file([1, 2, 3, 4]), ms, options, false).ranked[0].mirror.id
      wins.set(id, (wins.get(id) ?? 0) + 1)
    }
    for (const [i, score] of scores.entries()) expect(wins.get(i + 1)! / N, `score ${score}`).to.be.within((score / 500) * 0.98, (score / 500) * 1.02)
  })

  it('stickiness: the same client (and its /24) always gets the same mirror and order', () => {
    const ms = mirrors(row(1), row(2), row(3), row(4), row(5))
    const a = select({ip: '198.51.100.10', https: false}, file([1, 2, 3, 4, 5]), ms, options)
    for (const ip of ['198.51.100.10', '198.51.100.200', '198.51.100.1']) {
      const b = select({ip, https: false}, file([1, 2, 3, 4, 5]), ms, options)
      expect(b.ranked.map((c) => c.mirror.id)).to.deep.equal(a.ranked.map((c) => c.mirror.id))
    }
  })

  it('stickiness: removing a mirror moves only the clients it had', () => {
    const rows = [1, 2, 3, 4, 5].map((id) => row(id, {score: id * 40}))
    const all = mirrors(...rows)
    const without3 = mirrors(...rows.filter((r) => r.id !== 3))
    let moved = 0
    let had3 = 0
    for (let i = 0; i < 20_000; i++) {
      const before = select(clientFor(i), file([1, 2, 3, 4, 5]), all, options, false).ranked.map((c) => c.mirror.id)
      const after = select(clientFor(i), file([1, 2, 4, 5]), without3, options, false).ranked.map((c) => c.mirror.id)
      if (before[0] === 3) {
        had3++
        expect(after[0]).to.equal(before[1]) // its clients go to their second choice
      } else {
        expect(after[0]).to.equal(before[0])
      }
      expect(after).to.deep.equal(before.filter((id) => id !== 3)) // the whole order is kept
      if (after[0] !== before[0]) moved++
    }
    expect(moved).to.equal(had3)
    expect(had3).to.be.greaterThan(0)
  })

  it('limit (hot path) returns exactly the first candidates of the full ranking', () => {
    const countries = ['GB', 'SE', 'DE', 'US', 'JP', 'FR', 'GB', 'SE', 'NL', 'US', 'BR', 'AU']
    const rows = countries.map((country, i) => row(i + 1, {country, score: 50 + i * 25, latitude: i % 3 === 0 ? null : 40 + i, longitude: i % 3 === 0 ? null : -10 + i * 5}))
    const ms = mirrors(...rows)
    const held = rows.map((r) => Number(r.id))
    for (let i = 0; i < 500; i++) {
      const client: ClientInfo = {...clientFor(i), country: ['GB', 'FR', 'US', 'JP', 'ZA'][i % 5], latitude: i % 2 ? 48 + (i % 7) : undefined, longitude: i % 2 ? (i % 11) - 5 : undefined}
      const full = select(client, file(held), ms, options, false)
      for (const limit of [1, 3, 6]) {
        const lean = select(client, file(held), ms, options, false, limit)
        expect(lean.realm).to.equal(full.realm)
        expect(lean.ranked).to.deep.equal(full.ranked.slice(0, limit))
      }
      // Explaining keeps everything, and adds the distances the hot path does not compute.
      const explained = select(client, file(held), ms, options, true, 1).ranked
      expect(explained.map(({distanceKm, note, ...rest}) => rest)).to.deep.equal(full.ranked)
      expect(full.ranked.every((c) => c.distanceKm === undefined)).to.equal(true)
      if (client.latitude !== undefined) expect(explained.filter((c) => c.mirror.latitude !== null).every((c) => c.distanceKm! > 0)).to.equal(true)
    }
  })

  it('a mirror that stops holding the file moves only its clients', () => {
    const ms = mirrors(row(1), row(2), row(3))
    for (let i = 0; i < 2000; i++) {
      const before = select(clientFor(i), file([1, 2, 3]), ms, options, false).ranked[0].mirror.id
      const after = select(clientFor(i), file([1, 3]), ms, options, false).ranked[0].mirror.id
      if (before !== 2) expect(after).to.equal(before)
    }
  })
})

describe('select(): distance rule', () => {
  const london = {latitude: 51.5074, longitude: -0.1278}
  const client: ClientInfo = {...GB, ...london}
  it('ranks pool members beyond the floor after the near ones; mirrors without coordinates count as near', () => {
    const ms = mirrors(
      row(1, {country: 'GB', latitude: 51.5, longitude: -0.12}), // London, ~1 km
      row(2, {country: 'GB', latitude: 55.9533, longitude: -3.1883}), // Edinburgh, ~534 km
      row(3, {country: 'GB'}), // unknown position
    )
    const s = select(client, file([1, 2, 3]), ms, options)
    expect(s.realm).to.equal('country')
    expect(s.excluded).to.deep.equal([])
    expect(s.ranked.map((c) => [c.mirror.identifier, c.rank, c.distanceKm === undefined ? null : Math.round(c.distanceKm), c.note ?? null])).to.deep.equal([
      ['m3', 1, null, null],
      ['m1', 2, 1, null],
      ['m2', 3, 534, "534 km away, beyond 1.5 x the nearest country mirror's 1 km: ranked after the near ones"],
    ])
    // The far mirror is never the choice while a near one is eligible, whatever the client network.
    for (let i = 0; i < 300; i++) expect(winner(select({...client, ip: `10.${i >> 8}.${i & 255}.1`}, file([1, 2, 3]), ms, options, false))).to.not.equal('m2')
  })
  it('reports the same great-circle distances as the haversine formula, from 10 m to half the globe', () => {
    // pairs of (client, mirror) positions; the mirror is the only one, in the world pool
    const cases: Array<[number, number, number, number]> = [
      [51.5074, -0.1278, 51.5074, -0.1277], // ~7 m
      [51.5074, -0.1278, 51.5, -0.12], // ~1 km
      [51.5074, -0.1278, 48.8566, 2.3522], // London-Paris
      [40.7128, -74.006, 35.6762, 139.6503], // New York-Tokyo
      [-33.8688, 151.2093, 64.1466, -21.9426], // Sydney-Reykjavik
      [0, 0, 0.5, 179.5], // nearly antipodal
    ]
    for (const [clat, clon, mlat, mlon] of cases) {
      const ms = mirrors(row(1, {country: 'US', continent: 'NA', latitude: mlat, longitude: mlon}))
      const s = select({...GB, latitude: clat, longitude: clon}, file([1]), ms, options)
      const expected = distanceKm(clat, clon, mlat, mlon)
      expect(s.ranked[0].distanceKm, `${clat},${clon} -> ${mlat},${mlon}`).to.be.closeTo(expected, Math.max(1e-6, expected * 1e-9))
    }
  })
  it('the choice is among mirrors within distance_factor x the nearest; the others follow nearest-first', () => {
    // Client in London; continent pool: Paris ~344 km, Amsterdam ~358 km, Frankfurt ~637 km, Madrid ~1264 km.
    const ms = mirrors(
      row(1, {country: 'FR', latitude: 48.8566, longitude: 2.3522}),
      row(2, {country: 'NL', latitude: 52.3676, longitude: 4.9041}),
      row(3, {country: 'DE', latitude: 50.1109, longitude: 8.6821}),
      row(4, {country: 'ES', latitude: 40.4168, longitude: -3.7038}),
    )
    const winners = new Set<string>()
    for (let i = 0; i < 200; i++) {
      const s = select({...client, ip: `10.0.${i}.1`}, file([1, 2, 3, 4]), ms, options, i % 50 === 0)
      expect(s.realm).to.equal('continent')
      expect(s.excluded).to.deep.equal([])
      winners.add(winner(s)!)
      const rest = s.ranked.slice(1).map((c) => c.mirror.identifier)
      expect(rest).to.deep.equal(['m1', 'm2', 'm3', 'm4'].filter((m) => m !== winner(s)))
    }
    expect([...winners].sort()).to.deep.equal(['m1', 'm2'])
    const wide = Object.assign(compileSelectOptions({distance_factor: 2}), {now: () => NOW})
    const near = new Set<string>()
    for (let i = 0; i < 200; i++) near.add(winner(select({...client, ip: `10.0.${i}.1`}, file([1, 2, 3, 4]), ms, wide, false))!)
    expect([...near].sort()).to.deep.equal(['m1', 'm2', 'm3'])
    const s = select(client, file([1, 2, 3, 4]), ms, wide)
    expect(s.ranked.map((c) => c.note ?? null).slice(1)).to.deep.equal([null, null, "1263 km away, beyond 2 x the nearest continent mirror's 344 km: ranked after the near ones"])
  })
  it('a same-country mirror 831 km away ranks after the near one and before every other pool (nothing is dropped)', () => {
    // Client in Freiburg. DE mirrors: Freiburg and Sassnitz; continent: Basel, Strasbourg; world: Lagos, Abuja, San Francisco.
    const ms = mirrors(
      row(1, {country: 'DE', latitude: 48.0, longitude: 7.85}),
      row(2, {country: 'DE', latitude: 54.535, longitude: 13.655}),
      row(3, {country: 'FR', latitude: 48.57, longitude: 7.75}),
      row(4, {country: 'CH', latitude: 47.56, longitude: 7.59}),
      row(5, {country: 'NG', latitude: 6.52, longitude: 3.38}),
      row(6, {country: 'NG', latitude: 9.08, longitude: 7.4}),
      row(7, {country: 'US', latitude: 37.77, longitude: -122.42}),
    )
    const freiburg: ClientInfo = {ip: '192.0.2.10', https: false, country: 'DE', continent: 'EU', latitude: 47.999, longitude: 7.842}
    const s = select(freiburg, file([1, 2, 3, 4, 5, 6, 7]), ms, options)
    expect(s.excluded).to.deep.equal([])
    expect(s.ranked.map((c) => [c.mirror.identifier, c.realm, Math.round(c.distanceKm!)])).to.deep.equal([
      ['m1', 'country', 1],
      ['m2', 'country', 831],
      ['m4', 'continent', 52],
      ['m3', 'continent', 64],
      ['m6', 'world', 4328],
      ['m5', 'world', 4632],
      ['m7', 'world', 9284],
    ])
    expect(s.ranked[1].note).to.equal("831 km away, beyond 1.5 x the nearest country mirror's 1 km: ranked after the near ones")
    expect(s.ranked.slice(2).map((c) => c.note ?? null)).to.deep.equal([null, null, null, null, "9284 km away, beyond 1.5 x the nearest world mirror's 4328 km: ranked after the near ones"])
  })
  it('alternatives for a client with many same-continent mirrors: nearest-first after the choice, never another continent', () => {
    // A client in Frankfurt; 3 DE mirrors, 18 elsewhere in Europe, 2 in Nigeria, 2 in the US.
    const europe: Array<[string, number, number]> = [
      ['FR', 48.86, 2.35],
      ['NL', 52.37, 4.9],
      ['BE', 50.85, 4.35],
      ['LU', 49.61, 6.13],
      ['CH', 47.38, 8.54],
      ['AT', 48.21, 16.37],
      ['CZ', 50.08, 14.44],
      ['PL', 52.23, 21.01],
      ['DK', 55.68, 12.57],
      ['SE', 59.33, 18.07],
      ['NO', 59.91, 10.75],
      ['FI', 60.17, 24.94],
      ['IT', 41.9, 12.5],
      ['ES', 40.42, -3.7],
      ['PT', 38.72, -9.14],
      ['GB', 51.51, -0.13],
      ['IE', 53.35, -6.26],
      ['HU', 47.5, 19.04],
    ]
    const rows = [
      row(1, {country: 'DE', latitude: 52.52, longitude: 13.4}),
      row(2, {country: 'DE', latitude: 53.55, longitude: 9.99}),
      row(3, {country: 'DE', latitude: 48.14, longitude: 11.58}),
      ...europe.map(([country, latitude, longitude], i) => row(10 + i, {country, latitude, longitude})),
      row(40, {country: 'NG', latitude: 6.52, longitude: 3.38}),
      row(41, {country: 'NG', latitude: 9.08, longitude: 7.4}),
      row(42, {country: 'US', latitude: 40.71, longitude: -74.0}),
      row(43, {country: 'US', latitude: 37.77, longitude: -122.42}),
    ]
    const ms = mirrors(...rows)
    const held = rows.map((r) => Number(r.id))
    const frankfurt: ClientInfo = {ip: '192.0.2.77', https: false, country: 'DE', continent: 'EU', latitude: 50.11, longitude: 8.68}
    const s = select(frankfurt, file(held), ms, options)
    expect(s.ranked).to.have.length(25)
    const nearestFirst = (from: number, to: number) => s.ranked.slice(from, to).every((c, i, all) => i === 0 || all[i - 1].distanceKm! <= c.distanceKm!)
    expect(s.ranked.slice(0, 3).every((c) => c.realm === 'country')).to.equal(true)
    expect(s.ranked.slice(3, 21).every((c) => c.realm === 'continent')).to.equal(true)
    expect([nearestFirst(1, 3), nearestFirst(3, 21), nearestFirst(21, 25)]).to.deep.equal([true, true, true])
    // The five alternatives of a redirect (Link: rel=duplicate after the Location).
    const lean = select(frankfurt, file(held), ms, options, false, 6)
    expect(lean.ranked.map((c) => [c.mirror.identifier, c.mirror.country])).to.deep.equal(s.ranked.slice(0, 6).map((c) => [c.mirror.identifier, c.mirror.country]))
    expect(lean.ranked.map((c) => c.mirror.country)).to.deep.equal(['DE', 'DE', 'DE', 'LU', 'CH', 'BE'])
  })
  it('does not apply without client coordinates', () => {
    const ms = mirrors(row(1, {country: 'FR', latitude: 48.8566, longitude: 2.3522}), row(2, {country: 'ES', latitude: 40.4168, longitude: -3.7038}))
    const s = select(GB, file([1, 2]), ms, options)
    expect(s.ranked).to.have.length(2)
    expect(s.excluded).to.deep.equal([])
  })
})

describe('select(): URLs', () => {
  it('keeps the client scheme where the mirror offers it, and encodes the path', () => {
    const ms = mirrors(row(1, {country: 'GB', http_url: 'http://a.example/pub', https_url: 'https://a.example/pub'}), row(2, {country: 'GB', http_url: null, https_url: 'https://b.example/m/'}))
    const path = 'dir with space/a#b?c%d+e:f/ünï.iso'
    const http = select(GB, file([1, 2], {path}), ms, options)
    expect(Object.fromEntries(http.ranked.map((c) => [c.mirror.identifier, c.url]))).to.deep.equal({
      m1: 'http://a.example/pub/dir%20with%20space/a%23b%3Fc%25d+e:f/%C3%BCn%C3%AF.iso',
      m2: 'https://b.example/m/dir%20with%20space/a%23b%3Fc%25d+e:f/%C3%BCn%C3%AF.iso',
    })
    const https = select({...GB, https: true}, file([1, 2], {path}), ms, options)
    expect(https.ranked.map((c) => c.url).every((u) => u.startsWith('https://'))).to.equal(true)
  })
  it('a subtree mirror gets the path below its base_path', () => {
    const ms = mirrors(row(1, {country: 'GB', http_url: 'http://a.example/distro/', base_path: 'distribution'}))
    const s = select(GB, file([1], {path: 'distribution/leap/15.6/iso/x y.iso'}), ms, options)
    expect(s.ranked[0].url).to.equal('http://a.example/distro/leap/15.6/iso/x%20y.iso')
  })
})

describe('select(): ranking by score alone (select.ranking: score)', () => {
  const byScore = compileSelectOptions({ranking: 'score'})
  byScore.now = () => NOW
  const rows = mirrors(
    row(1, {country: 'GB', continent: 'EU', latitude: 51.5, longitude: -0.1, score: 100}),
    row(2, {country: 'NZ', continent: 'OC', latitude: -41.3, longitude: 174.8, score: 300}),
    row(3, {country: 'US', continent: 'NA', fallback: true, score: 100}),
    row(4, {country: 'GB', continent: 'EU', country_only: true, score: 100}),
  )
  /** Client network i (a /24), host h in it. */
  const client = (i: number, h = 1): ClientInfo => ({...GB, ip: `10.${i >> 8}.${i & 255}.${h}`})

  it('shares the requests by score whatever the distance, one pool, fallback last, sticky per client network', () => {
    const won = new Map<string, number>()
    for (let i = 0; i < 4000; i += 1) {
      const s = select(client(i), file([1, 2, 3, 4]), rows, byScore)
      expect(s.ranking).to.equal('score')
      expect(s.realm).to.equal('world')
      expect(s.ranked.at(-1)!.mirror.identifier).to.equal('m3') // the fallback pool stays last
      won.set(winner(s)!, (won.get(winner(s)!) ?? 0) + 1)
      expect(winner(select(client(i, 77), file([1, 2, 3, 4]), rows, byScore, false))).to.equal(winner(s)) // same /24
    }
    // Scores 100 (m1), 300 (m2), 100 (m4, country_only: allowed for a GB client): 1/5, 3/5, 1/5.
    expect(won.get('m2')! / 4000).to.be.within(0.55, 0.65)
    expect(won.get('m1')! / 4000).to.be.within(0.16, 0.24)
    expect(won.get('m4')! / 4000).to.be.within(0.16, 0.24)
    // geo ranking, for comparison: the GB client always stays in its country.
    expect(winner(select(client(0), file([1, 2, 3, 4]), rows, options))).to.be.oneOf(['m1', 'm4'])
    expect(select(client(0), file([1, 2, 3, 4]), rows, options).ranking).to.equal(undefined)
  })

  it('keeps the flags: a country_only mirror abroad is still excluded', () => {
    const s = select({...NZ}, file([1, 2, 4]), rows, byScore)
    expect(reasons(s)).to.deep.include({m4: 'country_only'})
    expect(s.ranked.map((c) => c.mirror.identifier).sort()).to.deep.equal(['m1', 'm2'])
  })
})
