import {Args} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type PublicMirror, publicMirror, resolveMirror} from '../../lib/mirrors/registry.js'
import {mirrorRecord} from '../../lib/mirrors/render.js'
import {renderRecord} from '../../lib/output.js'

export default class MirrorShow extends BaseCommand<typeof MirrorShow> {
  static override description = 'Show every field of one mirror, including its up/down status and last scan result (passwords redacted)'
  static override examples = ['<%= config.bin %> mirror show ftp.example.de', '<%= config.bin %> mirror show ftp.ex --json']

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  public async run(): Promise<PublicMirror> {
    const database = await this.openDb()
    const mirror = publicMirror(await resolveMirror(database.db, this.args.name))
    this.print(renderRecord(mirrorRecord(mirror)))
    return mirror
  }
}
