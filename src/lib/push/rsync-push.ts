/**
 * One upload pass: runs the system rsync to copy a chosen list of origin files to a mirror's
 * push target (an rsync daemon module that accepts uploads, or `user@host:path` over ssh).
 *
 * - The list goes in a NUL-separated `--files-from` file (`--from0`), so any file name
 *   (spaces, newlines) is sent as it is; paths are relative to `source`, and rsync creates
 *   their directories on the mirror (`--files-from` implies `--relative`).
 * - `-t` keeps mtimes (the reconcile after the pass compares size and mtime, as a scan does);
 *   `-L` sends a symlink as the file it points to, as `mb index` records it. Files are written
 *   under a temporary name and renamed when complete (rsync's default), so a transfer cut
 *   off never leaves a half-written file under the real name.
 * - Timeouts: `--contimeout` (daemon) or ssh's ConnectTimeout, `--timeout` for a stall, and
 *   the caller's AbortSignal (the per-mirror budget, Ctrl-C), which kills rsync.
 * - rsync runs under the scan lister's watchdog ({@link spawnRsync}): it never outlives mb.
 * - Credentials: as for scans (RSYNC_PASSWORD or `--password-file`; a password written in the
 *   URL is moved into RSYNC_PASSWORD); every message is redacted.
 *
 * Source: rsync(1) 3.2.x, "--files-from", "--from0", "--times", "--copy-links", "EXIT VALUES".
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import {EXIT_REASONS, isSshTarget, killGroup, parseRsyncUrl, spawnRsync, sshCommand, watchdogSignal} from '../scan/rsync.js'
import {withTrailingSlash} from '../text.js'

/** What one upload needs. */
export interface UploadOptions {
  /** Local directory the paths are relative to (the origin root, or its base_path subtree). */
  source: string
  /** The mirror's push target as stored (`rsync://…/` or `user@host:path/`). */
  target: string
  /** Paths relative to `source`, '/'-separated. */
  paths: string[]
  connectTimeoutSeconds?: number
  ioTimeoutSeconds?: number
  passwordFile?: string
  /** Environment for rsync (default process.env); RSYNC_PASSWORD is read from it. */
  env?: NodeJS.ProcessEnv
  signal?: AbortSignal
}

/**
 * Uploads `paths` from `source` to `target`. Resolves when rsync exits 0.
 * @throws MbError PUSH_FAILED with rsync's exit reason and its last stderr lines (redacted),
 *         e.g. "exit 5 … ERROR: module is read only" for a daemon refusing uploads, exit 11
 *         for a full disk, "killed by SIGKILL" / "aborted: …" when cut off
 */
export async function uploadFiles(options: UploadOptions): Promise<void> {
  const ssh = isSshTarget(options.target)
  const parsed = ssh ? {url: withTrailingSlash(options.target), password: undefined, display: withTrailingSlash(options.target)} : parseRsyncUrl(options.target)
  const env: NodeJS.ProcessEnv = {...(options.env ?? process.env), LC_ALL: 'C'}
  if (parsed.password !== undefined) env.RSYNC_PASSWORD = parsed.password
  const secrets = env.RSYNC_PASSWORD ? [env.RSYNC_PASSWORD] : []
  const scrub = (text: string) => redact(text, secrets)
  if (options.signal?.aborted) throw new MbError(`push to ${parsed.display} aborted before it started: ${reasonText(options.signal.reason)}`, {code: 'PUSH_FAILED'})
  const dir = await mkdtemp(join(tmpdir(), 'mb-push-'))
  try {
    const list = join(dir, 'files')
    await writeFile(list, options.paths.map((p) => `${p}\0`).join(''), {mode: 0o600})
    const args = ['-rtL', '-8', '--from0', `--files-from=${list}`, '--no-motd', `--timeout=${Math.max(1, Math.round(options.ioTimeoutSeconds ?? 300))}`]
    if (ssh) args.push('-e', sshCommand(options.connectTimeoutSeconds))
    else args.push(`--contimeout=${Math.max(1, Math.round(options.connectTimeoutSeconds ?? 20))}`)
    if (options.passwordFile) args.push(`--password-file=${options.passwordFile}`)
    args.push(withTrailingSlash(options.source), parsed.url)
    const {code, stderr, aborted} = await runRsync(args, env, options.signal)
    if (aborted) throw new MbError(`push to ${parsed.display} aborted: ${scrub(reasonText(options.signal?.reason))}`, {code: 'PUSH_FAILED'})
    if (code !== 0) throw new MbError(`push to ${parsed.display} failed (${exitReason(code)})${stderrDetail(stderr, scrub)}`, {code: 'PUSH_FAILED'})
  } finally {
    await rm(dir, {recursive: true, force: true})
  }
}

/** Runs rsync under the watchdog; resolves with its exit code and the tail of its stderr. */
function runRsync(args: string[], env: NodeJS.ProcessEnv, signal: AbortSignal | undefined): Promise<{code: number | null; stderr: string; aborted: boolean}> {
  const child = spawnRsync('rsync', args, env)
  let stderr = ''
  let aborted = false
  child.stdout.resume()
  child.stderr.setEncoding('utf8')
  child.stderr.on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000)
  })
  const onAbort = () => {
    aborted = true
    killGroup(child)
  }
  signal?.addEventListener('abort', onAbort, {once: true})
  return new Promise((resolve) => {
    child.on('error', (error) => {
      stderr += (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'The rsync binary was not found. Install it (apt-get install rsync).' : error.message
    })
    child.on('close', (code) => {
      signal?.removeEventListener('abort', onAbort)
      child.stdin.destroy()
      resolve({code: code === 127 ? null : code, stderr: code === 127 ? 'The rsync binary was not found. Install it (apt-get install rsync).' : stderr, aborted})
    })
  })
}

function reasonText(reason: unknown): string {
  return reason instanceof Error ? reason.message : String(reason ?? 'aborted')
}

/** `exit 5: error starting client-server protocol …`, or `killed by SIGKILL`. */
function exitReason(code: number | null): string {
  if (code === null) return 'rsync did not run'
  const signal = watchdogSignal(code)
  if (signal) return `killed by ${signal}`
  return `exit ${code}${EXIT_REASONS[code] ? `: ${EXIT_REASONS[code]}` : ''}`
}

/** rsync's last three stderr lines (its own "rsync error:" summaries left out), redacted, after ': '. */
function stderrDetail(stderr: string, scrub: (text: string) => string): string {
  const detail = stderr
    .trim()
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !/^rsync error:/.test(l))
    .slice(-3)
    .join(' | ')
  return detail ? `: ${scrub(detail)}` : ''
}
