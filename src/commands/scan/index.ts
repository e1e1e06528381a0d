import {Args, Flags} from '@oclif/core'
import cliProgress from 'cli-progress'
import pLimit from 'p-limit'
import {BaseCommand} from '../../base-command.js'
import type {Database} from '../../lib/db/index.js'
import type {MirrorRow} from '../../lib/db/schema.js'
import {UsageError} from '../../lib/errors.js'
import {listMirrors, resolveMirror} from '../../lib/mirrors/registry.js'
import {renderTable} from '../../lib/output.js'
import {PROTOCOL_ORDER, type Protocol} from '../../lib/scan/listers.js'
import {type ScanMirrorResult, scanMirror, scanSettings, scanUrls} from '../../lib/scan/scan.js'

/** A mirror that `--all --protocol P` left out, and why. */
interface SkippedMirror {
  mirror: string
  reason: string
}

export default class Scan extends BaseCommand<typeof Scan> {
  static override description = `Scan mirrors: list what each holds and record it in the origin index

Each mirror is listed over rsync, then FTP, then HTTP, by the URLs it has, falling back to the next protocol when one fails. Files whose size (and mtime, within the listing's precision) match the origin count as held; other copies are recorded as stale. A scan that fails, runs out of time, or matches fewer than scan.min_ratio (default 0.5) of the files it matched before changes nothing but the mirror's last scan error. Exit 1 when any mirror failed.

With --dir, a folder the mirror does not have (404/410, FTP 550 or rsync "No such file or directory" while its base URL answers) is an empty folder, not a failure: the mirror's copies there leave their mirror sets, and the line says "0 files (folder not on the mirror)". A base URL that does not answer either stays a failure.

With --all and --protocol P, mirrors without a P URL are skipped and listed as such (exit 0 when every scanned mirror succeeded); a mirror named on the command line must have one.

rsync credentials: the user goes in the URL (rsync://user@host/module/); the password comes from RSYNC_PASSWORD or the file named by scan.rsync_password_file, and is never printed.`

  static override examples = [
    '<%= config.bin %> scan ftp.example.de',
    '<%= config.bin %> scan --all --jobs 4',
    '<%= config.bin %> scan mirror.example.org --dir releases/15.6',
    '<%= config.bin %> scan --all --dir releases/15.6/iso --no-recursive',
    '<%= config.bin %> scan new.example.net --enable --timeout 600',
    '<%= config.bin %> scan --all --protocol rsync --json',
  ]

  static override strict = false
  static override args = {
    name: Args.string({description: 'mirror name(s) (exact, or an unambiguous prefix)'}),
  }

  static override flags = {
    all: Flags.boolean({description: 'scan every enabled mirror'}),
    jobs: Flags.integer({char: 'j', description: 'mirrors scanned in parallel (config scan.jobs, default 2)', min: 1, max: 64}),
    dir: Flags.string({description: 'rescan only this origin subtree; records outside it are kept'}),
    recursive: Flags.boolean({
      description: "with --no-recursive, scan only the files directly in --dir (one folder, as the demand scans of `mb serve` do); the mirror's last-scan record is left alone",
      default: true,
      allowNo: true,
    }),
    enable: Flags.boolean({description: 'enable each mirror whose scan succeeded and matched files'}),
    timeout: Flags.integer({description: 'per-mirror time budget in seconds (config scan.timeout, default 3600)', min: 1}),
    protocol: Flags.string({description: 'use only this protocol (no fallback)', options: PROTOCOL_ORDER}),
    'min-ratio': Flags.string({description: 'refuse a scan matching fewer than this share of before (config scan.min_ratio, 0..1)'}),
  }

  protected override configFlags(): Record<string, unknown> {
    const ratio = this.flags['min-ratio']
    return {
      'scan.jobs': this.flags.jobs,
      'scan.timeout': this.flags.timeout,
      'scan.min_ratio': ratio === undefined ? undefined : Number(ratio),
    }
  }

  public async run(): Promise<{ok: boolean; mirrors: ScanMirrorResult[]; skipped: SkippedMirror[]}> {
    const {argv} = await this.parse({flags: Scan.flags, baseFlags: BaseCommand.baseFlags, enableJsonFlag: true, args: Scan.args, strict: false})
    const wanted = argv as string[]
    if (this.flags.all && wanted.length > 0) throw new UsageError('Give mirror names or --all, not both.')
    if (!this.flags.all && wanted.length === 0) throw new UsageError('Name the mirror(s) to scan, or pass --all. See `mb mirror list`.')
    if (!this.flags.recursive && this.flags.enable) throw new UsageError('--enable needs a whole scan: drop --no-recursive, or enable the mirror with `mb mirror edit NAME --enabled`.')
    const database = await this.openDb()
    const {mirrors, skipped} = this.withProtocol(await this.chosenMirrors(database, wanted))
    for (const s of skipped) this.print(`${s.mirror}: skipped, ${s.reason}`)
    const results = await this.scanMirrors(database, mirrors)
    if (process.stdout.isTTY && !this.jsonEnabled()) this.log(summaryTable(results))
    const ok = results.every((r) => r.ok)
    if (!ok) {
      const failedNames = results.filter((r) => !r.ok).map((r) => r.mirror)
      if (!this.jsonEnabled()) process.stderr.write(`${failedNames.length} of ${results.length} mirror scan(s) failed: ${failedNames.join(', ')}\n`)
      process.exitCode = 1
    }
    return {ok, mirrors: results, skipped}
  }

  /**
   * With `--all --protocol P`, splits off the mirrors that have no P URL (they are skipped, not
   * failed). Named mirrors are all kept: scanMirror refuses one without a P URL (exit 2).
   * @throws UsageError when `--all` leaves no mirror with a P URL
   */
  private withProtocol(mirrors: MirrorRow[]): {mirrors: MirrorRow[]; skipped: SkippedMirror[]} {
    const protocol = this.flags.protocol
    if (!this.flags.all || !protocol) return {mirrors, skipped: []}
    const kept = mirrors.filter((m) => scanUrls(m).some((u) => u.protocol === protocol))
    const skipped = mirrors.filter((m) => !kept.includes(m)).map((m) => ({mirror: m.identifier, reason: `no ${protocol} URL`}))
    if (kept.length === 0)
      throw new UsageError(`None of the ${mirrors.length} enabled mirror(s) has a ${protocol} URL to scan. Drop --protocol, or add URLs with \`mb mirror edit NAME --${protocol}-url URL\`.`)
    return {mirrors: kept, skipped}
  }

  /** The enabled mirrors for --all, else the named ones in the order given, each once. */
  private async chosenMirrors(database: Database, wanted: string[]): Promise<MirrorRow[]> {
    if (this.flags.all) {
      const mirrors = await listMirrors(database.db, {enabled: true})
      if (mirrors.length === 0) throw new UsageError('No enabled mirrors to scan. Add one with `mb mirror add`, or name a disabled mirror explicitly.')
      return mirrors
    }
    const mirrors: MirrorRow[] = []
    const seen = new Set<number>()
    for (const name of wanted) {
      const mirror = await resolveMirror(database.db, name)
      if (!seen.has(mirror.id)) mirrors.push(mirror)
      seen.add(mirror.id)
    }
    return mirrors
  }

  /** Scans the mirrors, scan.jobs at a time, with a progress bar each on a terminal; SIGINT aborts them all. */
  private async scanMirrors(database: Database, mirrors: MirrorRow[]): Promise<ScanMirrorResult[]> {
    const tty = Boolean(process.stderr.isTTY) && !this.jsonEnabled() && !this.quiet
    const multibar = tty
      ? new cliProgress.MultiBar(
          {format: '{mirror} [{protocol}] {value} entries, {rate}/s, {elapsed}s', hideCursor: true, clearOnComplete: true, stream: process.stderr, fps: 5},
          cliProgress.Presets.shades_classic,
        )
      : undefined
    const controller = new AbortController()
    const onSigint = () => controller.abort(new Error('interrupted (SIGINT)'))
    process.once('SIGINT', onSigint)
    const limit = pLimit(this.mbConfig.scan.jobs)
    try {
      return await Promise.all(mirrors.map((mirror) => limit(() => this.scanOne(database, mirror, controller.signal, multibar))))
    } finally {
      multibar?.stop()
      process.removeListener('SIGINT', onSigint)
    }
  }

  /** Scans one mirror and reports its outcome line (beside the bars on a terminal, else stdout or stderr). */
  private async scanOne(database: Database, mirror: MirrorRow, signal: AbortSignal, multibar: cliProgress.MultiBar | undefined): Promise<ScanMirrorResult> {
    const started = performance.now()
    const bar = multibar?.create(0, 0, {mirror: mirror.identifier, protocol: '-', rate: 0, elapsed: 0})
    const result = await scanMirror(database, mirror, {
      protocol: this.flags.protocol as Protocol | undefined,
      subdir: this.flags.dir,
      recursive: this.flags.recursive,
      ...scanSettings(this.mbConfig.scan),
      enable: this.flags.enable,
      signal,
      onProgress: (protocol, entries) => {
        const elapsed = (performance.now() - started) / 1000
        bar?.update(entries, {protocol, rate: Math.round(entries / Math.max(elapsed, 0.001)), elapsed: Math.round(elapsed)})
      },
    })
    if (bar) multibar!.remove(bar)
    const line = result.ok
      ? `${result.mirror}: ok via ${result.protocol}, ${result.files} files${result.absent ? ' (folder not on the mirror)' : ''}, ${result.matched} matched, ${result.stale} stale, ${result.missing} missing, ${result.seconds} s${result.enabledByScan ? ', enabled' : ''}`
      : `${result.mirror}: FAILED after ${result.seconds} s: ${result.error}`
    if (!this.jsonEnabled()) {
      if (multibar) multibar.log(line + '\n')
      else if (result.ok) this.log(line)
      else process.stderr.write(line + '\n')
    }
    return result
  }
}

/** One row per mirror scanned, for a terminal. */
function summaryTable(results: ScanMirrorResult[]): string {
  return renderTable(
    results,
    [
      {header: 'mirror', get: (r) => r.mirror},
      {header: 'result', get: (r) => (r.ok ? 'ok' : 'FAILED')},
      {header: 'protocol', get: (r) => r.protocol},
      {header: 'files', get: (r) => r.files},
      {header: 'matched', get: (r) => r.matched},
      {header: 'stale', get: (r) => r.stale},
      {header: 'missing', get: (r) => r.missing},
      {header: 'seconds', get: (r) => r.seconds},
    ],
    true,
  )
}
