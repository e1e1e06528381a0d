import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {UsageError, errorMessage} from '../../lib/errors.js'
import {openGeo} from '../../lib/geo/geoip.js'
import type {MirrorRow} from '../../lib/db/schema.js'
import {describeLocation, type Location, locateHost, mirrorHost, severalCountries} from '../../lib/mirrors/locate.js'
import {editMirror, listMirrors, resolveMirror} from '../../lib/mirrors/registry.js'
import {renderTable} from '../../lib/output.js'

/** The location fields compared and applied. */
const FIELDS = ['country', 'continent', 'latitude', 'longitude', 'asn'] as const

/** What locating one mirror found, and how it differs from the registry. */
interface Located {
  name: string
  host: string | null
  location: Location | null
  /** Why it could not be located (no URL, no address, no country known). */
  error: string | null
  /** Fields whose located value differs from the stored one (GeoIP's unknowns are not differences). */
  changes: Array<{field: (typeof FIELDS)[number]; from: string | number | null; to: string | number}>
  warning: string | null
  applied: boolean
}

function differences(row: MirrorRow, l: Location): Located['changes'] {
  const changes: Located['changes'] = []
  for (const field of FIELDS) {
    const to = l[field]
    if (to === null || to === undefined) continue
    const from = row[field] === null ? null : field === 'country' || field === 'continent' ? row[field] : Number(row[field])
    if (from !== to) changes.push({field, from, to})
  }
  return changes
}

export default class MirrorLocate extends BaseCommand<typeof MirrorLocate> {
  static override description = `Locate mirrors from their hosts again and show how the registry differs; --apply writes the differences

Each mirror's first URL's host is resolved (A and AAAA) and looked up in the GeoIP and ASN databases, as \`mb mirror add\` does without --country. The table lists, per mirror, what was found and the fields that differ (country, continent, latitude, longitude, asn); what GeoIP does not know is left as stored. Without --apply nothing is changed. A mirror that cannot be located is reported and left alone; the command then exits 1.`
  static override examples = ['<%= config.bin %> mirror locate ftp.example.de', '<%= config.bin %> mirror locate --all', '<%= config.bin %> mirror locate --all --apply --json']

  static override args = {
    name: Args.string({description: 'the mirror to locate (or --all)'}),
  }

  static override flags = {
    all: Flags.boolean({description: 'locate every mirror'}),
    apply: Flags.boolean({description: 'write the differences to the registry'}),
  }

  public async run(): Promise<Located[]> {
    if (Boolean(this.args.name) === this.flags.all) throw new UsageError('Give a mirror name or --all (not both): mb mirror locate NAME | --all [--apply].')
    const database = await this.openDb()
    const rows = this.flags.all ? await listMirrors(database.db) : [await resolveMirror(database.db, this.args.name!)]
    const geo = await openGeo({geoip: this.mbConfig.geoip, asnDb: this.mbConfig.asn_db})
    const results: Located[] = []
    for (const row of rows) {
      const host = mirrorHost(row) ?? null
      const result: Located = {name: row.identifier, host, location: null, error: null, changes: [], warning: null, applied: false}
      results.push(result)
      if (host === null) {
        result.error = 'no URL to take a host from'
        continue
      }
      try {
        result.location = await locateHost(host, geo)
      } catch (error) {
        result.error = errorMessage(error)
        continue
      }
      if (result.location.country === null) {
        result.error = `${describeLocation(result.location)}: GeoIP knows no country`
        continue
      }
      result.warning = severalCountries(result.location) ?? null
      result.changes = differences(row, result.location)
      if (this.flags.apply && result.changes.length > 0) {
        await editMirror(database.db, row.identifier, Object.fromEntries(result.changes.map((c) => [c.field, String(c.to)])))
        result.applied = true
      }
    }
    this.report(results)
    if (results.some((r) => r.error !== null)) process.exitCode = 1
    return results
  }

  private report(results: Located[]): void {
    for (const r of results) if (r.warning) this.warn(r.warning)
    this.print(
      renderTable(results, [
        {header: 'name', get: (r) => r.name},
        {header: 'host', get: (r) => r.host, priority: 0.5},
        {header: 'found', get: (r) => r.error ?? (r.location ? describeLocation(r.location).replace(/^\S+ /, '') : null)},
        {header: 'changes', get: (r) => (r.changes.length === 0 ? (r.error ? null : 'none') : r.changes.map((c) => `${c.field} ${c.from ?? '-'} -> ${c.to}`).join('; '))},
        {header: 'applied', get: (r) => (r.applied ? 'yes' : r.changes.length > 0 ? 'no (--apply writes it)' : null), priority: 0.7},
      ]),
    )
  }
}
