/**
 * The rsync lister: runs the system `rsync --list-only -r --no-h` against a daemon module
 * (`rsync://[user@]host[:port]/module/path`) and turns its listing into the shared entry stream.
 *
 * - Times: rsync prints mtimes in the client's local time zone, so the child runs with TZ=UTC;
 *   the listing's precision is 1 second.
 * - Timeouts: `--contimeout` (connect) and `--timeout` (I/O idle), plus the caller's AbortSignal
 *   (per-mirror budget), which kills the child.
 * - Lifetime: rsync never outlives mb; see {@link spawnRsync}.
 * - Exit codes 23 (partial transfer, e.g. unreadable files or dangling symlinks) and 24
 *   (files vanished while listing) still give a usable listing; any other non-zero code fails.
 *   A start directory that does not exist (23, "No such file or directory") is SCAN_BASE_MISSING,
 *   or SCAN_DIR_ABSENT for a `subdir` below a base that lists.
 * - `.~tmp~` directories (rsync's --delay-updates staging area on mirrors) and everything
 *   under them are skipped.
 * - Symlinks: listed with `--copy-links` (-L), so a symlinked file appears as a regular file
 *   with its target's size and mtime, and a symlinked directory is descended under the link's
 *   name. That is how the mirror's web server serves them, and how `mb index` records the
 *   origin, so both sides compare path for path. A dangling link makes rsync exit 23 and is
 *   simply absent.
 * - Credentials: the user comes from the URL; the password from `RSYNC_PASSWORD` in the
 *   environment or a password file (`--password-file`). A password written into the URL
 *   (`rsync://user:pass@host/...`) is moved into RSYNC_PASSWORD for the child. Every message
 *   redacts it.
 * - Names: `-8` (`--8-bit-output`) keeps UTF-8 bytes as they are; rsync still escapes control
 *   characters as `\#ooo` (octal), which are decoded.
 *
 * Source: rsync(1) (3.2.x), sections "--list-only", "--copy-links", "EXIT VALUES".
 */
import {type ChildProcess, type ChildProcessByStdio, spawn} from 'node:child_process'
import {constants} from 'node:os'
import type {Readable, Writable} from 'node:stream'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import type {ListingEntry, Lister, ListOptions} from './types.js'
import {trimSlashes, withTrailingSlash} from '../text.js'

/** Options of the rsync lister beyond the shared ones. */
export interface RsyncListOptions extends ListOptions {
  /** File holding the daemon password (passed as `--password-file`). */
  passwordFile?: string
  /** Environment for the child (default `process.env`); RSYNC_PASSWORD is read from it. */
  env?: NodeJS.ProcessEnv
  /** The rsync binary (default `rsync` on PATH). */
  binary?: string
  /** Extra arguments, e.g. `--port` is not needed (the URL carries it); for tests. */
  extraArgs?: string[]
}

/** A listing line that could not be parsed. */
export class RsyncParseError extends MbError {
  constructor(message: string) {
    super(message, {code: 'RSYNC_BAD_LISTING'})
    this.name = 'RsyncParseError'
  }
}

/** One parsed `--list-only` line, path relative to the listed directory. */
export interface RsyncLine {
  mode: string
  type: 'file' | 'dir' | 'symlink' | 'other'
  size: number
  /** Unix seconds, read as UTC. */
  mtime: number
  name: string
}

// perms (10 chars, optional ACL/xattr marker), size (digits, maybe with , or .), date, time, name.
const LINE = /^([-dlcbps])([-rwxsStT]{9})[+.@]?\s+([\d,.]+)\s+(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2}) (.+)$/

/** Decodes rsync's `\#ooo` escapes (octal bytes) and the raw bytes around them as UTF-8. */
export function decodeRsyncName(raw: string): string {
  if (!raw.includes('\\#')) return raw
  const bytes: number[] = []
  const encoder = new TextEncoder()
  let i = 0
  while (i < raw.length) {
    const m = /^\\#([0-7]{3})/.exec(raw.slice(i, i + 5))
    if (m) {
      bytes.push(Number.parseInt(m[1], 8))
      i += 5
      continue
    }
    const cp = raw.codePointAt(i)!
    const ch = String.fromCodePoint(cp)
    for (const b of encoder.encode(ch)) bytes.push(b)
    i += ch.length
  }
  return new TextDecoder().decode(Uint8Array.from(bytes))
}

/**
 * Parses one line of `rsync --list-only --no-h` output (with TZ=UTC).
 * Accepts sizes with thousands separators (`1,234,567`, older rsync or `-h` off by locale).
 * @throws RsyncParseError quoting the line when it is not a listing line
 */
export function parseRsyncLine(line: string): RsyncLine {
  const m = LINE.exec(line)
  if (!m) throw new RsyncParseError(`Unexpected line in the rsync listing: ${JSON.stringify(line.slice(0, 200))}. Expected "PERMS SIZE YYYY/MM/DD HH:MM:SS NAME".`)
  const [, kind, , sizeText, y, mo, d, h, mi, s, rawName] = m
  const size = Number(sizeText.replace(/[,.]/g, ''))
  const mtime = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s)) / 1000
  if (!Number.isSafeInteger(size) || !Number.isFinite(mtime)) throw new RsyncParseError(`Bad size or date in the rsync listing line: ${JSON.stringify(line.slice(0, 200))}`)
  const type = kind === '-' ? 'file' : kind === 'd' ? 'dir' : kind === 'l' ? 'symlink' : 'other'
  let name = decodeRsyncName(rawName)
  if (type === 'symlink') {
    // Non-daemon listings show "name -> target"; daemons hide the target.
    const arrow = name.lastIndexOf(' -> ')
    if (arrow > 0) name = name.slice(0, arrow)
  }
  return {mode: kind + m[2], type, size, mtime, name}
}

/** True when a path has a `.~tmp~` component. */
export function isRsyncTmp(path: string): boolean {
  return path === '.~tmp~' || path.startsWith('.~tmp~/') || path.includes('/.~tmp~/') || path.endsWith('/.~tmp~')
}

/** What rsync's exit codes mean (rsync(1), EXIT VALUES). */
export const EXIT_REASONS: Readonly<Record<number, string>> = {
  1: 'syntax or usage error',
  2: 'protocol incompatibility',
  3: 'errors selecting input/output files, dirs (does the module path exist?)',
  5: 'error starting client-server protocol (unknown module, or authentication failed)',
  10: 'error in socket I/O (connection refused or reset)',
  11: 'error in file I/O (is the disk full?)',
  12: 'error in rsync protocol data stream',
  14: 'error in IPC code',
  20: 'received SIGUSR1 or SIGINT',
  23: 'partial transfer due to error',
  24: 'partial transfer due to vanished source files',
  30: 'timeout in data send/receive (no data within the I/O timeout)',
  35: 'timeout waiting for daemon connection (connect timeout)',
}

/** Splits an rsync URL into what the child needs. @throws MbError for a non-rsync URL */
export function parseRsyncUrl(url: string): {url: string; user?: string; password?: string; display: string} {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new MbError(`Not a valid rsync URL: ${redact(url)}. Use rsync://host/module/path.`, {code: 'RSYNC_URL'})
  }
  if (parsed.protocol !== 'rsync:') throw new MbError(`Not an rsync:// URL: ${redact(url)}.`, {code: 'RSYNC_URL'})
  const password = parsed.password ? decodeURIComponent(parsed.password) : undefined
  const user = parsed.username ? decodeURIComponent(parsed.username) : undefined
  parsed.password = ''
  let clean = parsed.toString()
  // rsync takes the path raw, not percent-encoded.
  clean = decodeURI(clean)
  clean = withTrailingSlash(clean)
  return {url: clean, user, password, display: clean}
}

/**
 * True for a remote-shell target `[user@]host:path` (rsync(1), "USAGE": one colon means ssh),
 * as `mb mirror edit --push-url` stores it; false for `rsync://` URLs and `host::module`.
 */
export function isSshTarget(target: string): boolean {
  return !target.includes('://') && /^(?:[^@\s/:]+@)?(?:[^:/@\s[\]]+|\[[0-9a-fA-F:.]+\]):(?!:)/.test(target)
}

/** The `-e` remote-shell command for an ssh target: no password prompt, and the connect timeout (seconds). */
export function sshCommand(connectTimeoutSeconds: number | undefined): string {
  return `ssh -o BatchMode=yes -o ConnectTimeout=${Math.max(1, Math.round(connectTimeoutSeconds ?? 20))}`
}

function joinSub(base: string, subdir: string | undefined): string {
  const sub = trimSlashes(subdir ?? '')
  return sub ? `${base}${sub}/` : base
}

/**
 * Lists a mirror over rsync. Paths in the yielded entries are relative to `baseUrl` (with
 * `options.subdir` as their first components when given). `.` and `.~tmp~` entries are left out.
 *
 * @throws MbError with the rsync exit reason and its last stderr lines (credentials redacted),
 *         RsyncParseError on a line that is not a listing line, MbError `SCAN_ABORTED` when
 *         the signal fires.
 */
async function* listRsync(baseUrl: string, options: RsyncListOptions = {}): AsyncGenerator<ListingEntry> {
  const ssh = isSshTarget(baseUrl)
  const {url, password, display} = ssh ? {url: withTrailingSlash(baseUrl), password: undefined, display: withTrailingSlash(baseUrl)} : parseRsyncUrl(baseUrl)
  const target = joinSub(url, options.subdir)
  const prefix = trimSlashes(options.subdir ?? '')
  const env: NodeJS.ProcessEnv = {...(options.env ?? process.env), TZ: 'UTC', LC_ALL: 'C'}
  const secrets: string[] = []
  if (password !== undefined) env.RSYNC_PASSWORD = password
  if (env.RSYNC_PASSWORD) secrets.push(env.RSYNC_PASSWORD)
  const args = rsyncArgs(target, options, ssh)
  const scrub = (text: string) => redact(text, secrets)

  if (options.signal?.aborted) throw new MbError(`rsync listing of ${display} aborted before it started: ${String(options.signal.reason ?? 'aborted')}`, {code: 'SCAN_ABORTED'})
  const child = spawnRsync(options.binary ?? 'rsync', args, env)
  let stderr = ''
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000)
  })
  const exited = new Promise<{code: number | null; signal: NodeJS.Signals | null; error?: Error}>((resolve) => {
    child.on('error', (error) => resolve({code: null, signal: null, error}))
    child.on('close', (code, signal) => resolve({code, signal}))
  })
  let aborted = false
  const onAbort = () => {
    aborted = true
    killGroup(child)
  }
  options.signal?.addEventListener('abort', onAbort, {once: true})
  let finished = false
  try {
    let rest = ''
    const decoder = new TextDecoder('utf-8')
    const handle = (line: string) => listingEntry(line, prefix)
    for await (const chunk of child.stdout) {
      const text = rest + decoder.decode(chunk as Buffer, {stream: true})
      const lines = text.split('\n')
      rest = lines.pop()!
      for (const line of lines) {
        const entry = handle(line)
        if (entry) yield entry
      }
    }
    rest += decoder.decode()
    const result = await exited
    if (aborted)
      throw new MbError(`rsync listing of ${display} aborted: ${scrub(String(options.signal?.reason instanceof Error ? options.signal.reason.message : (options.signal?.reason ?? 'aborted')))}`, {
        code: 'SCAN_ABORTED',
      })
    if (result.code === 23 && START_MISSING.test(stderr)) throw await absentOrMissing(url, prefix, display, options, env)
    throwOnFailure(result, display, stderr, scrub)
    const last = handle(rest)
    if (last) yield last
    finished = true
  } finally {
    options.signal?.removeEventListener('abort', onAbort)
    if (!finished && child.exitCode === null && child.signalCode === null) killGroup(child)
    child.stdin.destroy()
  }
}

/**
 * The watchdog rsync runs under (POSIX sh). mb holds the write end of the shell's stdin pipe
 * and never writes to it; the kernel closes it when mb ends in any way, SIGKILL included.
 * The shell starts rsync in the background (stdin from /dev/null), and a second background
 * job blocks reading the pipe (through fd 3: an asynchronous list's own stdin is /dev/null):
 * at EOF it kills the whole process group, rsync and the shell with it. When rsync exits
 * first, the shell ends the reader and exits with rsync's code (127: rsync not found).
 */
const WATCHDOG = 'exec 3<&0; "$@" </dev/null & child=$!; { read -r _ <&3; kill -KILL 0; } & reader=$!; wait "$child"; status=$?; kill -KILL "$reader" 2>/dev/null; exit "$status"'

/** Process groups of the rsync children still running, killed when mb exits normally. */
const liveGroups = new Set<number>()
let exitHookInstalled = false

/**
 * Starts `binary args` under {@link WATCHDOG} in its own session and process group
 * (`detached`, so the group id is the child's pid and a terminal's Ctrl-C reaches only mb,
 * which aborts the scan). The group is killed on abort, on mb's normal exit (an `exit` hook),
 * and by the watchdog when mb dies from a signal, caught or not (SIGTERM, SIGHUP, SIGKILL).
 * stdout and stderr are pipes; stdin is the watchdog's pipe and must never be written.
 */
export function spawnRsync(binary: string, args: string[], env: NodeJS.ProcessEnv): ChildProcessByStdio<Writable, Readable, Readable> {
  const child = spawn('/bin/sh', ['-c', WATCHDOG, 'mb-rsync-watchdog', binary, ...args], {env, stdio: ['pipe', 'pipe', 'pipe'], detached: true})
  child.stdin.on('error', () => {})
  if (child.pid !== undefined) {
    const pid = child.pid
    liveGroups.add(pid)
    child.once('exit', () => liveGroups.delete(pid))
  }
  if (!exitHookInstalled) {
    exitHookInstalled = true
    process.once('exit', () => {
      for (const pid of liveGroups) killPid(-pid)
    })
  }
  return child
}

/** Kills the child's whole process group (rsync and its watchdog shell). */
export function killGroup(child: ChildProcess): void {
  if (child.pid !== undefined) killPid(-child.pid)
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL')
  } catch {
    // Already gone.
  }
}

/** The rsync command line that lists `target` (recursively unless `options.recursive` is false: rsync then lists the directory's own entries, as with `--dirs`), symlinks followed (over ssh for an ssh target, where --contimeout does not apply). */
function rsyncArgs(target: string, options: RsyncListOptions, ssh: boolean): string[] {
  const args = ['--list-only', ...(options.recursive === false ? [] : ['-r']), '--no-h', '-8', '--copy-links', '--no-motd']
  if (ssh) args.push('-e', sshCommand(options.connectTimeoutSeconds))
  else args.push(`--contimeout=${Math.max(1, Math.round(options.connectTimeoutSeconds ?? 20))}`)
  args.push(`--timeout=${Math.max(1, Math.round(options.ioTimeoutSeconds ?? 120))}`)
  if (options.passwordFile) args.push(`--password-file=${options.passwordFile}`)
  args.push(...(options.extraArgs ?? []), target)
  return args
}

/** One listing line as an entry under `prefix`; undefined for a blank line, `.`, rsync's temporary files and non-file types. */
function listingEntry(line: string, prefix: string): ListingEntry | undefined {
  if (line === '') return undefined
  const parsed = parseRsyncLine(line)
  if (parsed.name === '.') return undefined
  const path = prefix ? `${prefix}/${parsed.name}` : parsed.name
  if (isRsyncTmp(parsed.name)) return undefined
  if (parsed.type === 'other') return undefined
  return {path, type: parsed.type, size: parsed.type === 'file' ? parsed.size : 0, mtime: parsed.mtime, mtimePrecision: 1}
}

const RSYNC_MISSING = 'The rsync binary was not found. Install it (apt-get install rsync).'

/** The signal that killed rsync, from the watchdog's exit code (128 + signal number, as sh reports it). */
export function watchdogSignal(code: number | null): string | undefined {
  if (code === null || code <= 128) return undefined
  return Object.entries(constants.signals).find(([, n]) => n === code - 128)?.[0]
}

/** rsync's complaint (exit 23) when the directory it was asked to list does not exist; a vanished subdirectory gives exit 24 instead. */
const START_MISSING = /(change_dir|link_stat) "[^"]*"( \(in [^)]*\))? failed: No such file or directory/

/**
 * The error for a listing whose start directory does not exist. With a `--dir` (`prefix`), one
 * more rsync run lists the base alone: it lists → the mirror has not synced that folder yet
 * (SCAN_DIR_ABSENT, an empty folder to a `--dir` scan); it fails too → the mirror's rsync URL is
 * wrong (SCAN_BASE_MISSING). Without the check an rsync mirror with a wrong path would look empty.
 */
async function absentOrMissing(base: string, prefix: string, display: string, options: RsyncListOptions, env: NodeJS.ProcessEnv): Promise<MbError> {
  if (prefix) {
    const child = spawnRsync(options.binary ?? 'rsync', rsyncArgs(base, {...options, recursive: false}, isSshTarget(base)), env)
    child.stdout.resume()
    child.stderr.resume()
    const kill = () => killGroup(child)
    options.signal?.addEventListener('abort', kill, {once: true})
    const code = await new Promise<number | null>((resolve) => {
      child.on('error', () => resolve(null))
      child.on('close', (c) => resolve(c))
    }).finally(() => options.signal?.removeEventListener('abort', kill))
    if (code === 0 || code === 24) return new MbError(`rsync directory ${prefix}/ does not exist on ${display}: the folder is not on the mirror`, {code: 'SCAN_DIR_ABSENT'})
  }
  return new MbError(`rsync ${prefix ? `directory ${prefix}/ and base` : 'base'} ${display} do${prefix ? '' : 'es'} not exist (No such file or directory); check the mirror's rsync URL`, {
    code: 'SCAN_BASE_MISSING',
  })
}

/**
 * Throws RSYNC_FAILED when rsync could not run or exited with an error; exits 23 (partial
 * transfer) and 24 (files vanished) pass, their listing being usable (see the module notes).
 */
function throwOnFailure(result: {code: number | null; signal: NodeJS.Signals | null; error?: Error}, display: string, stderr: string, redact: (text: string) => string): void {
  if (result.error) {
    const missing = (result.error as NodeJS.ErrnoException).code === 'ENOENT'
    throw new MbError(missing ? RSYNC_MISSING : `Cannot run rsync: ${result.error.message}`, {code: 'RSYNC_FAILED'})
  }
  if (result.code === 127) throw new MbError(RSYNC_MISSING, {code: 'RSYNC_FAILED'})
  if (result.code !== 0 && result.code !== 23 && result.code !== 24) {
    const signal = result.signal ?? watchdogSignal(result.code)
    const reason = signal ? `killed by ${signal}` : `exit ${result.code}${EXIT_REASONS[result.code!] ? `: ${EXIT_REASONS[result.code!]}` : ''}`
    const detail = stderr
      .trim()
      .split('\n')
      .filter((l) => l && !/^rsync error:/.test(l))
      .slice(-3)
      .join(' | ')
    throw new MbError(`rsync listing of ${display} failed (${reason})${detail ? `: ${redact(detail)}` : ''}`, {code: 'RSYNC_FAILED'})
  }
}

/** The rsync {@link Lister} for the registry. */
export const rsyncLister: Lister & {list(baseUrl: string, options: RsyncListOptions): AsyncIterable<ListingEntry>} = {
  protocol: 'rsync',
  list: (baseUrl, options) => listRsync(baseUrl, options),
}
