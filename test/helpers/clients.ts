/**
 * The real download clients of the end-to-end tests (aria2c, wget2, zsync, transmission-cli,
 * dnf, zypper, curl…), run one way: output collected, a time limit, and an exit code that
 * never throws, so that a test can print the client's own log when it fails.
 */
import {spawn} from 'node:child_process'

/** What a client run left: its exit code (-1 when killed at the limit or not started) and its stdout and stderr, interleaved. */
export interface ClientRun {
  code: number
  log: string
}

/**
 * Runs `command args`, in `options.cwd`; a run still going after `options.limitMs` (default
 * 120 s) is killed with SIGKILL and reported with code -1, as is a command that cannot start
 * (its error is appended to the log). Never rejects.
 */
export function runClient(command: string, args: string[], options: {cwd?: string; limitMs?: number; env?: NodeJS.ProcessEnv} = {}): Promise<ClientRun> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {cwd: options.cwd, env: options.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe']})
    let log = ''
    child.stdout.on('data', (d) => (log += d))
    child.stderr.on('data', (d) => (log += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), options.limitMs ?? 120_000)
    child.on('error', (e) => {
      clearTimeout(timer)
      resolve({code: -1, log: log + String(e)})
    })
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({code: code ?? -1, log})
    })
  })
}

/**
 * aria2c with no download option: only what keeps a run hermetic (no user config) and its log
 * readable on stdout at `level` (aria2c's --log-level).
 */
export function aria2Plain(level: 'info' | 'debug' = 'info'): string[] {
  return ['--no-conf', '--log=-', `--log-level=${level}`, '--console-log-level=warn', '--summary-interval=0']
}

/** aria2c as the tests run it repeatedly into one directory: {@link aria2Plain}, overwriting, no renaming or preallocation, quick retries. */
export function aria2Repeatable(level: 'info' | 'debug' = 'info'): string[] {
  return [...aria2Plain(level), '--allow-overwrite=true', '--auto-file-renaming=false', '--file-allocation=none', '--retry-wait=0', '--max-tries=20', '--connect-timeout=5']
}
