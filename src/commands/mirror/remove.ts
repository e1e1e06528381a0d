import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {removeMirror} from '../../lib/mirrors/registry.js'

export default class MirrorRemove extends BaseCommand<typeof MirrorRemove> {
  static override description =
    'Remove a mirror with its scan results and stale-copy records. A record of the removal stays (name, URLs without credentials, when, by which OS user): `mb mirror list --removed` lists them, and `mb stats` names its downloads "NAME (removed)"'
  static override examples = ['<%= config.bin %> mirror remove ftp.example.de', '<%= config.bin %> mirror remove ftp.example.de --json']

  static override args = {
    name: Args.string({description: 'the exact mirror name (a prefix only with --yes)', required: true}),
  }

  static override flags = {
    yes: Flags.boolean({char: 'y', description: 'accept an unambiguous prefix of the name instead of the full name'}),
  }

  public async run(): Promise<PublicMirror> {
    const database = await this.openDb()
    const mirror = publicMirror(await removeMirror(database.db, this.args.name, {allowPrefix: this.flags.yes}))
    this.print(`Removed mirror ${mirror.identifier} (id ${mirror.id}).`)
    return mirror
  }
}
