import {Flags} from '@oclif/core'
import {isoSeconds} from '../../lib/time.js'
import {BaseCommand} from '../../base-command.js'
import {readOriginTrace, syncViewOptions} from '../../lib/sync/trace.js'
import {listMirrors, listRemovedMirrors, type RemovedMirror} from '../../lib/mirrors/registry.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {MIRROR_LIST_COLUMNS} from '../../lib/mirrors/render.js'
import {type Column, renderTable} from '../../lib/output.js'
import {MbError, UsageError} from '../../lib/errors.js'
import {buildOverview, NetworkView, type Overview, type OverviewRow} from '../../lib/operator/network.js'
import {parseSubtree} from '../../lib/operator/network-page.js'
import {loadSnapshot} from '../../lib/serve/snapshot/snapshot.js'
import {PROBE_LIST_COLUMNS, probeSummaries, probeSummaryJson, type ProbeSummaryJson} from '../../lib/probe/history.js'

export default class MirrorList extends BaseCommand<typeof MirrorList> {
  static override description = `List the registered mirrors: a table on a TTY, tab-separated lines otherwise, or a JSON array with --json

The probe column gives the probe state: up, down, or unprobed, with the schemes (http, https) that are down or not probed yet, e.g. "up, https down" (HTTPS clients are not sent there). A mirror or scheme never probed is marked (used) or (skipped), as select.unprobed decides.

With --path SUBDIR it gives the public network overview of that subtree instead (what \`GET /mirrors?path=SUBDIR/\` of \`mb serve\` shows): the mirrors a client could be sent to that carry part of it, with their probe state per scheme, last successful scan, and share of the subtree's files they hold in the current version. --path / gives it for the whole tree.`
  static override examples = [
    '<%= config.bin %> mirror list',
    '<%= config.bin %> mirror list --country DE --enabled',
    '<%= config.bin %> mirror list --continent EU --disabled',
    '<%= config.bin %> mirror list --json',
    '<%= config.bin %> mirror list --path distribution/leap/',
    '<%= config.bin %> mirror list --removed',
  ]

  static override flags = {
    country: Flags.string({description: 'only mirrors in this country (ISO 3166-1 alpha-2)'}),
    continent: Flags.string({description: 'only mirrors on this continent (AF AN AS EU NA OC SA)'}),
    enabled: Flags.boolean({description: 'only enabled mirrors', exclusive: ['disabled']}),
    disabled: Flags.boolean({description: 'only disabled mirrors', exclusive: ['enabled']}),
    path: Flags.string({
      description: 'show the public overview of this origin subtree (/ = the whole tree): the mirrors clients could be sent to, their share of it',
      exclusive: ['country', 'continent', 'enabled', 'disabled'],
    }),
    removed: Flags.boolean({
      description: 'list the removed mirrors instead, newest first: name, the id it had, URLs, when and by whom (mb mirror remove keeps that record)',
      exclusive: ['country', 'continent', 'enabled', 'disabled', 'path'],
    }),
  }

  public async run(): Promise<Array<PublicMirror & {probe: ProbeSummaryJson}> | Overview | RemovedMirror[]> {
    if (this.flags.path !== undefined) return this.overview(this.flags.path)
    if (this.flags.removed) {
      const removed = await listRemovedMirrors((await this.openDb()).db)
      this.print(renderTable(removed, REMOVED_COLUMNS))
      return removed
    }
    const enabled = this.flags.enabled ? true : this.flags.disabled ? false : undefined
    const database = await this.openDb()
    const originTrace = await readOriginTrace(this.mbConfig.root, this.mbConfig.sync.trace_path)
    const listed = (await listMirrors(database.db, {country: this.flags.country, continent: this.flags.continent, enabled})).map((row) => publicMirror(row, originTrace))
    const summaries = await probeSummaries(
      database.db,
      listed.map((m) => m.id),
    )
    const mirrors = listed.map((m) => ({...m, probe: probeSummaryJson(summaries.get(m.id), this.mbConfig.select.unprobed)}))
    // The sync column only where traces are read (`sync.trace_path`): elsewhere it is empty.
    const columns = this.mbConfig.sync.trace_path ? MIRROR_LIST_COLUMNS : MIRROR_LIST_COLUMNS.filter((c) => c.header !== 'sync')
    this.print(renderTable(mirrors, [...columns, ...PROBE_LIST_COLUMNS.map((c) => ({...c, priority: PROBE_PRIORITY[c.header]}))]))
    return mirrors
  }

  /** The network overview of `path` (see the description). @throws UsageError for a bad path, MbError when no indexed file lies under it */
  private async overview(path: string): Promise<Overview> {
    const parsed = parseSubtree(path)
    if ('error' in parsed) throw new UsageError(`Bad --path: ${parsed.error.replace('?path=', 'the path')}.`)
    const database = await this.openDb()
    const snapshot = await loadSnapshot(database)
    const subtree = parsed.subtree
    if (subtree !== '' && snapshot.files.keys(subtree).next().done)
      throw new MbError(`No indexed file lies under /${subtree}. Give a directory of the tree (relative to the root), or run \`mb index\` first.`, {code: 'FILE_NOT_FOUND'})
    const overview = await buildOverview(new NetworkView(database, () => snapshot, syncViewOptions(this.mbConfig.root, this.mbConfig.sync)), snapshot, subtree)
    this.print(renderTable(overview.mirrors, OVERVIEW_COLUMNS))
    return overview
  }
}

/** How long the probe columns stay on a narrow terminal (src/lib/output.ts): the state long, the details not. */
const PROBE_PRIORITY: Record<string, number> = {probe: 3, last_probe: 0.35, probe_reason: 0.45}

const percent = (share: number | null) => (share === null ? null : `${(Math.round(share * 1000) / 10).toFixed(1)}%`)

/** Columns of `--removed`. */
const REMOVED_COLUMNS: Array<Column<RemovedMirror>> = [
  {header: 'name', get: (r) => r.identifier},
  {header: 'id', get: (r) => r.mirror_id, priority: 0.5},
  {header: 'removed_at', get: (r) => isoSeconds(r.removed_at)},
  {header: 'removed_by', get: (r) => r.removed_by, priority: 2},
  {header: 'base_url', get: (r) => r.https_url ?? r.http_url, priority: 1},
  {header: 'rsync_url', get: (r) => r.rsync_url, priority: 0.4},
  {header: 'ftp_url', get: (r) => r.ftp_url, priority: 0.3},
]

/** Columns of the overview (`--path`). */
const OVERVIEW_COLUMNS: Array<Column<OverviewRow>> = [
  {header: 'name', get: (r) => r.name},
  {header: 'country', get: (r) => r.country},
  {header: 'continent', get: (r) => r.continent, priority: 0.5},
  {header: 'protocols', get: (r) => r.protocols, priority: 0.6},
  {header: 'http', get: (r) => r.http, priority: 3},
  {header: 'https', get: (r) => r.https, priority: 3},
  {header: 'last_scan', get: (r) => r.last_scan, priority: 0.8},
  {header: 'share', get: (r) => percent(r.share), priority: 2},
  {header: 'files', get: (r) => `${r.files}/${r.origin_files}`, priority: 0.4},
  {header: 'score', get: (r) => r.score, priority: 0.3},
]
