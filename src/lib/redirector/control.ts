/**
 * `mb serve reload|stop|upgrade`: find the running server through its pid file
 * (./pid-file.ts) and signal it (docs/operations.md, "Signals"): SIGHUP reloads, SIGTERM
 * drains and stops, SIGUSR2 replaces the workers of `--workers N`.
 */
import {setTimeout as sleep} from 'node:timers/promises'
import {MbError, UsageError} from '../errors.js'
import {isServeProcess, processAlive, readPidFile} from './pid-file.js'

/** What a control command sends, and what it means. */
export const CONTROL_SIGNALS = {
  reload: {signal: 'SIGHUP', action: 'reload the configuration, GeoIP and the access log'},
  stop: {signal: 'SIGTERM', action: 'drain the connections and stop'},
  upgrade: {signal: 'SIGUSR2', action: 'replace the workers one at a time'},
} as const satisfies Record<string, {signal: NodeJS.Signals; action: string}>

export type ControlAction = keyof typeof CONTROL_SIGNALS

/**
 * The pid of the `mb serve` named by `pidFile`.
 * @throws UsageError `USAGE` when no pid file is configured; MbError `SERVE_NOT_RUNNING` when
 *         the file is missing or names no live `mb serve` (stale)
 */
function runningServe(pidFile: string | undefined): number {
  if (!pidFile) throw new UsageError('No pid file: pass --pid-file PATH (the one `mb serve --pid-file` writes) or set serve.pid_file.', 'USAGE')
  const pid = readPidFile(pidFile)
  if (pid === undefined) throw new MbError(`No mb serve is running: the pid file ${pidFile} does not exist or holds no pid.`, {code: 'SERVE_NOT_RUNNING'})
  if (!isServeProcess(pid))
    throw new MbError(`No mb serve is running: the pid file ${pidFile} is stale (pid ${pid} is ${processAlive(pid) ? 'another program' : 'gone'}).`, {code: 'SERVE_NOT_RUNNING'})
  return pid
}

/**
 * Sends the signal of `action` to the server named by `pidFile`.
 * @returns the pid signalled and the signal
 * @throws as {@link runningServe}
 */
export function signalServe(pidFile: string | undefined, action: ControlAction): {pid: number; signal: NodeJS.Signals} {
  const pid = runningServe(pidFile)
  const {signal} = CONTROL_SIGNALS[action]
  try {
    process.kill(pid, signal)
  } catch (error) {
    throw new MbError(`Cannot send ${signal} to mb serve (pid ${pid}): ${(error as Error).message}. Run as the server's user.`, {code: 'FAILED', cause: error})
  }
  return {pid, signal}
}

/**
 * Waits until process `pid` has exited, polling every 100 ms.
 * @param timeoutSeconds how long to wait at most
 * @returns the seconds waited
 * @throws MbError `SERVE_STOP_TIMEOUT` when it still runs after `timeoutSeconds`
 */
export async function waitForExit(pid: number, timeoutSeconds: number): Promise<number> {
  const start = performance.now()
  const deadline = start + timeoutSeconds * 1000
  while (processAlive(pid)) {
    if (performance.now() >= deadline)
      throw new MbError(`mb serve (pid ${pid}) still runs ${timeoutSeconds} s after SIGTERM; it may still be draining. Wait, or give a longer --timeout.`, {code: 'SERVE_STOP_TIMEOUT'})
    await sleep(100)
  }
  return Math.round(performance.now() - start) / 1000
}
