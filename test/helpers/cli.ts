/**
 * Runs the compiled CLI (`bin/run.js`, from `npm run build`) as a child process, the way an
 * operator or cron would.
 */
import {spawn, spawnSync} from 'node:child_process'
import {fileURLToPath} from 'node:url'

export const BIN = fileURLToPath(new URL('../../bin/run.js', import.meta.url))

/** An XDG_CONFIG_HOME without an `mb/mb.yaml`, so that no user config file leaks into a test. */
export const NO_CONFIG_HOME = '/nonexistent/mb-test-config-home'

/**
 * `MB_CONFIG` for every `mb` a test runs: read no config file, neither the user's nor
 * `/etc/mb/mb.yaml` (a test on a production host must not run against production). A test
 * that wants a file names it with `--config` or its own `MB_CONFIG`.
 */
export const NO_CONFIG = 'none'

/**
 * The environment of an `mb` child: this process's, then `extra` (an undefined value removes
 * the variable), made hermetic: `MB_CONFIG` is {@link NO_CONFIG} unless `extra` sets it (to a
 * file, or to undefined for a test of the config search itself), and `XDG_CONFIG_HOME` is
 * {@link NO_CONFIG_HOME} unless `extra` sets it.
 */
export function hermeticEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...process.env, ...extra}
  for (const [k, v] of Object.entries(extra)) if (v === undefined) delete env[k]
  if (!('MB_CONFIG' in extra)) env.MB_CONFIG = NO_CONFIG
  if (!('XDG_CONFIG_HOME' in extra)) env.XDG_CONFIG_HOME = NO_CONFIG_HOME
  return env
}

export interface CliResult {
  code: number
  stdout: string
  stderr: string
  /** stdout parsed as JSON (throws with the output when it is not JSON). */
  json<T = any>(): T
}

/** Runs `mb ARGS…` with extra environment (`bin`: another mb's entry script, default {@link BIN}); never throws on a non-zero exit. */
export async function mb(args: string[], options: {env?: Record<string, string | undefined>; input?: string; cwd?: string; timeoutMs?: number; bin?: string} = {}): Promise<CliResult> {
  const env = hermeticEnv(options.env)
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [options.bin ?? BIN, ...args], {env, cwd: options.cwd, stdio: ['pipe', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs ?? 120_000)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({
        code: code ?? -1,
        stdout,
        stderr,
        json() {
          try {
            return JSON.parse(stdout)
          } catch {
            throw new Error(`mb ${args.join(' ')} did not print JSON (exit ${code}).\nstdout: ${stdout}\nstderr: ${stderr}`)
          }
        },
      })
    })
    child.stdin.end(options.input ?? '')
  })
}

/** True when `name` is on PATH. */
function hasBinary(name: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${name}`]).status === 0
}

/**
 * Skips the current test or suite when a system binary is missing, except under CI=true,
 * where a missing binary is a failure (`.ci/run` must install it).
 */
export function requireBinary(ctx: Mocha.Context, name: string, debianPackage: string): void {
  if (hasBinary(name)) return
  if (process.env.CI === 'true') throw new Error(`${name} is missing under CI: .ci/run must install the Debian package ${debianPackage}`)
  console.warn(`    (skipped: ${name} not found; install it with: apt-get install ${debianPackage})`)
  ctx.skip()
}

/**
 * Skips the current test or suite when it does not run as root (`why`: what root is needed
 * for), except under CI=true, where `.ci/run` runs as root and this is a failure.
 */
export function requireRoot(ctx: Mocha.Context, why: string): void {
  if (process.getuid?.() === 0) return
  if (process.env.CI === 'true') throw new Error(`this test runs as root under CI (${why})`)
  console.warn(`    (skipped: needs root, ${why})`)
  ctx.skip()
}
