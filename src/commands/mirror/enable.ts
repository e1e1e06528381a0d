import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type PublicMirror, publicMirror, setEnabled} from '../../lib/mirrors/registry.js'

export default class MirrorEnable extends BaseCommand<typeof MirrorEnable> {
  static override description = 'Enable a mirror so that it takes part in selection again'
  static override examples = ['<%= config.bin %> mirror enable ftp.example.de', '<%= config.bin %> mirror enable ftp.example.de --json']

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  public async run(): Promise<PublicMirror> {
    const database = await this.openDb()
    const {mirror: row, changed} = await setEnabled(database.db, this.args.name, true)
    const mirror = publicMirror(row)
    this.print(changed ? `Mirror ${mirror.identifier} enabled.` : `Mirror ${mirror.identifier} was already enabled.`)
    return mirror
  }
}
