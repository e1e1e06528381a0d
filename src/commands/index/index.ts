import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {UsageError} from '../../lib/errors.js'
import {type IndexResult, indexOrigin} from '../../lib/origin/index.js'
import {renderRecord} from '../../lib/output.js'

export default class Index extends BaseCommand<typeof Index> {
  static override description = `Index the origin tree: record every file's path, size and mtime

Walks the master tree (--root, MB_ROOT or config \`root\`) and brings the origin index in step:
new files are added, changed files get their new size/mtime and lose their mirror set until the
next scans confirm the new version, and files that are gone are dropped. Symlinks inside the
root are followed (recorded under the link's path); symlinks pointing outside it are skipped
with a warning. Re-runs write only what changed.`

  static override examples = [
    '<%= config.bin %> index --root /srv/pub',
    'MB_ROOT=/srv/pub <%= config.bin %> index --json',
    '<%= config.bin %> index --root /srv/pub --dir releases/15.6',
  ]

  static override flags = {
    root: Flags.string({description: 'origin directory (env: MB_ROOT; config: root)'}),
    dir: Flags.string({description: 'index only this subtree (relative to the root); the rest is left alone'}),
    quiet: Flags.boolean({char: 'q', description: 'do not print warnings about skipped entries'}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {root: this.flags.root}
  }

  public async run(): Promise<IndexResult> {
    const root = this.mbConfig.root
    if (!root) throw new UsageError('No origin root given. Pass --root DIR, set MB_ROOT, or set `root` in the config file.', 'ROOT_MISSING')
    if (this.flags.dir !== undefined && /(^|\/)\.\.(\/|$)/.test(this.flags.dir)) throw new UsageError(`--dir ${this.flags.dir} must be a path inside the root without '..'.`)
    const database = await this.openDb()
    const result = await indexOrigin(database.db, root, {
      subdir: this.flags.dir,
      onWarning: (message) => {
        if (!this.flags.quiet && !this.jsonEnabled()) process.stderr.write(`warning: ${message}\n`)
      },
    })
    this.print(
      renderRecord([
        ['root', result.root + (result.subdir ? ` (subtree ${result.subdir})` : '')],
        ['files', result.files],
        ['added', result.added],
        ['changed', result.changed],
        ['removed', result.removed],
        ['unchanged', result.unchanged],
        ['warnings', result.warnings.length],
        ['seconds', result.seconds],
      ]),
    )
    return result
  }
}
