import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderRecord, renderTable} from '../../lib/output.js'
import {type FileLookup, lookupFiles} from '../../lib/lookup/files.js'
import {outdatedCopy} from '../../lib/select/rules.js'
import {shortIso, unixIso} from '../../lib/time.js'

export default class FileLookupCommand extends BaseCommand<typeof FileLookupCommand> {
  static override description = `Show an indexed file: size, mtime, hashes, and the mirrors that hold it

PATH is relative to the origin root, or a glob ('*.iso', 'iso/**/*.sha256'; quote it) that lists every match.

With --client-ip, also explain the choice \`mb serve\` would make for that client: the realm (prefix, as, country, continent, world, fallback), each eligible mirror in rank order with its URL, and the reason each other mirror was passed over (disabled, down, corrupt, stale, too_large, no_https, country_only, no_ipv6, ...); a note says why a mirror ranks after others of its pool (beyond the distance factor, no IPv6 for an IPv6 client). A retry line states the retry rule (a repeated download of the same client goes to the next mirror in rank order) and where attempt N goes (--attempt). GeoIP comes from the \`geoip\` and \`asn_db\` settings (default: the bundled GeoLite2 City data).`

  static override examples = [
    '<%= config.bin %> file lookup iso/distro-1.0.iso',
    "<%= config.bin %> file lookup '*.iso'",
    '<%= config.bin %> file lookup iso/distro-1.0.iso --client-ip 81.2.69.142',
    '<%= config.bin %> file lookup iso/distro-1.0.iso --client-ip 2001:db8::1 --https --json',
    {description: 'Where the third try of a client that retries goes', command: '<%= config.bin %> file lookup iso/distro-1.0.iso --client-ip 81.2.69.142 --attempt 3'},
  ]

  static override args = {
    path: Args.string({description: 'origin-relative path, or a glob', required: true}),
  }

  static override flags = {
    'client-ip': Flags.string({description: 'explain the mirror choice for this client address (IPv4 or IPv6)'}),
    country: Flags.string({
      description: 'with --client-ip: the client is in this country (ISO 3166-1 alpha-2), as a trusted ?country= forces it on mb serve; its continent follows the country',
      dependsOn: ['client-ip'],
    }),
    https: Flags.boolean({description: 'the client uses HTTPS (only mirrors with an https_url qualify)', default: false}),
    attempt: Flags.integer({description: 'with --client-ip: show where retry attempt N of this client goes (1 = a first request; see the retry line)', min: 1, max: 255}),
    limit: Flags.integer({description: 'at most this many files for a glob', default: 1000, min: 1}),
    geoip: Flags.string({description: 'GeoIP City/Country .mmdb file (env: MB_GEOIP; default: bundled)', multiple: true}),
    'asn-db': Flags.string({description: 'GeoLite2-ASN .mmdb file (env: MB_ASN_DB)'}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {geoip: this.flags.geoip, asn_db: this.flags['asn-db']}
  }

  public async run(): Promise<{files: FileLookup[]}> {
    const database = await this.openDb()
    const files = await lookupFiles(database, this.mbConfig, {
      pattern: this.args.path,
      clientIp: this.flags['client-ip'],
      https: this.flags.https,
      limit: this.flags.limit,
      attempt: this.flags.attempt,
      country: this.flags.country,
    })
    if (!this.jsonEnabled()) this.log(files.map((f) => render(f)).join('\n\n'))
    return {files}
  }
}

/** What the country column says for a mirror without a country. */
const LOCATION_UNKNOWN = 'location unknown'

/** The mirrors holding the file; a `by` column when a sync trace vouched for some copy (`select.trust_trace`). */
function holdersTable(mirrors: FileLookup['mirrors']): string {
  return renderTable(mirrors, [
    {header: 'mirror', get: (m) => m.identifier},
    {header: 'country', get: (m) => m.country ?? LOCATION_UNKNOWN},
    {header: 'url', get: (m) => m.url},
    ...(mirrors.some((m) => m.by === 'trace') ? [{header: 'by', get: (m: FileLookup['mirrors'][number]) => (m.by === 'trace' ? 'trace (no scan yet)' : 'scan')}] : []),
  ])
}

function render(f: FileLookup): string {
  const lines: string[] = []
  const record: Array<[string, unknown]> = [
    ['path', f.path],
    ...(f.requested === null ? [] : [['via link', `${f.requested} -> ${f.path}`] as [string, unknown]]),
    ['size', `${f.size} bytes`],
    ['mtime', f.mtime_utc],
    ...(f.mirror_only ? [['origin', 'mirror-only: pruned from the origin, redirected while mirrors hold it (serve.mirror_only)'] as [string, unknown]] : []),
  ]
  if (f.hashes) record.push(['md5', f.hashes.md5], ['sha1', f.hashes.sha1], ['sha256', f.hashes.sha256])
  record.push(['mirrors', `${f.mirrors.length} hold this version`])
  lines.push(renderRecord(record))
  if (f.mirrors.length > 0) lines.push(holdersTable(f.mirrors))
  if (f.stale.length > 0) {
    lines.push('outdated copies (size or mtime differ from the origin; not used until updated):')
    lines.push(
      renderTable(f.stale, [
        {header: 'mirror', get: (s) => s.identifier},
        {header: 'copy', get: (s) => outdatedCopy(s, f)},
        {header: 'mtime (UTC)', get: (s) => (s.mtime === null ? null : unixIso(s.mtime))},
      ]),
    )
  }
  if (f.corrupt.length > 0) {
    lines.push('corrupt copies (a content check found a piece that did not match the index; not used until a scan sees them change or a check passes):')
    lines.push(
      renderTable(f.corrupt, [
        {header: 'mirror', get: (c) => c.identifier},
        {header: 'piece', get: (c) => c.piece},
        {header: 'found (UTC)', get: (c) => c.found_at},
      ]),
    )
  }
  lines.push(...checkLines(f))
  const e = f.explain
  if (e) {
    const located = e.client.country === null && e.client.continent === null ? ['location unknown'] : [e.client.country ?? 'country unknown', e.client.continent ?? 'continent unknown']
    const where = [...located, e.client.asn === null ? null : `AS${e.client.asn}`].filter(Boolean).join(', ')
    lines.push('')
    lines.push(`client ${e.client.ip} (${where}) over ${e.client.https ? 'HTTPS' : 'HTTP'}:`)
    if (e.rule)
      lines.push(
        `rule ${e.rule.name} matches: ${e.rule.target === 'url' ? `redirect ${e.rule.status} to ${e.rule.url}` : e.rule.target === 'mirrors' ? 'only its mirrors are ranked' : 'delivered by the origin'}`,
      )
    if (e.origin) lines.push(`served by the origin: ${e.origin.reason} (${e.origin.detail})`)
    else if (e.rule?.target !== 'url') lines.push(`realm: ${e.realm}${e.ranking === 'score' ? ' (ranked by score alone: select.ranking is score)' : ''}; redirect to ${e.ranked[0].url}`)
    if (e.ranked.length > 0) {
      lines.push(
        renderTable(e.ranked, [
          {header: 'rank', get: (c) => c.rank},
          {header: 'realm', get: (c) => c.realm},
          {header: 'mirror', get: (c) => c.mirror},
          {header: 'country', get: (c) => c.country ?? LOCATION_UNKNOWN},
          {header: 'km', get: (c) => c.distance_km},
          {header: 'url', get: (c) => c.url},
          // Only when some mirror ranks after others of its pool (distance, IPv6), to keep the table narrow.
          ...(e.ranked.some((c) => c.note !== null) ? [{header: 'note', get: (c: (typeof e.ranked)[number]) => c.note}] : []),
        ]),
      )
    }
    if (e.retry) lines.push(`retry: attempt ${e.retry.attempt} goes to ${e.retry.goes_to}; ${e.retry.rule}`)
    if (e.excluded.length > 0) {
      lines.push('excluded:')
      lines.push(
        renderTable(e.excluded, [
          {header: 'mirror', get: (x) => x.mirror},
          {header: 'reason', get: (x) => x.reason},
          {header: 'detail', get: (x) => x.detail},
        ]),
      )
    }
  }
  return lines.join('\n')
}

/** What content checks read of each copy, as lines (none when no check read one). */
function checkLines(f: FileLookup): string[] {
  if (f.checks.length === 0) return []
  return [
    'content checks (pieces of the current pass read and matching; whole = the last pass that read every piece):',
    renderTable(f.checks, [
      {header: 'mirror', get: (c) => c.identifier},
      {header: 'pieces read', get: (c) => `${c.pieces_read}/${c.pieces}`},
      {header: 'checked (UTC)', get: (c) => shortIso(c.checked_at)},
      {header: 'whole (UTC)', get: (c) => shortIso(c.whole_at)},
      {header: 'unchecked', get: (c) => (c.unchecked_at === null ? null : `${shortIso(c.unchecked_at)}: ${c.unchecked_reason}`)},
    ]),
  ]
}
