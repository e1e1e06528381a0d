import {Flags} from '@oclif/core'
import {ControlCommand, type ControlResult} from '../../control-command.js'
import {waitForExit} from '../../lib/redirector/control.js'

export default class ServeStop extends ControlCommand<typeof ServeStop> {
  static override description = `Stop a running mb serve (SIGTERM) and wait until it has exited

The server drains its connections, writes the pending download counts and removes its pid file. Finds it through its pid file (--pid-file, or serve.pid_file); exits 1 when none runs, or when it still runs after --timeout seconds.`

  static override examples = ['<%= config.bin %> serve stop --pid-file /run/mb/serve.pid', '<%= config.bin %> serve stop --timeout 60']

  static override flags = {
    ...ControlCommand.flags,
    timeout: Flags.integer({description: 'seconds to wait for the server to exit', default: 30, min: 1}),
  }

  public async run(): Promise<ControlResult & {seconds: number}> {
    const sent = this.signal('stop')
    const seconds = await waitForExit(sent.pid, this.flags.timeout)
    this.print(`mb serve (pid ${sent.pid}) stopped after ${seconds} s.`)
    return {...sent, seconds}
  }
}
