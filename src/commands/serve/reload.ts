import {ControlCommand, type ControlResult} from '../../control-command.js'

export default class ServeReload extends ControlCommand<typeof ServeReload> {
  static override description = `Reload a running mb serve (SIGHUP): the config file, GeoIP/ASN databases and the access log

Finds the server through its pid file (--pid-file, or serve.pid_file). The server logs what it reloaded, and the changed settings that need a restart. Exits 1 when no server runs under that pid file.`

  static override examples = ['<%= config.bin %> serve reload --pid-file /run/mb/serve.pid']

  public async run(): Promise<ControlResult> {
    return this.signal('reload')
  }
}
