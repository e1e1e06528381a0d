import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {resolveMirror, setEnabled} from '../../lib/mirrors/registry.js'
import {describeProbe, probeOnce, probeOnceJson} from '../../lib/probe/once.js'
import {probeFlag} from './add.js'

export default class MirrorEnable extends BaseCommand<typeof MirrorEnable> {
  static override description = `Enable a mirror so that it takes part in selection again

The mirror is then probed once (its HTTP and HTTPS base URLs, as \`mb probe\` does) and the result is shown; --no-probe skips that. A failed probe leaves the mirror enabled but down: it gets no redirects until probes find it up.`

  static override examples = ['<%= config.bin %> mirror enable ftp.example.de', '<%= config.bin %> mirror enable ftp.example.de --json', '<%= config.bin %> mirror enable ftp.example.de --no-probe']

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  static override flags = {
    probe: probeFlag,
  }

  public async run(): Promise<PublicMirror & {probe: ReturnType<typeof probeOnceJson>}> {
    const database = await this.openDb()
    const {mirror: row, changed} = await setEnabled(database.db, this.args.name, true)
    const probe = this.flags.probe ? await probeOnce(database.db, this.mbConfig.probe, row.identifier) : null
    const mirror = publicMirror(probe?.probed ? await resolveMirror(database.db, row.identifier) : row)
    this.print(`${changed ? `Mirror ${mirror.identifier} enabled.` : `Mirror ${mirror.identifier} was already enabled.`}\n${describeProbe(mirror.identifier, probe, this.mbConfig.select.unprobed)}`)
    return {...mirror, probe: probeOnceJson(probe)}
  }
}
