/**
 * Embedded-store benchmark: what a small site pays for the embedded PGlite store, the default
 * when no database is configured. Three figures, each the median of `--rounds` runs of the
 * built CLI (`npm run build` first), every run on a new temporary data directory:
 * - the first `mb db migrate` (creating the store and applying every migration), wall time;
 * - the resident memory of `mb serve` on that store with a 4-file origin tree and the default
 *   GeoIP databases, read from `/proc/PID/status` after the first request is answered;
 * - the same `mb serve`'s start, from spawn to its `listening` line.
 *
 *   npm run bench -- embedded               # 3 rounds
 *   npm run bench -- embedded --rounds 5
 */
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import {freePort, median, verdict} from './lib.js'
import {BIN, stop, waitForLines} from './serve.js'

/** Targets of the embedded store for a small site (issue "Operations, round two", item 7). */
const TARGETS = {migrateSeconds: 10, serveRssMB: 200}

/** The environment of every run: no config file, the store in `dataDir`. */
function benchEnv(dataDir: string): NodeJS.ProcessEnv {
  return {...process.env, MB_CONFIG: 'none', MB_DATA_DIR: dataDir, MB_DATABASE_URL: undefined}
}

/** Resident memory of `pid` in MB. */
function rssMB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024
}

/** One round: a new store, its first migrate, then `mb serve` on it. */
async function round(work: string): Promise<{migrateSeconds: number; serveRssMB: number; startSeconds: number}> {
  const dataDir = join(work, 'store')
  const root = join(work, 'root')
  mkdirSync(root)
  for (let i = 1; i <= 4; i++) writeFileSync(join(root, `file-${i}.txt`), `file ${i}\n`)
  const t0 = performance.now()
  const migrate = spawnSync(process.execPath, [BIN, 'db', 'migrate'], {env: benchEnv(dataDir), encoding: 'utf8'})
  const migrateSeconds = (performance.now() - t0) / 1000
  if (migrate.status !== 0) throw new Error(`mb db migrate failed: ${migrate.stderr}`)
  const index = spawnSync(process.execPath, [BIN, 'index', '--root', root], {env: benchEnv(dataDir), encoding: 'utf8'})
  if (index.status !== 0) throw new Error(`mb index failed: ${index.stderr}`)
  const port = await freePort()
  const t1 = performance.now()
  let child: ChildProcess | undefined
  try {
    child = spawn(process.execPath, [BIN, 'serve', '--root', root, '--listen', `127.0.0.1:${port}`], {env: benchEnv(dataDir), stdio: ['ignore', 'pipe', 'pipe']})
    await waitForLines(child, /"msg":"listening"/, 1, 120_000)
    const startSeconds = (performance.now() - t1) / 1000
    const answer = await fetch(`http://127.0.0.1:${port}/file-1.txt`)
    if (answer.status !== 200) throw new Error(`GET /file-1.txt answered ${answer.status}`)
    await answer.arrayBuffer()
    return {migrateSeconds, serveRssMB: rssMB(child.pid!), startSeconds}
  } finally {
    await stop(child)
  }
}

/** Entry point (bench/run.ts). */
export async function main(args: string[]): Promise<void> {
  const {values} = parseArgs({args, options: {rounds: {type: 'string', default: '3'}}})
  const rounds = Number(values.rounds)
  const results = []
  for (let i = 0; i < rounds; i++) {
    const work = mkdtempSync(join(tmpdir(), 'mb-bench-embedded-'))
    try {
      results.push(await round(work))
    } finally {
      rmSync(work, {recursive: true, force: true})
    }
    const r = results.at(-1)!
    console.log(`round ${i + 1}: first migrate ${r.migrateSeconds.toFixed(2)} s, serve RSS ${r.serveRssMB.toFixed(0)} MB, serve start ${r.startSeconds.toFixed(2)} s`)
  }
  console.log(`embedded store, small site (medians of ${rounds} rounds):`)
  verdict('first mb db migrate, new store', median(results.map((r) => r.migrateSeconds)), TARGETS.migrateSeconds, 's', 'lower')
  verdict('mb serve RSS, 4 files, default GeoIP', median(results.map((r) => r.serveRssMB)), TARGETS.serveRssMB, 'MB', 'lower')
  console.log(`  mb serve start (spawn to listening): ${median(results.map((r) => r.startSeconds)).toFixed(2)} s`)
}
