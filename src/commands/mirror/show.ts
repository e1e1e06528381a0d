import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {badCopyCount, resolveMirror} from '../../lib/mirrors/registry.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {mirrorRecord} from '../../lib/mirrors/render.js'
import {renderRecord, renderTable} from '../../lib/output.js'
import {FILE_KINDS, type FileKind, type FolderCount, type MirrorFile, folderHoldsFiles, mirrorFileFolders, mirrorFilesIn} from '../../lib/lookup/mirror-files.js'
import {MbError, UsageError} from '../../lib/errors.js'
import {humanBytes} from '../../lib/stats/render.js'
import {folderProblem, trimSlashes} from '../../lib/text.js'
import {shortIso} from '../../lib/time.js'
import {readOriginTrace} from '../../lib/sync/trace.js'
import {type MirrorChecks, mirrorChecks} from '../../lib/probe/content-store.js'
import {probeStateText, probeSummaries, probeSummaryJson, recentTransitions, renderTransitions, transitionJson, type ProbeSummaryJson} from '../../lib/probe/history.js'

/** `mb mirror show NAME --json`. */
type ShownMirror = PublicMirror & {bad_copies: number; suspect_bad_copies: number; content_checks: MirrorChecks; probe: ProbeSummaryJson & {transitions: Array<ReturnType<typeof transitionJson>>}}

/** `mb mirror show NAME --files KIND --json`: the folders with counts, or one page of a folder's files. */
type MirrorFiles = {mirror: string; kind: FileKind; folders: FolderCount[]} | {mirror: string; kind: FileKind; folder: string; page: number; pages: number; total: number; files: MirrorFile[]}

export default class MirrorShow extends BaseCommand<typeof MirrorShow> {
  static override description = 'Show every field of one mirror, including its up/down status and last scan result (passwords redacted)'
  static override examples = [
    '<%= config.bin %> mirror show ftp.example.de',
    '<%= config.bin %> mirror show ftp.ex --json',
    {description: 'Which folders the mirror lacks files in, with counts', command: '<%= config.bin %> mirror show ftp.example.de --files missing'},
    {description: 'The stale copies in one folder, page 2', command: '<%= config.bin %> mirror show ftp.example.de --files stale --folder distribution/leap/16.0/iso --page 2'},
  ]

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  static override flags = {
    files: Flags.string({description: 'instead of the mirror: the files it lacks (missing), holds stale or holds corrupt (bad), per folder with counts', options: [...FILE_KINDS]}),
    folder: Flags.string({description: 'with --files: the files directly in this folder (origin-relative), paged', dependsOn: ['files']}),
    // No oclif default: a flag with one counts as given, and dependsOn would refuse every call.
    page: Flags.integer({description: 'with --folder: page N (1-based; default 1)', min: 1, max: 1_000_000, dependsOn: ['folder']}),
    'page-size': Flags.integer({description: 'with --folder: files per page (default 100)', min: 1, max: 10_000, dependsOn: ['folder']}),
  }

  public async run(): Promise<ShownMirror | MirrorFiles> {
    const database = await this.openDb()
    if (this.flags.files !== undefined) return this.files(database.db, this.flags.files as FileKind)
    const mirror = publicMirror(await resolveMirror(database.db, this.args.name), await readOriginTrace(this.mbConfig.root, this.mbConfig.sync.trace_path))
    const summary = probeSummaryJson((await probeSummaries(database.db, [mirror.id])).get(mirror.id), this.mbConfig.select.unprobed)
    const transitions = await recentTransitions(database.db, mirror.id, 10)
    const badCopies = await badCopyCount(database.db, mirror.id)
    const checks = await mirrorChecks(database.db, mirror.id)
    const threshold = this.mbConfig.probe.suspect_bad_copies
    const limit = threshold > 0 ? ` (the mirror is suspect from ${threshold}: probe.suspect_bad_copies)` : ' (probe.suspect_bad_copies is 0: never suspect for them)'
    const bad = `${badCopies === 0 ? '0' : `${badCopies}: content checks found these copies corrupt; they get no clients (\`mb file lookup\` names them per file)`}${limit}`
    this.print(
      `${renderRecord([...mirrorRecord(mirror), ['bad_copies', bad], ['content_checks', checksText(checks)], ['probe', probeStateText(summary)], ['last_probe', shortIso(summary.last_probe_at)], ['probe_reason', summary.reason]])}\n${renderTransitions(transitions)}`,
    )
    return {...mirror, bad_copies: badCopies, suspect_bad_copies: threshold, content_checks: checks, probe: {...summary, transitions: transitions.map(transitionJson)}}
  }

  /** `--files KIND`: per folder with counts, or (with `--folder`) one page of that folder's files. */
  private async files(db: Parameters<typeof resolveMirror>[0], kind: FileKind): Promise<MirrorFiles> {
    const row = await resolveMirror(db, this.args.name)
    const scan = {include: this.mbConfig.scan.include, exclude: this.mbConfig.scan.exclude}
    // A mirror never scanned lacks everything as far as mb knows: say why, or it reads as an empty mirror.
    const unscanned = kind === 'missing' && row.last_scan_at === null ? ` (never scanned: \`mb scan ${row.identifier}\` finds what it holds)` : ''
    if (this.flags.folder === undefined) {
      const folders = await mirrorFileFolders(db, row, kind, scan)
      const total = folders.reduce((n, f) => n + f.files, 0)
      // The hint shares the summary line, so that the lines after it are the table's alone.
      const hint = folders.length === 0 ? '' : `; \`--folder FOLDER\` lists one folder's files`
      const table = renderTable(folders, [
        {header: 'folder', get: (f) => f.folder || '/'},
        {header: 'files', get: (f) => String(f.files)},
        {header: 'size', get: (f) => humanBytes(f.bytes)},
      ])
      this.print(`${row.identifier}: ${total} ${kind} file(s) in ${folders.length} folder(s)${unscanned}${hint}${folders.length === 0 ? '' : `\n${table}`}`)
      return {mirror: row.identifier, kind, folders}
    }
    const problem = folderProblem(this.flags.folder)
    if (problem !== undefined) throw new UsageError(`--folder ${JSON.stringify(this.flags.folder)} ${problem}`)
    const folder = trimSlashes(this.flags.folder)
    if (folder !== '' && !(await folderHoldsFiles(db, folder)))
      throw new MbError(`--folder ${JSON.stringify(folder)} is not a folder of the tree: the index holds no file in it (\`mb mirror show ${row.identifier} --files ${kind}\` lists the folders)`, {
        code: 'FILE_NOT_FOUND',
      })
    const size = this.flags['page-size'] ?? 100
    const page = this.flags.page ?? 1
    const {total, files} = await mirrorFilesIn(db, row, kind, scan, folder, page, size)
    const pages = Math.max(1, Math.ceil(total / size))
    const summary = `${row.identifier}: ${total} ${kind} file(s) in ${folder || '/'}${unscanned}, page ${page} of ${pages}`
    // An empty page (none of that kind there, or a page past the last) prints no empty table.
    this.print(
      files.length === 0
        ? summary
        : `${summary}\n` +
            renderTable(files, [
              {header: 'path', get: (f) => f.path},
              {header: 'size', get: (f) => String(f.size)},
              {header: 'mtime (UTC)', get: (f) => f.mtime},
              ...(kind === 'stale' ? [{header: 'mirror has', get: (f: MirrorFile) => `${f.mirror_size} bytes, ${f.mirror_mtime ?? 'no mtime'}`}] : []),
              ...(kind === 'bad' ? [{header: 'bad piece', get: (f: MirrorFile) => `${f.piece} (found ${shortIso(f.found_at ?? null)})`}] : []),
            ]),
    )
    return {mirror: row.identifier, kind, folder, page, pages, total, files}
  }
}

/** One line on what content checks read of the mirror's copies. */
function checksText(c: MirrorChecks): string {
  const last = c.last_checked_at === null ? 'never checked' : `last check ${shortIso(c.last_checked_at)}`
  const unchecked = c.unchecked > 0 ? `; ${c.unchecked} unchecked at their last check (${c.last_unchecked_reason})` : ''
  return `${c.checked_whole} of ${c.held} hashed copies checked whole (\`mb file lookup\` shows each); ${last}${unchecked}`
}
