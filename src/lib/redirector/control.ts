/**
 * `mb serve reload|stop|upgrade`: find the running server through its pid file
 * (./pid-file.ts) and signal it (docs/operations.md, "Signals"): SIGHUP reloads, SIGTERM
 * drains and stops, SIGUSR2 replaces the workers of `--workers N`.
 */
import {readFileSync} from 'node:fs'
import {setTimeout as sleep} from 'node:timers/promises'
import {MbError, UsageError} from '../errors.js'
import {pidFileProcess, processAlive, readPidFile, SERVE_TITLE} from './pid-file.js'

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
 *         the file is missing or names no live `mb serve` that started before it was written
 *         (stale); `PID_FILE_INVALID` when it is malformed, a symlink or unreadable
 */
function runningServe(pidFile: string | undefined): number {
  if (!pidFile) throw new UsageError('No pid file: pass --pid-file PATH (the one `mb serve --pid-file` writes) or set serve.pid_file.', 'USAGE')
  const record = readPidFile(pidFile)
  if (record === undefined) throw new MbError(`No mb serve is running: the pid file ${pidFile} does not exist.`, {code: 'SERVE_NOT_RUNNING'})
  const {pid} = record
  const found = pidFileProcess(record)
  if (found !== 'serve')
    throw new MbError(
      `No mb serve is running: the pid file ${pidFile} is stale (pid ${pid} is ${found === 'gone' ? 'gone' : 'another program, or a process started after the file was written'}); nothing was signalled.`,
      {
        code: 'SERVE_NOT_RUNNING',
      },
    )
  return pid
}

/** The title process `pid` runs under (`mb serve`, `mb serve: primary`), or undefined where /proc cannot tell. */
function serveTitle(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]
  } catch {
    return undefined
  }
}

/**
 * Sends the signal of `action` to the server named by `pidFile`. An upgrade of a server
 * that runs as one process is refused rather than sent, since it would ignore SIGUSR2.
 * @returns the pid signalled and the signal
 * @throws as {@link runningServe}; MbError `SERVE_UPGRADE_UNSUPPORTED` for an upgrade of one process
 */
export function signalServe(pidFile: string | undefined, action: ControlAction): {pid: number; signal: NodeJS.Signals} {
  const pid = runningServe(pidFile)
  const {signal} = CONTROL_SIGNALS[action]
  if (action === 'upgrade' && serveTitle(pid) === SERVE_TITLE)
    throw new MbError(
      `mb serve (pid ${pid}) runs as one process, which SIGUSR2 cannot replace (it replaces the workers of --workers N one at a time); nothing was sent. To upgrade without refusing a connection, restart it through mb-serve.socket (systemctl restart mb-serve: the socket stays open), or run it with --workers 2 and then use mb serve upgrade (docs/operations.md, "Signals").`,
      {code: 'SERVE_UPGRADE_UNSUPPORTED'},
    )
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
