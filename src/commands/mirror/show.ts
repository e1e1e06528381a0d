import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {badCopyCount, resolveMirror} from '../../lib/mirrors/registry.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {mirrorRecord} from '../../lib/mirrors/render.js'
import {renderRecord} from '../../lib/output.js'
import {readOriginTrace} from '../../lib/sync/trace.js'
import {type MirrorChecks, mirrorChecks} from '../../lib/probe/content-store.js'
import {probeStateText, probeSummaries, probeSummaryJson, recentTransitions, renderTransitions, transitionJson, type ProbeSummaryJson} from '../../lib/probe/history.js'

export default class MirrorShow extends BaseCommand<typeof MirrorShow> {
  static override description = 'Show every field of one mirror, including its up/down status and last scan result (passwords redacted)'
  static override examples = ['<%= config.bin %> mirror show ftp.example.de', '<%= config.bin %> mirror show ftp.ex --json']

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  public async run(): Promise<
    PublicMirror & {bad_copies: number; suspect_bad_copies: number; content_checks: MirrorChecks; probe: ProbeSummaryJson & {transitions: Array<ReturnType<typeof transitionJson>>}}
  > {
    const database = await this.openDb()
    const mirror = publicMirror(await resolveMirror(database.db, this.args.name), await readOriginTrace(this.mbConfig.root, this.mbConfig.sync.trace_path))
    const summary = probeSummaryJson((await probeSummaries(database.db, [mirror.id])).get(mirror.id), this.mbConfig.select.unprobed)
    const transitions = await recentTransitions(database.db, mirror.id, 10)
    const badCopies = await badCopyCount(database.db, mirror.id)
    const checks = await mirrorChecks(database.db, mirror.id)
    const threshold = this.mbConfig.probe.suspect_bad_copies
    const limit = threshold > 0 ? ` (the mirror is suspect from ${threshold}: probe.suspect_bad_copies)` : ' (probe.suspect_bad_copies is 0: never suspect for them)'
    const bad = `${badCopies === 0 ? '0' : `${badCopies}: content checks found these copies corrupt; they get no clients (\`mb file lookup\` names them per file)`}${limit}`
    this.print(
      `${renderRecord([...mirrorRecord(mirror), ['bad_copies', bad], ['content_checks', checksText(checks)], ['probe', probeStateText(summary)], ['last_probe', summary.last_probe_at], ['probe_reason', summary.reason]])}\n${renderTransitions(transitions)}`,
    )
    return {...mirror, bad_copies: badCopies, suspect_bad_copies: threshold, content_checks: checks, probe: {...summary, transitions: transitions.map(transitionJson)}}
  }
}

/** One line on what content checks read of the mirror's copies. */
function checksText(c: MirrorChecks): string {
  const last = c.last_checked_at === null ? 'never checked' : `last check ${c.last_checked_at}`
  const unchecked = c.unchecked > 0 ? `; ${c.unchecked} unchecked at their last check (${c.last_unchecked_reason})` : ''
  return `${c.checked_whole} of ${c.held} hashed copies checked whole (\`mb file lookup\` shows each); ${last}${unchecked}`
}
