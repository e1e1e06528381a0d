/**
 * The pid file of `mb serve --pid-file PATH` (`serve.pid_file`): a handle on the daemon for
 * hosts without systemd, read by `mb serve reload|stop|upgrade` (./control.ts).
 *
 * The file holds the process id of the single process or of the `--workers` primary, one
 * line of decimal digits (what `kill $(cat FILE)` and systemd's `PIDFile=` read). It is
 * written once the server listens: a temporary file of a random name created with
 * `O_CREAT|O_EXCL|O_NOFOLLOW` (a planted file or symlink fails the write, never redirects it)
 * and renamed over the path, so that a reader never sees half a number; the directory must
 * belong to this user or root and be writable by nobody else (or be sticky, as /tmp is).
 * It is removed on a clean exit if it still names this process. A file naming a live
 * `mb serve` refuses a second start; one left by a dead process (or by a pid since reused by
 * another program) is taken over.
 *
 * A pid is believed only when the file is well-formed, the process looks like `mb serve`
 * (its command line) and it started before the file was written (its start time, field 22 of
 * /proc/PID/stat, against the file's mtime): a pid reused by a later process is never
 * signalled, whatever it calls itself.
 */
import {closeSync, constants, fstatSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeSync} from 'node:fs'
import {randomBytes} from 'node:crypto'
import {basename, dirname} from 'node:path'
import {processStartTime} from '../db/owner-lock.js'
import type {Logger} from 'pino'
import {errorMessage, MbError} from '../errors.js'

/** The process title of a `mb serve` process: `mb serve`, `mb serve: primary`, `mb serve: worker 1`. */
export const SERVE_TITLE = 'mb serve'

/** Linux's largest pid (PID_MAX_LIMIT, 2^22); a larger number is no pid. */
const PID_MAX = 4_194_304

/** What a pid file says: the pid, and when the file was last written (ms since the epoch). */
export interface PidRecord {
  pid: number
  writtenMs: number
}

/**
 * The pid file at `path`: its record, `{malformed}` with the text when it holds no pid, or
 * undefined when it does not exist. It must be a regular file (a symlink is not followed)
 * holding one pid: decimal digits, 1..4194304, an optional newline; `0x50b7`, `1e3`,
 * `20663.0` or a sign are malformed, since a lenient parse could name another process (and
 * `kill(0)` signals the whole process group).
 * @throws MbError `PID_FILE_INVALID` when it cannot be read or is not a regular file
 */
function inspectPidFile(path: string): PidRecord | {malformed: string} | undefined {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    const why = code === 'ELOOP' ? 'it is a symbolic link, which mb neither follows nor replaces; remove it' : (error as Error).message
    throw new MbError(`Cannot read the pid file ${path}: ${why}.`, {code: 'PID_FILE_INVALID', cause: error})
  }
  try {
    const stat = fstatSync(fd)
    if (!stat.isFile()) throw new MbError(`The pid file ${path} is not a regular file.`, {code: 'PID_FILE_INVALID'})
    const buffer = Buffer.alloc(32)
    const text = buffer.toString('latin1', 0, readSync(fd, buffer, 0, buffer.length, 0))
    const match = /^([1-9][0-9]{0,6})\n?$/.exec(text)
    const pid = match ? Number(match[1]) : 0
    return pid >= 1 && pid <= PID_MAX ? {pid, writtenMs: stat.mtimeMs} : {malformed: text}
  } finally {
    closeSync(fd)
  }
}

/**
 * The pid file at `path` (see {@link inspectPidFile} for what is well-formed), or undefined
 * when it does not exist.
 * @throws MbError `PID_FILE_INVALID` when it cannot be read, is not a regular file, or is malformed
 */
export function readPidFile(path: string): PidRecord | undefined {
  const record = inspectPidFile(path)
  if (record === undefined || 'pid' in record) return record
  throw new MbError(`The pid file ${path} holds ${JSON.stringify(record.malformed.slice(0, 20))}, not a process id (decimal digits only, 1..${PID_MAX}); nothing was signalled.`, {
    code: 'PID_FILE_INVALID',
  })
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
 * `/proc/PID/cmdline`) is a serve title ({@link SERVE_TITLE}) or node running mb's entry
 * (`bin/run.js`, `bin/dev.js`, `mb`) with the `serve` command; another interpreter running a
 * file of that name (`python3 run.js serve`) is not. Where /proc cannot be read, a live
 * process counts as one.
 */
function isServeProcess(pid: number): boolean {
  if (!processAlive(pid)) return false
  let cmdline: string
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
  } catch {
    return true
  }
  const args = cmdline.split('\0').filter((a) => a !== '')
  if (args[0]?.startsWith(SERVE_TITLE)) return true
  // Before it sets its title: `node …/bin/run.js serve …` or `node /usr/bin/mb serve …` (the shebang's).
  if (!/^node[0-9.]*$/.test(basename(args[0] ?? ''))) return false
  const command = args.findIndex((a) => /(^|\/)(mb|run\.js|dev\.js)$/.test(a))
  return command >= 0 && args[command + 1] === 'serve'
}

/** USER_HZ: the clock ticks per second of /proc/PID/stat's times (proc(5); 100 on Linux's user ABI). */
const USER_HZ = 100

/**
 * Whether process `pid` already ran when the pid file was written at `writtenMs` (its start
 * time, /proc/PID/stat field 22 over {@link USER_HZ}, against the system's uptime; 1 s of
 * slack for the clocks' rounding). A pid reused since by a later process fails. True where
 * /proc cannot tell.
 */
function startedBefore(pid: number, writtenMs: number): boolean {
  const start = processStartTime(pid)
  if (start === undefined) return false
  if (start === '0') return true
  let uptime: number
  try {
    uptime = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0])
  } catch {
    return true
  }
  const processAge = uptime - Number(start) / USER_HZ
  const fileAge = (Date.now() - writtenMs) / 1000
  return processAge >= fileAge - 1
}

/**
 * What the pid file's process is: `serve` when it is the `mb serve` that wrote the file (see
 * {@link isServeProcess} and the start time against the file's mtime), `gone` when no such
 * pid lives, `other` when the pid now names another program (or a process started since).
 */
export function pidFileProcess(record: PidRecord): 'serve' | 'gone' | 'other' {
  if (!processAlive(record.pid)) return 'gone'
  return isServeProcess(record.pid) && startedBefore(record.pid, record.writtenMs) ? 'serve' : 'other'
}

/**
 * Refuses a directory in which another user could plant or swap the pid file: it must
 * belong to this user or root, and be writable by no one else unless it is sticky (as /tmp
 * is: nobody may then rename or remove another's file).
 * @throws MbError `PID_FILE_INVALID` naming the directory, its owner and mode, and what to do
 */
function checkPidDirectory(path: string): void {
  const dir = dirname(path)
  let stat: ReturnType<typeof statSync>
  try {
    stat = statSync(dir)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new MbError(`The directory of the pid file ${path} does not exist; create it or pick another --pid-file.`, {code: 'PID_FILE_INVALID'})
    throw new MbError(`Cannot check the directory of the pid file ${path}: ${(error as Error).message}.`, {code: 'PID_FILE_INVALID', cause: error})
  }
  const uid = process.geteuid?.() ?? stat.uid
  const mode = `0${(stat.mode & 0o7777).toString(8)}`
  if (!stat.isDirectory()) throw new MbError(`The pid file's directory ${dir} is not a directory.`, {code: 'PID_FILE_INVALID'})
  if (stat.uid !== uid && stat.uid !== 0)
    throw new MbError(
      `The pid file's directory ${dir} belongs to uid ${stat.uid}, not to this user (uid ${uid}) or root: its owner could swap the pid file. Use a directory of this user, e.g. /run/mb (systemd RuntimeDirectory=mb).`,
      {
        code: 'PID_FILE_INVALID',
      },
    )
  if ((stat.mode & 0o022) !== 0 && (stat.mode & 0o1000) === 0)
    throw new MbError(
      `The pid file's directory ${dir} (mode ${mode}) is writable by other users and not sticky: they could plant or swap the pid file. Use a directory only its owner can write (chmod go-w ${dir}), e.g. /run/mb.`,
      {
        code: 'PID_FILE_INVALID',
      },
    )
}

/**
 * Refuses to start when `path` names a live `mb serve` other than this process, or when its
 * directory does not exist or is not safe (see {@link checkPidDirectory}); found before the
 * server starts, not once it listens. A malformed file is taken over.
 * @throws MbError `SERVE_RUNNING`, `PID_FILE_INVALID`
 */
export function checkPidFile(path: string): void {
  checkPidDirectory(path)
  const record = inspectPidFile(path)
  if (record !== undefined && 'pid' in record && record.pid !== process.pid && pidFileProcess(record) === 'serve')
    throw new MbError(`mb serve is already running as pid ${record.pid} (pid file ${path}). Stop it first (mb serve stop --pid-file ${path}), or give this server another --pid-file.`, {
      code: 'SERVE_RUNNING',
    })
}

/**
 * Writes this process's id to `path` atomically, after {@link checkPidFile}: a temporary file
 * of a random name beside it, created with `O_CREAT|O_EXCL|O_NOFOLLOW` (mode 0644), then
 * renamed over it; a symlink at `path` is refused by {@link checkPidFile}.
 * @throws MbError `SERVE_RUNNING`; `PID_FILE_INVALID` when the file cannot be written
 */
export function writePidFile(path: string): void {
  checkPidFile(path)
  const temporary = `${path}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`
  let fd: number | undefined
  try {
    fd = openSync(temporary, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644)
    writeSync(fd, `${process.pid}\n`)
    closeSync(fd)
    fd = undefined
    renameSync(temporary, path)
  } catch (error) {
    if (fd !== undefined) closeSync(fd)
    // Only a file this call created is removed: with EEXIST the name is someone else's.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') rmSync(temporary, {force: true})
    throw new MbError(`Cannot write the pid file ${path}: ${(error as Error).message}. Create its directory or pick another --pid-file.`, {code: 'PID_FILE_INVALID', cause: error})
  }
}

/** Removes `path` if it still names this process (another server may have taken it over). Never throws. */
export function removePidFile(path: string): void {
  try {
    if (readPidFile(path)?.pid === process.pid) rmSync(path, {force: true})
  } catch {
    // Nothing to do: a pid file that cannot be read is not ours to remove.
  }
}

/**
 * The `--workers` primary writes its pid file once a worker listens. A failure there
 * (another server took the file meanwhile) is logged: the workers already serve, and stopping
 * them would drop requests; the operator is told the file is not this server's.
 */
export function writePidFileLogged(pidFile: string, logger: Logger): void {
  try {
    writePidFile(pidFile)
    logger.info({pidFile, pid: process.pid}, 'pid file written')
  } catch (error) {
    logger.error({pidFile, err: errorMessage(error)}, 'the pid file cannot be written; `mb serve reload|stop|upgrade` will not find this server')
  }
}
