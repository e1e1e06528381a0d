import {Args, Errors, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {UsageError, errorMessage} from '../../lib/errors.js'
import {renderTable} from '../../lib/output.js'
import {nagiosUnknown, nagiosVerdict} from '../../lib/probe/nagios.js'
import {mirrorLags} from '../../lib/probe/trace.js'
import {readOriginTrace} from '../../lib/sync/trace.js'
import {hookFailureMessage, runChangeHook, stateChanges, startedFailing, wentDown} from '../../lib/probe/notify.js'
import {probeMirrors, type ProbeRound} from '../../lib/probe/run.js'
import {checkMirrorContents, type ContentRound} from '../../lib/probe/content-check.js'

export default class Probe extends BaseCommand<typeof Probe> {
  static override description = `Probe mirror health over HTTP and HTTPS, IPv4 and IPv6

Each mirror's base URLs are checked over every address family their host resolves to, by requesting a known file (the smallest file the scan found on that mirror, or probe.sentinel) with GET and Range: bytes=0-0. Results go to the probe history; a mirror goes down after probe.fail_threshold consecutive failures and comes back after probe.ok_threshold successes (a protocol/family probed for the first time takes its first answer). A mirror that was down longer than probe.rescan_after_seconds needs a fresh scan before it gets redirects again. Down mirrors get no redirects. With no names, every enabled mirror is probed. Redirects are followed within the mirror's own host; to other hosts by probe.redirects: same_origin (the default: the check ends as redirect_offsite and the mirror is out of selection), public (followed, not to private/loopback addresses; the note names the other host) or any. With probe.user_agents, each check is also made with those User-Agents and fails when one is refused. Exit 0 when the round ran, whatever it found; with --fail-on-down, exit 1 when a mirror went from up to down in this round, or was up and failed every check of it (so the first failed round alerts, not only the one that takes it out), naming each on stderr (even with --quiet), so that cron mails it or a systemd unit fails (contrib/systemd/mb-alert@.service).

probe.on_change names a program run once per state transition of the round, with MB_MIRROR, MB_SCOPE (mirror, or a protocol/family such as https/ipv6), MB_PROTOCOL, MB_FAMILY, MB_OLD_STATE (up, down, or unknown on a first probe), MB_NEW_STATE, MB_REASON and MB_AT in its environment; each run may take probe.on_change_timeout seconds (10). A hook that fails is reported on stderr and changes nothing else.

--content checks the bytes instead (docs/operations.md, "Content checks"): for each mirror, copies of files with SHA-1 pieces (\`mb index --hashes\`), those found corrupt before first (the piece that failed), then those not yet checked whole (newest first, then the most downloaded), then those checked whole longest ago: each copy whole, every piece from where its last check stopped, fetched with ranged GETs within --budget bytes (probe.content_budget_bytes, 1 GiB) and compared with the index. A copy whose piece differs is recorded as corrupt and leaves the file's mirror set until a scan sees another size or mtime there or a later check passes. An answer that proves nothing (a 5xx, a redirect loop, a short or long body) records the copy as unchecked, with the reason.

--format nagios prints one Nagios/Icinga plugin line and exits 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN, by the share of probed mirrors that are down (--warning / --critical, percent).`

  static override examples = [
    '<%= config.bin %> probe',
    '<%= config.bin %> probe ftp.example.de mirror.example.org',
    '<%= config.bin %> probe --all --jobs 16 --json',
    '<%= config.bin %> probe --all --enable',
    '<%= config.bin %> probe --all --quiet --fail-on-down',
    '<%= config.bin %> probe --format nagios --warning 10 --critical 30',
    '<%= config.bin %> probe self-signed.example.net --insecure',
    '<%= config.bin %> probe --content --all',
    '<%= config.bin %> probe --content ftp.example.de --budget 16777216 --json',
  ]

  static override strict = false
  static override args = {
    name: Args.string({description: 'mirror identifier(s); default: every enabled mirror'}),
  }

  static override flags = {
    all: Flags.boolean({description: 'probe every enabled mirror (the default when no names are given)'}),
    jobs: Flags.integer({char: 'j', description: 'mirrors probed in parallel (config probe.jobs, default 8)', min: 1, max: 256}),
    enable: Flags.boolean({description: 'also probe disabled mirrors and re-enable those that answer'}),
    format: Flags.string({description: 'output format', options: ['text', 'nagios'], default: 'text'}),
    warning: Flags.integer({description: 'nagios: WARNING when at least this percentage of mirrors is down (config probe.warning, default 10)', min: 0, max: 100}),
    critical: Flags.integer({description: 'nagios: CRITICAL when at least this percentage of mirrors is down (config probe.critical, default 30)', min: 0, max: 100}),
    insecure: Flags.boolean({description: 'accept self-signed or invalid HTTPS certificates (config probe.insecure_tls)'}),
    content: Flags.boolean({description: 'check the bytes of whole copies against the SHA-1 pieces of the index, instead of health'}),
    budget: Flags.integer({description: 'with --content: bytes fetched per mirror at most (config probe.content_budget_bytes, default 1 GiB)', min: 0}),
    'fail-on-down': Flags.boolean({
      description:
        'exit 1 when a mirror went from up to down in this round, or was up and failed every check of it (the first failed round), naming it on stderr even with --quiet (for cron, systemd OnFailure=)',
    }),
  }

  protected override configFlags(): Record<string, unknown> {
    return {
      'probe.jobs': this.flags.jobs,
      'probe.warning': this.flags.warning,
      'probe.critical': this.flags.critical,
      'probe.insecure_tls': this.flags.insecure ? true : undefined,
      'probe.content_budget_bytes': this.flags.budget,
    }
  }

  private get nagios(): boolean {
    return this.flags?.format === 'nagios' || /--format[= ]nagios/.test(this.argv.join(' '))
  }

  public async run(): Promise<ProbeRound | ContentRound | undefined> {
    if (this.flags.content) return this.content()
    if (this.flags.budget !== undefined) throw new UsageError('--budget goes with --content (the bytes a content check fetches per mirror).')
    if (this.nagios) {
      let code = 3
      try {
        if (this.jsonEnabled()) throw new UsageError('--format nagios and --json exclude each other.')
        const round = await this.probe()
        const config = this.mbConfig.probe
        const sync = this.mbConfig.sync
        const upIds = round.mirrors.filter((m) => !m.skipped && m.up).map((m) => m.id)
        const lags = sync.trace_path
          ? {
              lags: await mirrorLags((await this.openDb()).db, upIds, await readOriginTrace(this.mbConfig.root, sync.trace_path)),
              warning: sync.lag_warning_seconds,
              critical: sync.lag_critical_seconds,
            }
          : undefined
        const verdict = nagiosVerdict({up: round.up, down: round.down, downNames: round.mirrors.filter((m) => !m.skipped && !m.up).map((m) => m.identifier)}, config.warning, config.critical, lags)
        this.log(verdict.line)
        code = verdict.code
      } catch (error) {
        this.log(nagiosUnknown(errorMessage(error)).line)
      }
      if (code !== 0) this.exit(code)
      return undefined
    }
    const round = await this.probe()
    this.print(this.renderRound(round))
    if (this.flags['fail-on-down']) {
      const down = wentDown(round)
      const failing = startedFailing(round)
      // Written whatever --quiet says: telling cron is what the flag is for.
      for (const change of down) process.stderr.write(`mb probe: mirror ${change.mirror} went down (${change.reason})\n`)
      for (const m of failing) process.stderr.write(`mb probe: mirror ${m.mirror} failed this round (${m.reason}); it goes down after probe.fail_threshold failed rounds in a row\n`)
      if (down.length > 0 || failing.length > 0) process.exitCode = 1
    }
    return round
  }

  private async probe(): Promise<ProbeRound> {
    const {argv} = await this.parse({flags: Probe.flags, baseFlags: BaseCommand.baseFlags, enableJsonFlag: true, args: Probe.args, strict: false})
    const names = argv as string[]
    if (this.flags.all && names.length > 0) throw new UsageError('Give mirror names or --all, not both.')
    if (this.flags['fail-on-down'] && this.nagios) throw new UsageError('--fail-on-down and --format nagios exclude each other: the Nagios verdict is the exit code.')
    const config = this.mbConfig.probe
    const database = await this.openDb()
    const round = await probeMirrors(database.db, config, {
      names,
      enable: this.flags.enable,
      jobs: config.jobs,
      tracePath: this.mbConfig.sync.trace_path,
      trustMarginSeconds: this.mbConfig.select.trust_trace ? this.mbConfig.sync.margin_seconds : undefined,
    })
    if (config.on_change) {
      const script = config.on_change
      // A failed hook is an error to report (even with --quiet), not a failed round.
      await runChangeHook(script, stateChanges(round), {
        timeoutSeconds: config.on_change_timeout,
        onFailure: (change, problem) => process.stderr.write(`mb probe: ${hookFailureMessage(script, change, problem)}\n`),
      })
    }
    return round
  }

  private async content(): Promise<ContentRound> {
    const {argv} = await this.parse({flags: Probe.flags, baseFlags: BaseCommand.baseFlags, enableJsonFlag: true, args: Probe.args, strict: false})
    const names = argv as string[]
    if (this.flags.all && names.length > 0) throw new UsageError('Give mirror names or --all, not both.')
    const health = ['enable', 'fail-on-down'].filter((f) => this.flags[f as 'enable' | 'fail-on-down'])
    if (this.nagios) health.push('format nagios')
    if (health.length > 0) throw new UsageError(`--content checks bytes, not health: leave out --${health.join(', --')}.`)
    const database = await this.openDb()
    const round = await checkMirrorContents(database, this.mbConfig.probe, {names})
    this.print(this.renderContentRound(round))
    return round
  }

  private renderContentRound(round: ContentRound): string {
    if (round.mirrors.length === 0) return 'No mirrors to check. Add one with `mb mirror add`.'
    type Row = {mirror: string; path: string | null; piece: string | null; verdict: string; detail: string}
    const rows = round.mirrors.flatMap((m): Row[] => {
      if (m.checks.length === 0) return [{mirror: m.identifier, path: null, piece: null, verdict: 'skipped', detail: m.skipped ?? 'nothing checked'}]
      const note = m.not_recorded ? `; ${m.not_recorded}` : ''
      return m.checks.map((c) => ({
        mirror: m.identifier,
        path: c.path,
        piece: c.pieces > 1 ? `${c.piece}-${c.piece + c.pieces - 1}` : String(c.piece),
        verdict: c.verdict === 'ok' && c.was_bad ? 'ok (was corrupt)' : c.verdict,
        detail: c.detail + note,
      }))
    })
    const table = renderTable(rows, [
      {header: 'mirror', get: (r) => r.mirror},
      {header: 'path', get: (r) => r.path},
      {header: 'pieces', get: (r) => r.piece},
      {header: 'verdict', get: (r) => r.verdict},
      {header: 'detail', get: (r) => r.detail},
    ])
    const unchecked = round.unchecked > 0 ? `, ${round.unchecked} unchecked` : ''
    return `${table}\n${round.checked} copies checked, ${round.corrupt} corrupt (${round.marked_bad} newly taken out of selection), ${round.cleared} repaired${unchecked}`
  }

  private renderRound(round: ProbeRound): string {
    type Row = {mirror: string; state: string; check: string; status: number | null; ms: number | null; reason: string | null; note: string}
    const rows = round.mirrors.flatMap((m): Row[] => {
      const state = m.skipped ? 'skipped' : m.was_up === m.up ? (m.up ? 'up' : 'down') : m.up ? 'down->up' : 'up->down'
      const extra = [m.needs_rescan ? 'needs rescan' : '', m.reenabled ? 're-enabled' : '', m.skipped ?? ''].filter(Boolean).join(', ')
      if (m.checks.length === 0) return [{mirror: m.identifier, state, check: '-', status: null, ms: null, reason: m.reason, note: extra}]
      // The detail says what a reason code cannot: the other host of a redirect, the User-Agent refused.
      const noted = (detail: string | undefined) => [detail && /^(redirect(s|ed) to another host|with User-Agent)/.test(detail) ? detail : '', extra].filter(Boolean).join('; ')
      return m.checks.map((c) => ({mirror: m.identifier, state, check: c.key, status: c.http_status, ms: c.latency_ms, reason: c.reason, note: noted(c.detail)}))
    })
    const table = renderTable(rows, [
      {header: 'mirror', get: (r) => r.mirror},
      {header: 'state', get: (r) => r.state},
      {header: 'check', get: (r) => r.check},
      {header: 'http', get: (r) => r.status},
      {header: 'ms', get: (r) => r.ms},
      {header: 'reason', get: (r) => r.reason},
      {header: 'note', get: (r) => r.note || null},
    ])
    const summary = `${round.up}/${round.probed} mirrors up${round.skipped > 0 ? `, ${round.skipped} skipped` : ''}`
    return round.mirrors.length === 0 ? 'No mirrors to probe. Add one with `mb mirror add`.' : `${table}\n${summary}`
  }

  /** In nagios mode every failure, even a bad flag, is UNKNOWN (exit 3); exits pass through. */
  protected override async catch(error: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<unknown> {
    if (error instanceof Errors.ExitError) throw error
    if (this.nagios) {
      this.log(nagiosUnknown(errorMessage(error)).line)
      throw new Errors.ExitError(3)
    }
    return super.catch(error)
  }
}
