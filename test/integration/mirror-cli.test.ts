/**
 * `mb mirror …` end to end through the compiled CLI, as an operator or cron would run it.
 * Exit codes: 0 ok; 1 failure (MIRROR_NOT_FOUND, MIRROR_EXISTS); 2 usage (a bad value, an
 * ambiguous name prefix: AMBIGUOUS_MIRROR).
 */
import {expect} from 'chai'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {mb} from '../helpers/cli.js'
import {ERRORS} from '../../src/lib/errors.js'

const PASSWORD = 'hunter2-s3cret'

/** The stable key set of a mirror in `--json` output (new keys may be appended, never renamed). */
const KEYS = [
  'id',
  'identifier',
  'enabled',
  'base_url',
  'http_url',
  'https_url',
  'rsync_url',
  'ftp_url',
  'country',
  'continent',
  'latitude',
  'longitude',
  'asn',
  'prefixes',
  'score',
  'country_only',
  'region_only',
  'as_only',
  'prefix_only',
  'fallback',
  'other_countries',
  'exclude_countries',
  'client_prefixes',
  'file_maxsize',
  'base_path',
  'sign_scheme',
  'sign_ttl_seconds',
  'include_patterns',
  'exclude_patterns',
  'push_url',
  'push_include',
  'admin',
  'admin_email',
  'comment',
  'up',
  'ipv6',
  'range_ok',
  'status',
  'status_reason',
  'status_changed_at',
  'needs_rescan',
  'maintenance_until',
  'scan_refused_at',
  'bad_copies_suspect_at',
  'url_changed_at',
  'synced_at',
  'sync_lag_seconds',
  'sync_error',
  'last_scan_at',
  'last_scan_ok_at',
  'last_scan_error',
  'last_scan_protocol',
  'last_scan_files',
  'last_scan_matched',
  'last_scan_seconds',
  'last_push_at',
  'last_push_ok_at',
  'last_push_error',
  'created_at',
  'updated_at',
]

describe(`mb mirror (${backend})`, () => {
  let tdb: TestDatabase
  let env: Record<string, string>
  before(async () => {
    tdb = await createTestDatabase()
    env = tdb.env
  })
  after(async () => tdb?.drop())

  it('adds mirrors with every flag, prints the result, and never prints a password', async () => {
    const gb = await mb(
      [
        'mirror',
        'add',
        'mirror.example.gb',
        '--http-url',
        'http://mirror.example.gb/pub',
        '--https-url',
        'https://mirror.example.gb/pub/',
        '--rsync-url',
        `rsync://mb:${PASSWORD}@mirror.example.gb/pub`,
        '--ftp-url',
        `ftp://anon:${PASSWORD}@mirror.example.gb/pub/`,
        '--country',
        'gb',
        '--lat',
        '51.5',
        '--lon=-0.12',
        '--asn',
        'AS64500',
        '--prefix',
        '192.0.2.0/24',
        '--prefix',
        '2001:db8::/32',
        '--score',
        '150',
        '--other-countries',
        'ie,im',
        '--exclude-countries',
        'CN',
        '--client-prefix',
        '198.51.100.0/24',
        '--region-only',
        '--file-maxsize',
        '4G',
        '--base-path',
        '/pub/iso/',
        '--include',
        '*.iso',
        '--include',
        'debug/**',
        '--exclude',
        '*.src.rpm',
        '--admin',
        'Jo Admin',
        '--admin-email',
        'jo@example.gb',
        '--comment',
        'London',
        '--no-probe',
        '--json',
      ],
      {env},
    )
    expect(gb.code, gb.stderr).to.equal(0)
    expect(gb.stdout).not.to.contain(PASSWORD)
    const m = gb.json()
    expect(Object.keys(m)).to.deep.equal([...KEYS, 'probe'])
    expect(m.probe).to.deep.equal({probed: false, reason: 'not probed (--no-probe)'})
    expect(m).to.deep.include({
      identifier: 'mirror.example.gb',
      enabled: true,
      base_url: 'https://mirror.example.gb/pub/',
      http_url: 'http://mirror.example.gb/pub/',
      rsync_url: 'rsync://mb:***@mirror.example.gb/pub/',
      ftp_url: 'ftp://anon:***@mirror.example.gb/pub/',
      country: 'GB',
      continent: 'EU',
      latitude: 51.5,
      longitude: -0.12,
      asn: 64500,
      prefixes: ['192.0.2.0/24', '2001:db8::/32'],
      score: 150,
      other_countries: ['IE', 'IM'],
      exclude_countries: ['CN'],
      client_prefixes: ['198.51.100.0/24'],
      region_only: true,
      country_only: false,
      fallback: false,
      file_maxsize: 4 * 1024 ** 3,
      base_path: 'pub/iso',
      include_patterns: ['*.iso', 'debug/**'],
      exclude_patterns: ['*.src.rpm'],
      admin: 'Jo Admin',
      admin_email: 'jo@example.gb',
      comment: 'London',
      up: true,
      ipv6: null,
      needs_rescan: false,
      last_scan_at: null,
    })

    const se = await mb(['mirror', 'add', 'mirror.example.se', '--http-url', 'http://mirror.example.se/', '--country', 'SE', '--disabled', '--no-probe'], {env})
    expect(se.code, se.stderr).to.equal(0)
    expect(se.stdout).to.match(/^Added mirror mirror\.example\.se \(id \d+\)\./)
    // A summary, not every field: the full view is --verbose (or `mb mirror show`).
    const lines = se.stdout.trim().split('\n')
    expect(lines.length, se.stdout).to.be.at.most(8)
    expect(se.stdout).to.match(/^urls: +http:\/\/mirror\.example\.se\/$/m)
    expect(se.stdout).to.match(/^country: +SE \(EU\)$/m)
    expect(se.stdout).to.match(/^score: +100$/m)
    expect(se.stdout).to.match(/^enabled: +no$/m)
    expect(lines.at(-1)).to.match(/^Not probed \(--no-probe\)/)
    expect(se.stdout).not.to.match(/^last_scan_at:/m)
  })

  it('refuses a duplicate name (exit 1) and bad values (exit 2), writing nothing', async () => {
    const duplicate = await mb(['mirror', 'add', '--no-locate', 'Mirror.Example.GB', '--http-url', 'http://other.example/', '--json'], {env})
    expect(duplicate.code).to.equal(1)
    expect(duplicate.json().error).to.deep.equal({
      code: 'MIRROR_EXISTS',
      message: 'A mirror named "mirror.example.gb" already exists. Use `mb mirror edit mirror.example.gb` to change it, or pick another name.',
      hint: ERRORS.MIRROR_EXISTS.hint,
    })

    const badAdd = await mb(['mirror', 'add', 'mirror.example.us', '--https-url', 'https://mirror.example.us/', '--country', 'XX'], {env})
    expect(badAdd.code).to.equal(2)
    expect(badAdd.stderr).to.contain('Invalid --country "XX": expected an ISO 3166-1 alpha-2 country code')

    const badName = await mb(['mirror', 'add', '--no-locate', 'mïrror€', '--http-url', 'http://m.example/'], {env})
    expect(badName.code, badName.stderr).to.equal(2)
    expect(badName.stderr).to.contain('Invalid NAME "mïrror€": character "ï" (U+00EF) is not allowed; a mirror name has letters, digits, ".", "-" and "_"')
    const help = await mb(['mirror', 'add', '--help'], {env})
    expect(help.stdout.replace(/\s+/g, ' ')).to.contain('letters, digits, ".", "-" and "_", 1-253 characters, starting with a letter or digit')

    const badEdit = await mb(['mirror', 'edit', 'mirror.example.gb', '--score', '10', '--ftp-url', `http://x:${PASSWORD}@h.example/`, '--json'], {env})
    expect(badEdit.code).to.equal(2)
    expect(badEdit.stdout).not.to.contain(PASSWORD)
    expect(badEdit.json().error.code).to.equal('INVALID_MIRROR_FIELD')
    expect(badEdit.json().error.message).to.contain('Invalid --ftp-url "http://x:***@h.example/"')

    for (const time of ['tomorrow', '2026-12-01', '2026-12-01T18:00:00', '2026-02-30T10:00:00Z']) {
      const badTime = await mb(['mirror', 'edit', 'mirror.example.gb', '--maintenance-until', time], {env})
      expect(badTime.code, time).to.equal(2)
      expect(badTime.stderr).to.contain(
        `Invalid --maintenance-until "${time}": expected an ISO 8601 time with an offset, such as 2026-12-01T18:00:00Z or 2026-12-01T19:00+01:00, or none to end the window`,
      )
    }

    const conflict = await mb(['mirror', 'edit', 'mirror.example.gb', '--score', '10', '--as-only'], {env})
    expect(conflict.code).to.equal(2)
    expect(conflict.stderr).to.contain('--region-only and --as-only exclude each other')

    const list = await mb(['mirror', 'list', '--json'], {env})
    expect(list.code, list.stderr).to.equal(0)
    const mirrors = list.json()
    expect(mirrors.map((m: {identifier: string}) => m.identifier)).to.deep.equal(['mirror.example.gb', 'mirror.example.se'])
    expect(mirrors[0]).to.include({score: 150, as_only: false, ftp_url: 'ftp://anon:***@mirror.example.gb/pub/'})
    expect(list.stdout).not.to.contain(PASSWORD)
  })

  it('resolves names by unambiguous prefix; an ambiguous prefix lists the candidates (exit 2); none is exit 1', async () => {
    const ambiguous = await mb(['mirror', 'show', 'mirror.ex'], {env})
    expect(ambiguous.code).to.equal(2)
    expect(ambiguous.stderr).to.contain('Mirror name "mirror.ex" is ambiguous; it matches: mirror.example.gb, mirror.example.se. Give the full name.')

    const missing = await mb(['mirror', 'remove', 'nope', '--json'], {env})
    expect(missing.code).to.equal(1)
    expect(missing.json().error.code).to.equal('MIRROR_NOT_FOUND')

    const edit = await mb(
      ['mirror', 'edit', 'mirror.example.g', '--score', '0', '--asn', '', '--clear', 'prefix', '--no-region-only', '--country-only', '--https-url', 'https://mirror.example.gb/new/'],
      {env},
    )
    expect(edit.code, edit.stderr).to.equal(0)
    expect(edit.stdout).to.match(/^Updated mirror mirror\.example\.gb: /)
    expect(edit.stdout).to.match(/^score: +0$/m)
    expect(edit.stdout).to.match(/^asn: +-$/m)
    expect(edit.stdout).to.match(/^url_changed_at: +\S+ \(URL changed, awaiting scan\)$/m)
    expect(edit.stdout).not.to.contain(PASSWORD)

    const show = await mb(['mirror', 'show', 'MIRROR.EXAMPLE.G', '--json'], {env})
    expect(show.code, show.stderr).to.equal(0)
    const m = show.json()
    expect(Object.keys(m)).to.deep.equal([...KEYS, 'bad_copies', 'suspect_bad_copies', 'content_checks', 'probe'])
    expect(m.bad_copies).to.equal(0)
    expect(m).to.deep.include({
      identifier: 'mirror.example.gb',
      score: 0,
      asn: null,
      prefixes: [],
      region_only: false,
      country_only: true,
      https_url: 'https://mirror.example.gb/new/',
      needs_rescan: false,
      latitude: 51.5,
      comment: 'London',
    })
    expect(m.url_changed_at).to.be.a('string')
    expect(show.stdout).not.to.contain(PASSWORD)
  })

  it('sets a maintenance window (any offset, stored and shown in UTC) and ends it with none', async () => {
    const set = await mb(['mirror', 'edit', 'mirror.example.se', '--maintenance-until', '2030-06-01T20:30+02:00', '--json'], {env})
    expect(set.code, set.stderr).to.equal(0)
    expect(set.json().maintenance_until).to.equal('2030-06-01T18:30:00.000Z')
    const show = await mb(['mirror', 'show', 'mirror.example.se'], {env})
    expect(show.stdout).to.match(/^maintenance_until: +2030-06-01T18:30:00Z$/m)
    // A window already over is shown as over.
    const past = await mb(['mirror', 'edit', 'mirror.example.se', '--maintenance-until', '2020-01-01T00:00:00Z'], {env})
    expect(past.stdout).to.match(/^maintenance_until: +2020-01-01T00:00:00Z \(ended\)$/m)
    const ended = await mb(['mirror', 'edit', 'mirror.example.se', '--maintenance-until', 'none'], {env})
    expect(ended.code, ended.stderr).to.equal(0)
    expect(ended.stdout).to.contain('Updated mirror mirror.example.se: maintenance_until.')
    expect((await mb(['mirror', 'show', 'mirror.example.se', '--json'], {env})).json().maintenance_until).to.equal(null)
  })

  it('enables, disables, lists with filters, and removes', async () => {
    const enable = await mb(['mirror', 'enable', 'mirror.example.se', '--no-probe'], {env})
    expect(enable.code, enable.stderr).to.equal(0)
    expect(enable.stdout.trim()).to.equal(
      'Mirror mirror.example.se enabled.\nNot probed (--no-probe): selection uses it as if it were up (select.unprobed: use) until a probe says otherwise (`mb probe mirror.example.se`).',
    )

    const disable = await mb(['mirror', 'disable', 'mirror.example.g', '--json'], {env})
    expect(disable.code, disable.stderr).to.equal(0)
    expect(disable.json()).to.include({identifier: 'mirror.example.gb', enabled: false})

    const table = await mb(['mirror', 'list', '--country', 'se', '--enabled'], {env})
    expect(table.code, table.stderr).to.equal(0)
    const lines = table.stdout.trim().split('\n')
    expect(lines[0].split('\t')).to.deep.equal([
      'name',
      'country',
      'continent',
      'score',
      'enabled',
      'up',
      'status_reason',
      'last_scan',
      'scan_result',
      'push_result',
      'base_url',
      'probe',
      'last_probe',
      'probe_reason',
    ])
    expect(lines.slice(1)).to.deep.equal(['mirror.example.se\tSE\tEU\t100\tyes\tyes\t-\t-\t-\t-\thttp://mirror.example.se/\tunprobed (used)\t-\t-'])

    const disabled = await mb(['mirror', 'list', '--disabled', '--json'], {env})
    expect(disabled.json().map((m: {identifier: string}) => m.identifier)).to.deep.equal(['mirror.example.gb'])

    const remove = await mb(['mirror', 'remove', 'mirror.example.gb'], {env})
    expect(remove.code, remove.stderr).to.equal(0)
    expect(remove.stdout).to.match(/^Removed mirror mirror\.example\.gb \(id \d+\)\.$/m)

    const after = await mb(['mirror', 'list', '--json'], {env})
    expect(after.json().map((m: {identifier: string}) => m.identifier)).to.deep.equal(['mirror.example.se'])
    const removed = await mb(['mirror', 'list', '--removed', '--json'], {env})
    expect(removed.code, removed.stderr).to.equal(0)
    expect(removed.json().map((m: {identifier: string}) => m.identifier)).to.deep.equal(['mirror.example.gb'])
    expect(removed.json()[0].removed_by).to.be.a('string').and.not.equal('')
    expect((await mb(['mirror', 'list', '--removed', '--country', 'GB'], {env})).code).to.equal(2)
  })

  it('refuses a too-broad or reserved --prefix without --force (add and edit), stores it with --force, and marks it in mirror show', async () => {
    const url = 'http://wide.example.net/'
    for (const prefix of ['0.0.0.0/0', '::/0', '81.0.0.0/8']) {
      const refused = await mb(['mirror', 'add', '--no-locate', 'wide.example.net', '--http-url', url, '--prefix', prefix, '--json'], {env})
      expect(refused.code, prefix).to.equal(2)
      expect(refused.json().error.code).to.equal('INVALID_MIRROR_FIELD')
      expect(refused.json().error.message)
        .to.contain(`--prefix ${prefix} is shorter than /${prefix.includes(':') ? 32 : 16}`)
        .and.contain('every client in that range')
        .and.contain('--force')
    }
    const reserved = await mb(['mirror', 'add', '--no-locate', 'wide.example.net', '--http-url', url, '--prefix', '10.0.0.0/16'], {env})
    expect(reserved.code).to.equal(2)
    expect(reserved.stderr).to.contain('--prefix 10.0.0.0/16 is in a reserved range').and.contain('--force')
    const legacy = await mb(['mirror', 'add', '--no-locate', 'wide.example.net', '--http-url', url, '--prefix', '010.0.0.0/8', '--force'], {env})
    expect(legacy.code).to.equal(2)
    expect(legacy.stderr).to.contain('leading zeros are not allowed (write 10.0.0.0)')
    const short = await mb(['mirror', 'add', '--no-locate', 'wide.example.net', '--http-url', url, '--client-prefix', '1.2.3'], {env})
    expect(short.code).to.equal(2)
    expect(short.stderr).to.contain('--client-prefix').and.contain('not a full IPv4 address (four parts)')
    expect((await mb(['mirror', 'list', '--json'], {env})).json().map((m: {identifier: string}) => m.identifier)).not.to.include('wide.example.net')

    const forced = await mb(['mirror', 'add', '--no-locate', 'wide.example.net', '--http-url', url, '--prefix', '0.0.0.0/0', '--prefix', '81.2.69.0/24', '--force', '--verbose'], {env})
    expect(forced.code, forced.stderr).to.equal(0)
    expect(forced.stdout).to.match(/^prefixes: +0\.0\.0\.0\/0 \(broad, forced\),81\.2\.69\.0\/24$/m)
    // --verbose: every field, as `mb mirror show`.
    expect(forced.stdout).to.match(/^last_scan_at: +-$/m)
    expect(forced.stdout.trim().split('\n').length).to.be.above(30)

    const editRefused = await mb(['mirror', 'edit', 'wide.example.net', '--prefix', '192.168.0.0/16'], {env})
    expect(editRefused.code).to.equal(2)
    expect(editRefused.stderr).to.contain('--prefix 192.168.0.0/16 is in a reserved range').and.contain('--force')
    const otherField = await mb(['mirror', 'edit', 'wide.example.net', '--score', '90'], {env})
    expect(otherField.code, otherField.stderr).to.equal(0)
    const editForced = await mb(['mirror', 'edit', 'wide.example.net', '--prefix', '192.168.0.0/16', '--prefix', '::/0', '--force'], {env})
    expect(editForced.code, editForced.stderr).to.equal(0)

    const show = await mb(['mirror', 'show', 'wide.example.net'], {env})
    expect(show.code, show.stderr).to.equal(0)
    expect(show.stdout).to.match(/^prefixes: +192\.168\.0\.0\/16 \(reserved, forced\),::\/0 \(broad, forced\)$/m)
    const json = await mb(['mirror', 'show', 'wide.example.net', '--json'], {env})
    expect(json.json().prefixes).to.deep.equal(['192.168.0.0/16', '::/0'])

    const documentation = await mb(['mirror', 'edit', 'wide.example.net', '--prefix', '198.51.100.0/24', '--prefix', '2001:db8::/32'], {env})
    expect(documentation.code, documentation.stderr).to.equal(0)
    expect(documentation.stdout).to.match(/^prefixes: +198\.51\.100\.0\/24,2001:db8::\/32$/m)
    expect((await mb(['mirror', 'remove', 'wide.example.net'], {env})).code).to.equal(0)
  })
})
