/**
 * What the upgrade tests share (test/e2e/upgrade-*.test.ts): a second install of this tree
 * under another version, the pids and times in `mb serve`'s log lines, and the commands of a
 * shell block of docs/operations.md, which a test plays and checks first so that the page and
 * the test cannot part.
 */
import {cpSync, existsSync, readFileSync, symlinkSync, writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {BIN} from './cli.js'

/** The version in this tree's package.json (what `Server: mb/VERSION` says). */
export function installedVersion(): string {
  return JSON.parse(readFileSync(join(dirname(BIN), '..', 'package.json'), 'utf8')).version as string
}

/**
 * A copy of this tree's install (bin, dist, migrations, package.json, the oclif manifest;
 * node_modules linked) in `dir`, with `version` in its package.json and manifest when given:
 * "the new release", which answers with `Server: mb/VERSION`.
 */
export function copyInstall(dir: string, version?: string): void {
  const home = join(dirname(BIN), '..')
  for (const part of ['bin', 'dist', 'migrations', 'package.json', 'oclif.manifest.json']) if (existsSync(join(home, part))) cpSync(join(home, part), join(dir, part), {recursive: true})
  symlinkSync(join(home, 'node_modules'), join(dir, 'node_modules'))
  if (version === undefined) return
  const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  writeFileSync(join(dir, 'package.json'), JSON.stringify({...pkg, version}, null, 2))
  const manifest = join(dir, 'oclif.manifest.json')
  if (existsSync(manifest)) writeFileSync(manifest, JSON.stringify({...JSON.parse(readFileSync(manifest, 'utf8')), version}))
}

/** The JSON log lines of `output` (mb's pino lines; other lines skipped) whose `msg` is `msg`. */
function logLines(output: string, msg: string): {pid: number; time: string}[] {
  return output
    .split('\n')
    .filter((line) => line.includes(`"msg":"${msg}"`))
    .map((line) => JSON.parse(line))
}

/** The pids of the processes that logged `listening`, in order. */
export function listeningPids(output: string): number[] {
  return logLines(output, 'listening').map((line) => Number(line.pid))
}

/** The pids of the `--workers` primaries that started, in order. */
export function primaryPids(output: string): number[] {
  return logLines(output, 'primary started workers').map((line) => Number(line.pid))
}

/**
 * Milliseconds from the first generation's last `stopped` line to the second one's first
 * `listening` line (`perGeneration` processes listen in each): how long the port had no
 * process accepting; NaN when a line is missing.
 */
export function gapMs(output: string, perGeneration: number): number {
  const stopped = logLines(output, 'stopped')[perGeneration - 1]
  const listening = logLines(output, 'listening')[perGeneration]
  return stopped && listening ? Date.parse(listening.time) - Date.parse(stopped.time) : Number.NaN
}

/**
 * The commands of the `index`th (from 0) ```sh block after the heading line `heading` (e.g.
 * `### Upgrade`) of docs/operations.md: comments and blank lines dropped, each line trimmed.
 * @throws Error when the page has no such block
 */
export function documentedCommands(heading: string, index = 0): string[] {
  const page = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8')
  const section = page.slice(page.indexOf(`\n${heading}\n`))
  const block = [...section.matchAll(/^```sh\n([\s\S]*?)^```$/gm)][index]?.[1]
  if (block === undefined) throw new Error(`docs/operations.md has no shell block ${index} under ${heading}`)
  return block
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter((line) => line !== '')
}
