import {ControlCommand, type ControlResult} from '../../control-command.js'

export default class ServeUpgrade extends ControlCommand<typeof ServeUpgrade> {
  static override description = `Replace the workers of a running mb serve --workers N one at a time (SIGUSR2), without refusing a connection

Each new worker runs the code and settings now on disk (after an upgrade of mb). A server without --workers cannot be replaced this way: nothing is sent, and the command exits 1 (SERVE_UPGRADE_UNSUPPORTED) naming the ways that refuse no connection (a restart through mb-serve.socket, or --workers 2). Finds the server through its pid file (--pid-file, or serve.pid_file); exits 1 when none runs.`

  static override examples = ['<%= config.bin %> serve upgrade --pid-file /run/mb/serve.pid']

  public async run(): Promise<ControlResult> {
    return this.signal('upgrade')
  }
}
