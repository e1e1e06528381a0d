/**
 * The base of `mb serve reload|stop|upgrade`: find the running `mb serve` through its pid
 * file (`--pid-file` or `serve.pid_file`) and send it the signal of the command
 * (src/lib/redirector/control.ts).
 */
import {type Command, Flags} from '@oclif/core'
import {BaseCommand} from './base-command.js'
import {CONTROL_SIGNALS, type ControlAction, signalServe} from './lib/redirector/control.js'

/** What a control command reports (`--json`). */
export interface ControlResult {
  pid: number
  signal: string
  pidFile: string
  action: string
}

export abstract class ControlCommand<T extends typeof Command> extends BaseCommand<T> {
  static override flags = {
    'pid-file': Flags.string({description: 'the pid file of the running mb serve (as given to `mb serve --pid-file`; default: serve.pid_file)'}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {'serve.pid_file': (this.flags as {'pid-file'?: string})['pid-file']}
  }

  /** Signals the server for `action` and prints what was done. @throws as signalServe */
  protected signal(action: ControlAction): ControlResult {
    const pidFile = this.mbConfig.serve.pid_file
    const {pid, signal} = signalServe(pidFile, action)
    const what = CONTROL_SIGNALS[action].action
    this.print(`Sent ${signal} to mb serve (pid ${pid}, ${pidFile}): ${what}.`)
    return {pid, signal, pidFile: pidFile ?? '', action: what}
  }
}
