/**
 * Embedded-store benchmark: what a small site pays for the embedded PGlite store, the default
 * when no database is configured. These figures, each the median of `--rounds` runs of the
 * built CLI (`npm run build` first), every run on a new temporary data directory:
 * - the first `mb db migrate` (creating the store and applying every migration), wall time;
 * - the resident memory of `mb serve` on that store with a 4-file origin tree and the default
 *   GeoIP databases, read from `/proc/PID/status` after the first request is answered and
 *   again after `--requests` more, each from another client address (`X-Forwarded-For` from a
 *   trusted 127.0.0.1, so that every request walks the GeoIP files anew); the verdict is on
 *   the larger. `mb serve` runs as the shipped unit runs it: with the unit's `NODE_OPTIONS`
 *   (`contrib/systemd/mb-serve.service`, V8's young generation);
 * - the same `mb serve`'s start, from spawn to its `listening` line;
 * - `mb serve` started without a store (it creates one, in a child process), from spawn to its
 *   `listening` line against the same 10 s as the first migrate, and its resident memory as
 *   above.
 *
 *   npm run bench -- embedded               # 3 rounds
 *   npm run bench -- embedded --rounds 5 --requests 10000
 */
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import {freePort, median, verdict} from './lib.js'
import {BIN, stop, waitForLines} from './serve.js'

/** Targets of the embedded store for a small site (issues 38 item 7 and 46 item 4). */
const TARGETS = {migrateSeconds: 10, serveRssMB: 200}

/** The environment of every run: no config file, the store in `dataDir`. */
function benchEnv(dataDir: string): NodeJS.ProcessEnv {
  return {...process.env, MB_CONFIG: 'none', MB_DATA_DIR: dataDir, MB_DATABASE_URL: undefined, MB_TRUSTED_PROXIES: '127.0.0.1/32'}
}

/** The `NODE_OPTIONS` that the shipped `mb-serve.service` sets, or '' when it sets none. */
function unitNodeOptions(): string {
  const unit = readFileSync(new URL('../contrib/systemd/mb-serve.service', import.meta.url), 'utf8')
  return /^Environment=NODE_OPTIONS=(.*)$/m.exec(unit)?.[1].trim() ?? ''
}

/** Resident memory of `pid` in MB. */
function rssMB(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024
}

/** The `i`th of a spread of public IPv4 and IPv6 client addresses (a reproducible sequence). */
function clientAddress(i: number): string {
  const x = Math.imul(i + 1, 2654435761) >>> 0
  if (i % 4 === 3) return `2a0${(x >>> 28) % 10}:${(x >>> 12) & 0xffff}:${x & 0xfff}::${i.toString(16)}`
  return `${1 + ((x >>> 24) % 223)}.${(x >>> 16) & 255}.${(x >>> 8) & 255}.${x & 255}`
}

/** Sends `count` requests for `/file-1.txt`, 8 at a time, each from another client address. */
async function requests(port: number, count: number): Promise<void> {
  let next = 0
  const loop = async () => {
    for (let i = next++; i < count; i = next++) {
      const answer = await fetch(`http://127.0.0.1:${port}/file-1.txt`, {headers: {'x-forwarded-for': clientAddress(i)}, redirect: 'manual'})
      await answer.arrayBuffer()
      if (answer.status >= 500) throw new Error(`GET /file-1.txt answered ${answer.status}`)
    }
  }
  await Promise.all(Array.from({length: 8}, loop))
}

/** What one `mb serve` run measured: seconds from spawn to its `listening` line, RSS in MB. */
interface Served {
  startSeconds: number
  /** RSS after the first request, and the larger of that and the RSS after `count` more. */
  startRssMB: number
  serveRssMB: number
}

/** Runs `mb serve` on `dataDir` (created by it when missing), as the shipped unit runs it. */
async function serveOnce(dataDir: string, root: string, count: number): Promise<Served> {
  const port = await freePort()
  const t1 = performance.now()
  let child: ChildProcess | undefined
  try {
    child = spawn(process.execPath, [BIN, 'serve', '--root', root, '--listen', `127.0.0.1:${port}`], {
      env: {...benchEnv(dataDir), NODE_OPTIONS: unitNodeOptions()},
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    await waitForLines(child, /"msg":"listening"/, 1, 120_000)
    const startSeconds = (performance.now() - t1) / 1000
    const answer = await fetch(`http://127.0.0.1:${port}/file-1.txt`, {redirect: 'manual'})
    if (answer.status >= 500) throw new Error(`GET /file-1.txt answered ${answer.status}`)
    await answer.arrayBuffer()
    const startRssMB = rssMB(child.pid!)
    await requests(port, count)
    return {startSeconds, startRssMB, serveRssMB: Math.max(startRssMB, rssMB(child.pid!))}
  } finally {
    await stop(child)
  }
}

interface Round extends Served {
  migrateSeconds: number
  /** `mb serve` started without a store: it creates the store, then serves. */
  fresh: Served
}

/** One round: a new store, its first migrate, then `mb serve` on it; then `mb serve` creating a store. */
async function round(work: string, count: number): Promise<Round> {
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
  const served = await serveOnce(dataDir, root, count)
  // A store never indexed: the first request is the origin's redirect, RSS all the same.
  const fresh = await serveOnce(join(work, 'fresh-store'), root, count)
  return {migrateSeconds, ...served, fresh}
}

/** Entry point (bench/run.ts). */
export async function main(args: string[]): Promise<void> {
  const {values} = parseArgs({args, options: {rounds: {type: 'string', default: '3'}, requests: {type: 'string', default: '3000'}}})
  const rounds = Number(values.rounds)
  const count = Number(values.requests)
  const results = []
  for (let i = 0; i < rounds; i++) {
    const work = mkdtempSync(join(tmpdir(), 'mb-bench-embedded-'))
    try {
      results.push(await round(work, count))
    } finally {
      rmSync(work, {recursive: true, force: true})
    }
    const r = results.at(-1)!
    console.log(
      `round ${i + 1}: first migrate ${r.migrateSeconds.toFixed(2)} s, serve RSS ${r.startRssMB.toFixed(0)} MB after start, ${r.serveRssMB.toFixed(0)} MB after ${count} requests, serve start ${r.startSeconds.toFixed(2)} s; on a new store: start ${r.fresh.startSeconds.toFixed(2)} s, RSS ${r.fresh.startRssMB.toFixed(0)} / ${r.fresh.serveRssMB.toFixed(0)} MB`,
    )
  }
  console.log(`embedded store, small site (medians of ${rounds} rounds; mb serve with NODE_OPTIONS=${unitNodeOptions() || '(none)'} as in mb-serve.service):`)
  verdict('first mb db migrate, new store', median(results.map((r) => r.migrateSeconds)), TARGETS.migrateSeconds, 's', 'lower')
  verdict(`mb serve RSS, default GeoIP, ${count} req`, median(results.map((r) => r.serveRssMB)), TARGETS.serveRssMB, 'MB', 'lower')
  verdict('mb serve creating its store, to listening', median(results.map((r) => r.fresh.startSeconds)), TARGETS.migrateSeconds, 's', 'lower')
  verdict(`same, RSS after ${count} req`, median(results.map((r) => r.fresh.serveRssMB)), TARGETS.serveRssMB, 'MB', 'lower')
  console.log(`  mb serve start (spawn to listening): ${median(results.map((r) => r.startSeconds)).toFixed(2)} s`)
}
