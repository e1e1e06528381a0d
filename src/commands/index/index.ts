import {Flags} from '@oclif/core'
import cliProgress from 'cli-progress'
import {BaseCommand} from '../../base-command.js'
import {UsageError} from '../../lib/errors.js'
import {requireRoot} from '../../lib/origin/root.js'
import {type IndexResult, indexOrigin} from '../../lib/origin/index.js'
import {type HashIndexResult, hashIndex} from '../../lib/origin/hash.js'
import {zsyncMinSize} from '../../lib/metalink/formats-config.js'
import {renderRecord} from '../../lib/output.js'

export default class Index extends BaseCommand<typeof Index> {
  static override description = `Index the origin tree: record every file's path, size and mtime

Walks the master tree (--root, MB_ROOT or config \`root\`) and brings the origin index in step: new files are added, changed files get their new size/mtime and lose their mirror set until the next scans confirm the new version, and files that are gone are dropped. Symlinks inside the root are followed (recorded under the link's path); symlinks pointing outside it are skipped with a warning. Re-runs write only what changed.

A walk that would keep fewer than index.min_ratio (default 0.5) of the files indexed before, as an unmounted tree or a wrong --root would, is refused (exit 1) and changes nothing; after a real mass deletion, --min-ratio 0 accepts it.

With --hashes, MD5, SHA-1, SHA-256 and piece hashes (for metalinks, hash files and Digest headers), SHA-1 pieces (for .torrent and magnet links) and, for files of at least \`zsync.min_size\` bytes, zsync block sums (for .zsync) are computed afterwards for every file whose size or mtime changed since it was last hashed or that lacks one of them, on --jobs threads (default: all cores), with a progress bar on a TTY.`

  static override examples = [
    '<%= config.bin %> index --root /srv/pub',
    'MB_ROOT=/srv/pub <%= config.bin %> index --json',
    '<%= config.bin %> index --root /srv/pub --dir releases/15.6',
    '<%= config.bin %> index --root /srv/pub --hashes --jobs 4',
    '<%= config.bin %> index --root /srv/pub --hashes --piece-hash sha1',
  ]

  static override flags = {
    root: Flags.string({description: 'origin directory (env: MB_ROOT; config: root)'}),
    dir: Flags.string({description: 'index only this subtree (relative to the root); the rest is left alone'}),
    hashes: Flags.boolean({description: 'also hash new and changed files (MD5, SHA-1, SHA-256, piece hashes, zsync sums)'}),
    jobs: Flags.integer({description: 'hashing threads (default: all cores)', min: 1, max: 256, dependsOn: ['hashes']}),
    'min-ratio': Flags.string({description: 'refuse a walk keeping fewer than this share of the files indexed before (config index.min_ratio, 0..1)'}),
    'piece-hash': Flags.string({description: 'piece hash algorithm for metalinks', options: ['sha256', 'sha1'], dependsOn: ['hashes']}), // default sha256 (an oclif default would trip dependsOn)
  }

  protected override configFlags(): Record<string, unknown> {
    const ratio = this.flags['min-ratio']
    return {root: this.flags.root, 'index.min_ratio': ratio === undefined ? undefined : Number(ratio)}
  }

  public async run(): Promise<IndexResult & {hashes?: HashIndexResult}> {
    const root = requireRoot(this.mbConfig.root)
    if (this.flags.dir !== undefined && /(^|\/)\.\.(\/|$)/.test(this.flags.dir)) throw new UsageError(`--dir ${this.flags.dir} must be a path inside the root without '..'.`)
    const database = await this.openDb({create: true})
    const result = await indexOrigin(database.db, root, {
      subdir: this.flags.dir,
      tracePath: this.mbConfig.sync.trace_path,
      minRatio: this.mbConfig.index.min_ratio,
      exclude: this.mbConfig.index.exclude,
      mirrorOnly: this.mbConfig.serve.mirror_only,
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
        ...(result.mirrorOnly > 0 ? [['mirror-only', `${result.mirrorOnly} (gone from the origin, kept while mirrors hold them: serve.mirror_only)`] as [string, unknown]] : []),
        ['unchanged', result.unchanged],
        ['links', result.links],
        ['warnings', result.warnings.length],
        ['seconds', result.seconds],
        ...(this.mbConfig.sync.trace_path
          ? [['trace', result.trace ? `${this.mbConfig.sync.trace_path} = ${result.trace}` : `${this.mbConfig.sync.trace_path} (written less than a minute ago)`] as [string, string]]
          : []),
      ]),
    )
    if (!this.flags.hashes) return result
    const hashes = await this.hash(database, root)
    this.print(
      renderRecord([
        ['hashed', hashes.hashed],
        ['hashed bytes', hashes.bytes],
        ['already current', hashes.current],
        ['hash failures', hashes.failed.length],
        ['hash seconds', Math.round(hashes.seconds * 1000) / 1000],
      ]),
    )
    for (const failure of hashes.failed) if (!this.quiet && !this.jsonEnabled()) process.stderr.write(`warning: cannot hash ${failure.path}: ${failure.error}\n`)
    return {...result, hashes}
  }

  /** Hashes changed files; a progress bar on a TTY only. */
  private async hash(database: Awaited<ReturnType<typeof this.openDb>>, root: string): Promise<HashIndexResult> {
    const tty = process.stderr.isTTY && !this.jsonEnabled() && !this.quiet
    const bar = tty ? new cliProgress.SingleBar({format: 'hashing {bar} {percentage}% | {value}/{total} files | {mib} MiB', stream: process.stderr}, cliProgress.Presets.shades_classic) : undefined
    let started = false
    try {
      return await hashIndex(database, root, {
        jobs: this.flags.jobs,
        subdir: this.flags.dir,
        pieceHash: (this.flags['piece-hash'] ?? 'sha256') as 'sha256' | 'sha1',
        zsyncMinSize: zsyncMinSize(this.mbConfig.zsync),
        onProgress: (p) => {
          if (!bar) return
          if (!started) {
            bar.start(p.totalFiles, 0, {mib: 0})
            started = true
          }
          bar.update(p.files, {mib: Math.round(p.bytes / 1048576)})
        },
      })
    } finally {
      if (started) bar?.stop()
    }
  }
}
