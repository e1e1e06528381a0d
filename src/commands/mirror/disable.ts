import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {setEnabled} from '../../lib/mirrors/registry.js'

export default class MirrorDisable extends BaseCommand<typeof MirrorDisable> {
  static override description = 'Disable a mirror: it keeps its records but is never selected'
  static override examples = ['<%= config.bin %> mirror disable ftp.example.de', '<%= config.bin %> mirror disable ftp.example.de --json']

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  public async run(): Promise<PublicMirror> {
    const database = await this.openDb()
    const {mirror: row, changed} = await setEnabled(database.db, this.args.name, false)
    const mirror = publicMirror(row)
    this.print(changed ? `Mirror ${mirror.identifier} disabled.` : `Mirror ${mirror.identifier} was already disabled.`)
    return mirror
  }
}
