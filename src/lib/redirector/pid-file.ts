/**
 * The pid file of `mb serve --pid-file PATH` (`serve.pid_file`): a handle on the daemon for
 * hosts without systemd, read by `mb serve reload|stop|upgrade` (./control.ts).
 *
 * The file holds the process id of the single process or of the `--workers` primary, one
 * line. It is written once the server listens (a temporary file renamed over it, so that a
 * reader never sees half a number), and removed on a clean exit if it still names this
 * process. A file naming a live `mb serve` refuses a second start; one left by a dead
 * process (or by a pid since reused by another program) is taken over.
 */
import {existsSync, readFileSync, renameSync, rmSync, writeFileSync} from 'node:fs'
import {dirname} from 'node:path'
import {MbError} from '../errors.js'

/** The process title of a `mb serve` process: `mb serve`, `mb serve: primary`, `mb serve: worker 1`. */
export const SERVE_TITLE = 'mb serve'

/**
 * The process id written in `path`, or undefined when the file does not exist or holds no
 * positive integer.
 * @throws MbError `PID_FILE_INVALID` when the file exists but cannot be read
 */
export function readPidFile(path: string): number | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new MbError(`Cannot read the pid file ${path}: ${(error as Error).message}`, {code: 'PID_FILE_INVALID', cause: error})
  }
  const pid = Number(text.trim())
  return Number.isInteger(pid) && pid > 0 ? pid : undefined
}

/** True when a process with this id exists (signal 0; EPERM means it exists but is another user's). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/**
 * True when `pid` is a live `mb serve`: alive, and its command line (Linux
 * `/proc/PID/cmdline`) is a serve title ({@link SERVE_TITLE}) or runs mb with the `serve`
 * command. Where /proc cannot be read, a live process counts as one.
 */
export function isServeProcess(pid: number): boolean {
  if (!processAlive(pid)) return false
  let cmdline: string
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
  } catch {
    return true
  }
  const args = cmdline.split('\0').filter((a) => a !== '')
  if (args[0]?.startsWith(SERVE_TITLE)) return true
  // Before it sets its title: `node …/bin/run.js serve …` or `mb serve …`.
  const command = args.findIndex((a) => /(^|\/)(mb|run\.js|dev\.js)$/.test(a))
  return command >= 0 && args[command + 1] === 'serve'
}

/**
 * Refuses to start when `path` names a live `mb serve` other than this process, or when its
 * directory does not exist (found before the server starts, not once it listens).
 * @throws MbError `SERVE_RUNNING`, `PID_FILE_INVALID`
 */
export function checkPidFile(path: string): void {
  if (!existsSync(dirname(path))) throw new MbError(`The directory of the pid file ${path} does not exist; create it or pick another --pid-file.`, {code: 'PID_FILE_INVALID'})
  const pid = readPidFile(path)
  if (pid !== undefined && pid !== process.pid && isServeProcess(pid))
    throw new MbError(`mb serve is already running as pid ${pid} (pid file ${path}). Stop it first (mb serve stop --pid-file ${path}), or give this server another --pid-file.`, {
      code: 'SERVE_RUNNING',
    })
}

/**
 * Writes this process's id to `path` atomically (a temporary file beside it, renamed over
 * it), after {@link checkPidFile}.
 * @throws MbError `SERVE_RUNNING`; `PID_FILE_INVALID` when the file cannot be written
 */
export function writePidFile(path: string): void {
  checkPidFile(path)
  const temporary = `${path}.${process.pid}.tmp`
  try {
    writeFileSync(temporary, `${process.pid}\n`, {mode: 0o644})
    renameSync(temporary, path)
  } catch (error) {
    rmSync(temporary, {force: true})
    throw new MbError(`Cannot write the pid file ${path}: ${(error as Error).message}. Create its directory or pick another --pid-file.`, {code: 'PID_FILE_INVALID', cause: error})
  }
}

/** Removes `path` if it still names this process (another server may have taken it over). Never throws. */
export function removePidFile(path: string): void {
  try {
    if (readPidFile(path) === process.pid) rmSync(path, {force: true})
  } catch {
    // Nothing to do: a pid file that cannot be read is not ours to remove.
  }
}
