import {Args, Flags} from '@oclif/core'
import cliProgress from 'cli-progress'
import pLimit from 'p-limit'
import {BaseCommand} from '../base-command.js'
import type {Database} from '../lib/db/index.js'
import type {MirrorRow} from '../lib/db/schema.js'
import {UsageError} from '../lib/errors.js'
import {resolveMirror} from '../lib/mirrors/registry.js'
import {renderTable} from '../lib/output.js'
import {type PushMirrorResult, type PushPass, pushMirror} from '../lib/push/push.js'
import {pushMirrorRows, pushOptions} from '../lib/push/settings.js'

export default class Push extends BaseCommand<typeof Push> {
  static override description = `Push the origin tree to mirrors that do not pull (their --push-url), in three passes by size

Pass 1 sends the files up to push.small_max bytes (default 1 MiB), pass 2 those up to push.large_max (default 100 MiB), pass 3 the rest. After each pass the mirror is listed and the listing reconciled as \`mb scan\` does, so redirects to the files of a pass start when that pass ends. A mirror receives the indexed files under its --base-path that pass its --include, --exclude and --push-include globs.

A pass that fails (upload refused, timeout, full disk, interrupted) ends the push to that mirror and records why (see \`mb mirror show\`); the mirror keeps serving the files it confirmed, and only those. Exit 1 when any push failed. One push per mirror runs at a time, across processes.

rsync credentials: the user goes in the URL; the password comes from RSYNC_PASSWORD or the file named by push.rsync_password_file, and is never printed. Over ssh (user@host:path), ssh runs with BatchMode (keys only).`

  static override examples = [
    '<%= config.bin %> push mirror.example.org',
    '<%= config.bin %> push --all --jobs 4',
    '<%= config.bin %> push --all --json',
    {description: 'Wait 60 s after each pass (SIGUSR1 ends a wait early)', command: '<%= config.bin %> push mirror.example.org --pause-between 60'},
  ]

  static override strict = false
  static override args = {
    name: Args.string({description: 'mirror name(s) (exact, or an unambiguous prefix)'}),
  }

  static override flags = {
    root: Flags.string({description: 'origin tree to push (env: MB_ROOT)'}),
    all: Flags.boolean({description: 'push to every enabled mirror that has a push URL'}),
    jobs: Flags.integer({char: 'j', description: 'mirrors pushed to in parallel (config push.jobs, default 2)', min: 1, max: 64}),
    'pause-between': Flags.integer({description: 'wait SECONDS after each pass before the next (redirects to the finished passes already run); SIGUSR1 ends the wait', min: 0}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {root: this.flags.root, 'push.jobs': this.flags.jobs}
  }

  public async run(): Promise<{ok: boolean; mirrors: PushMirrorResult[]}> {
    const {argv} = await this.parse({flags: Push.flags, baseFlags: BaseCommand.baseFlags, enableJsonFlag: true, args: Push.args, strict: false})
    const wanted = argv as string[]
    if (this.flags.all && wanted.length > 0) throw new UsageError('Give mirror names or --all, not both.')
    if (!this.flags.all && wanted.length === 0) throw new UsageError('Name the mirror(s) to push to, or pass --all. See `mb mirror list` (column push_result).')
    const options = pushOptions(this.mbConfig)
    const database = await this.openDb()
    const mirrors = await this.chosenMirrors(database, wanted)
    const results = await this.pushAll(database, mirrors, options)
    if (process.stdout.isTTY && !this.jsonEnabled()) this.log(summaryTable(results))
    const ok = results.every((r) => r.ok)
    if (!ok) {
      const failed = results.filter((r) => !r.ok).map((r) => r.mirror)
      if (!this.jsonEnabled()) process.stderr.write(`${failed.length} of ${results.length} push(es) failed: ${failed.join(', ')}\n`)
      process.exitCode = 1
    }
    return {ok, mirrors: results}
  }

  /** The push mirrors for --all, else the named ones in the order given, each once. @throws UsageError for a named mirror without a push URL */
  private async chosenMirrors(database: Database, wanted: string[]): Promise<MirrorRow[]> {
    if (this.flags.all) {
      const mirrors = await pushMirrorRows(database)
      if (mirrors.length === 0) throw new UsageError('No enabled mirror has a push URL. Give one with `mb mirror edit NAME --push-url rsync://host/module/`.')
      return mirrors
    }
    const mirrors: MirrorRow[] = []
    for (const name of wanted) {
      const mirror = await resolveMirror(database.db, name)
      if (!mirror.push_url) throw new UsageError(`Mirror ${mirror.identifier} has no push URL. Give it one with \`mb mirror edit ${mirror.identifier} --push-url rsync://host/module/\`.`)
      if (!mirrors.some((m) => m.id === mirror.id)) mirrors.push(mirror)
    }
    return mirrors
  }

  /** Pushes to the mirrors, push.jobs at a time, with a bar each on a terminal; SIGINT aborts them all. */
  private async pushAll(database: Database, mirrors: MirrorRow[], options: ReturnType<typeof pushOptions>): Promise<PushMirrorResult[]> {
    const tty = Boolean(process.stderr.isTTY) && !this.jsonEnabled() && !this.quiet
    const multibar = tty
      ? new cliProgress.MultiBar({format: '{mirror} pass {value}/{total} {status}', hideCursor: true, clearOnComplete: true, stream: process.stderr, fps: 5}, cliProgress.Presets.shades_classic)
      : undefined
    const bars = new Map<string, cliProgress.SingleBar>()
    const controller = new AbortController()
    const onSigint = () => controller.abort(new Error('interrupted (SIGINT)'))
    process.once('SIGINT', onSigint)
    const limit = pLimit(this.mbConfig.push.jobs)
    const report = (line: string) => {
      if (this.jsonEnabled()) return
      if (multibar) multibar.log(`${line}\n`)
      else this.log(line)
    }
    try {
      return await Promise.all(
        mirrors.map((mirror) =>
          limit(async () => {
            bars.set(mirror.identifier, multibar?.create(3, 0, {mirror: mirror.identifier, status: 'sending'}) as cliProgress.SingleBar)
            const result = await pushMirror(database, mirror, {
              ...options,
              signal: controller.signal,
              onPass: (name, pass) => {
                bars.get(name)?.update(pass.pass, {status: pass.ok ? 'listed' : 'failed'})
                report(passLine(name, pass))
              },
              between: (name, pass) => this.pause(name, pass, report),
            })
            const bar = bars.get(mirror.identifier)
            if (bar) multibar!.remove(bar)
            if (result.ok || multibar || this.jsonEnabled()) report(resultLine(result))
            else process.stderr.write(`${resultLine(result)}\n`)
            return result
          }),
        ),
      )
    } finally {
      multibar?.stop()
      process.removeListener('SIGINT', onSigint)
    }
  }

  /** `--pause-between`: waits that long after a pass, or until SIGUSR1. */
  private async pause(mirror: string, pass: PushPass, report: (line: string) => void): Promise<void> {
    const seconds = this.flags['pause-between']
    if (!seconds) return
    report(`${mirror}: pausing ${seconds} s before pass ${pass.pass + 1} (SIGUSR1 continues)`)
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer)
        process.removeListener('SIGUSR1', done)
        resolve()
      }
      const timer = setTimeout(done, seconds * 1000)
      process.on('SIGUSR1', done)
    })
  }
}

/** `NAME: pass 1 ok, 10000 files (1234567 bytes), 10000 matched, 0 stale, 60 missing, 3.2 s`. */
function passLine(mirror: string, p: PushPass): string {
  const band = p.max === null ? `> ${p.min - 1} bytes` : `${p.min}-${p.max} bytes`
  const counts = p.matched === null ? 'not listed' : `${p.matched} matched, ${p.stale} stale, ${p.missing} missing`
  return `${mirror}: pass ${p.pass} (${band}) ${p.ok ? 'ok' : 'FAILED'}, ${p.files} files (${p.bytes} bytes) sent, ${counts}, ${p.seconds} s${p.error ? `: ${p.error}` : ''}`
}

function resultLine(r: PushMirrorResult): string {
  return r.ok ? `${r.mirror}: push ok, ${r.files} files, ${r.matched ?? 0} matched, ${r.seconds} s` : `${r.mirror}: push FAILED after ${r.seconds} s: ${r.error}`
}

/** One row per mirror pushed to, for a terminal. */
function summaryTable(results: PushMirrorResult[]): string {
  return renderTable(
    results,
    [
      {header: 'mirror', get: (r) => r.mirror},
      {header: 'result', get: (r) => (r.ok ? 'ok' : 'FAILED')},
      {header: 'passes', get: (r) => r.passes.length},
      {header: 'files', get: (r) => r.files},
      {header: 'matched', get: (r) => r.matched},
      {header: 'seconds', get: (r) => r.seconds},
    ],
    true,
  )
}
