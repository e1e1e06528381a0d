import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {listMirrors, type PublicMirror, publicMirror} from '../../lib/mirrors/registry.js'
import {MIRROR_LIST_COLUMNS} from '../../lib/mirrors/render.js'
import {renderTable} from '../../lib/output.js'
import {PROBE_LIST_COLUMNS, probeSummaries, probeSummaryJson, type ProbeSummaryJson} from '../../lib/probe/history.js'

export default class MirrorList extends BaseCommand<typeof MirrorList> {
  static override description = `List the registered mirrors: a table on a TTY, tab-separated lines otherwise, or a JSON array with --json

The probe column gives the probe state: up, down, or unprobed, with the schemes (http, https) that are down or not probed yet, e.g. "up, https down" (HTTPS clients are not sent there). A mirror or scheme never probed is marked (used) or (skipped), as select.unprobed decides.`
  static override examples = [
    '<%= config.bin %> mirror list',
    '<%= config.bin %> mirror list --country DE --enabled',
    '<%= config.bin %> mirror list --continent EU --disabled',
    '<%= config.bin %> mirror list --json',
  ]

  static override flags = {
    country: Flags.string({description: 'only mirrors in this country (ISO 3166-1 alpha-2)'}),
    continent: Flags.string({description: 'only mirrors on this continent (AF AN AS EU NA OC SA)'}),
    enabled: Flags.boolean({description: 'only enabled mirrors', exclusive: ['disabled']}),
    disabled: Flags.boolean({description: 'only disabled mirrors', exclusive: ['enabled']}),
  }

  public async run(): Promise<Array<PublicMirror & {probe: ProbeSummaryJson}>> {
    const enabled = this.flags.enabled ? true : this.flags.disabled ? false : undefined
    const database = await this.openDb()
    const listed = (await listMirrors(database.db, {country: this.flags.country, continent: this.flags.continent, enabled})).map(publicMirror)
    const summaries = await probeSummaries(
      database.db,
      listed.map((m) => m.id),
    )
    const mirrors = listed.map((m) => ({...m, probe: probeSummaryJson(summaries.get(m.id), this.mbConfig.select.unprobed)}))
    this.print(renderTable(mirrors, [...MIRROR_LIST_COLUMNS, ...PROBE_LIST_COLUMNS]))
    return mirrors
  }
}
