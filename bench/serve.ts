/**
 * Serve benchmark. Generates a dataset straight into PostgreSQL
 * (127.0.0.1:5432, database `mb_bench`): `--mirrors` mirrors in 30 countries on 6 continents,
 * `--files` files each held by 20-60% of the mirrors. Starts `mb serve` on it, drives it with
 * wrk (random paths, random X-Forwarded-For from a list, `--trusted-proxy 127.0.0.1/32`) at
 * `--connections` for `--seconds`, then measures a trivial node:http 302 server the same way
 * (the ceiling) and prints requests/s, p50/p99 latency, CPU per request (mb's, and that of
 * the bench database's PostgreSQL backends until the run's download counts are written), the ratio to the
 * ceiling and RSS. `--workers 1,2` (the default) measures one process against a one-process
 * ceiling, then `mb serve --workers 2` (node:cluster, PostgreSQL only) against a two-worker
 * ceiling; wrk runs on the same cores, so both ratios are printed as measured. For
 * reference it also measures the trivial server sending mb's header lines: what node:http
 * alone costs for mb's answer, with no selection.
 *
 *   npm run bench                                   # 100,000 files x 100 mirrors
 *   npm run bench -- --files 1000000 --mirrors 200  # also reports snapshot load time and RSS
 *   npm run bench -- --workers 2 --log-level warn   # variations (default --workers 1,2: both)
 *   npm run bench -- --no-ceiling --serve-arg=--no-stats   # extra `mb serve` flags
 *   npm run bench -- --workers 1 --stats-rounds 3   # counting on/off compared over 3 rounds (0: skip)
 *   npm run bench -- --rounds 3                     # 3 interleaved mb/ceiling pairs, medians in the verdict
 *
 * The statistics budgets (counting costs at most 10% of throughput, and PostgreSQL at most
 * 7.5 µs of CPU per request for it) are measured on the first `--workers` value: the run
 * with counting, then alternately `--no-stats` and counting again (`--stats-rounds` pairs),
 * medians compared.
 *
 * The origin tree holds the requested files (`--origin-files requested`, the default) or
 * every indexed file (`all`), as sparse files with the indexed size and mtime, so that the
 * check of the disk on each redirect (`serve.disk_check_seconds`, one stat per path per
 * second) stats real files. Its cost is measured like counting's: `--origin-check-rounds`
 * interleaved pairs of the check off (`disk_check_seconds: 0`) and on, medians compared.
 * `--paths` sets how many distinct paths wrk requests (the stat cache holds each for 1 s),
 * `--clients` from how many client addresses (default 5,000 paths and 2,000 addresses: the
 * mixed workload of issue 37; `npm run bench -- meta4` sets the same mix beside one hot file).
 *
 * The retry memory (`select.retry_window_seconds`, on by default: each redirect remembers
 * its client address and path, docs/selection.md "Retries") is measured the same way:
 * `--retry-rounds` interleaved pairs of `--retry-window 0` and the default, medians of the
 * CPU per redirect compared (target: at most 5% more). wrk's random (address, path) pairs
 * repeat now and then; those go to the next mirror, as a retry does.
 *
 * The dataset is as production's: every file hashed (md5, sha1, sha256, fresh for its
 * version, so redirects carry `Digest` and `Link: rel=describedby`), and the files of a
 * directory on one mirror set, 5% of them missing from 1-3 of its mirrors. It is reused when
 * the database already holds one of the same shape and version (`--fresh` regenerates).
 * `MB_BENCH_NODE_ARGS` passes Node flags to `mb serve` alone, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`
 * (NODE_OPTIONS refuses `--cpu-prof`, and would profile the bench and the ceiling too). Every process started is stopped by pid; the run is bounded by `--timeout`.
 */
import {createHash} from 'node:crypto'
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {closeSync, existsSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {connect} from 'node:net'
import {cpus, tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {ADMIN_URL, dbUrl, freePort, median, rng, runWrk, type WrkResult} from './lib.js'
import {postgresCpuSeconds, postgresCpuWhenIdle, upsertedRows} from './postgres-cpu.js'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const BIN = join(ROOT, 'bin', 'run.js')

/** 30 countries on 6 continents with rough coordinates. */
const COUNTRIES: Array<[string, string, number, number]> = [
  ['DE', 'EU', 51, 9],
  ['FR', 'EU', 46, 2],
  ['GB', 'EU', 54, -2],
  ['SE', 'EU', 62, 15],
  ['NL', 'EU', 52, 5],
  ['IT', 'EU', 42, 12],
  ['ES', 'EU', 40, -4],
  ['PL', 'EU', 52, 20],
  ['CZ', 'EU', 49, 15],
  ['AT', 'EU', 47, 13],
  ['CH', 'EU', 47, 8],
  ['FI', 'EU', 64, 26],
  ['US', 'NA', 38, -97],
  ['CA', 'NA', 60, -95],
  ['MX', 'NA', 23, -102],
  ['BR', 'SA', -10, -55],
  ['AR', 'SA', -34, -64],
  ['CL', 'SA', -30, -71],
  ['JP', 'AS', 36, 138],
  ['CN', 'AS', 35, 105],
  ['KR', 'AS', 37, 127],
  ['IN', 'AS', 20, 77],
  ['SG', 'AS', 1, 103],
  ['TW', 'AS', 23, 121],
  ['AU', 'OC', -27, 133],
  ['NZ', 'OC', -41, 174],
  ['ZA', 'AF', -29, 24],
  ['KE', 'AF', 1, 38],
  ['EG', 'AF', 27, 30],
  ['NG', 'AF', 10, 8],
]

export function filePath(i: number): string {
  return `pub/dir${i % 100}/sub${Math.floor(i / 100) % 100}/file-${i}.iso`
}

/** Directories of {@link filePath}: `pub/dirA/subB` is number A * 100 + B. */
const DIRECTORIES = 10_000

/** The directory (0 .. {@link DIRECTORIES} - 1) that {@link filePath} puts file `i` in. */
export function directoryOf(i: number): number {
  return (i % 100) * 100 + (Math.floor(i / 100) % 100)
}

/** Version of the generated data, part of the shape key: a dataset of an older version is regenerated. */
const DATASET_VERSION = 2

/** The `bench_meta` shape key: files, mirrors and what the rows carry (hashed, sets shared per directory). */
function datasetShape(files: number, mirrors: number): string {
  return `${files}x${mirrors} v${DATASET_VERSION} hashed dir-sets`
}

/**
 * One mirror set per directory, as on real mirrors (a mirror carries a directory or not):
 * each directory on 20-60% of the mirrors.
 */
export function directoryMirrorSets(ids: number[], random: () => number): number[][] {
  const sets: number[][] = []
  for (let d = 0; d < DIRECTORIES; d++) {
    const share = 0.2 + random() * 0.4
    sets.push(ids.filter(() => random() < share))
  }
  return sets
}

/**
 * A file's mirror set: its directory's, except for 5% of files, which 1-3 of the directory's
 * mirrors lack (a partial sync, or an old copy that no longer matches).
 */
export function fileMirrorSet(directory: number[], random: () => number): number[] {
  if (random() >= 0.05 || directory.length === 0) return directory
  const held = [...directory]
  const missing = 1 + Math.floor(random() * 3)
  for (let k = 0; k < missing && held.length > 0; k++) held.splice(Math.floor(random() * held.length), 1)
  return held
}

/**
 * The targets at scale (issue 19), for one process: 1,000,000 files x 100 mirrors serve in
 * under 400 MB RSS (MiB, after the wrk run) with p99 under 10 ms; 5,000,000 x 200 load the
 * snapshot in under 60 s and serve in under 2.5 GB. Other shapes have none.
 */
function scaleTargets(files: number, mirrors: number, rssMB: number, p99ms: number, loadSeconds: number | undefined): string[] {
  const load = loadSeconds === undefined ? 'not measured (--log-level info shows it)' : `${loadSeconds < 60 ? 'met' : 'MISSED'} (${loadSeconds} s)`
  if (files === 1_000_000 && mirrors === 100)
    return [`1,000,000 x 100: RSS < 400 MB ${rssMB < 400 ? 'met' : 'MISSED'} (${rssMB} MB); p99 < 10 ms ${p99ms < 10 ? 'met' : 'MISSED'} (${p99ms.toFixed(2)} ms)`]
  if (files >= 5_000_000) return [`${files} x ${mirrors}: snapshot load < 60 s ${load}; RSS < 2.5 GB ${rssMB < 2560 ? 'met' : 'MISSED'} (${rssMB} MB)`]
  return []
}

/** Creates (or reuses) the dataset. Returns seconds spent generating (0 when reused). */
export async function prepareDataset(name: string, files: number, mirrors: number, fresh: boolean): Promise<number> {
  const admin = new pg.Client({connectionString: ADMIN_URL})
  await admin.connect()
  const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount! > 0
  if (exists && !fresh) {
    const client = new pg.Client({connectionString: dbUrl(name)})
    await client.connect()
    try {
      const shape = await client.query('SELECT value FROM bench_meta WHERE key = $1', ['shape'])
      if (shape.rows[0]?.value === datasetShape(files, mirrors)) {
        await admin.end()
        // Bring a reused dataset up to the current schema.
        const migrate = spawnSync(process.execPath, [BIN, 'db', 'migrate', '--json'], {env: {...process.env, MB_DATABASE_URL: dbUrl(name)}, encoding: 'utf8'})
        if (migrate.status !== 0) throw new Error(`mb db migrate failed: ${migrate.stderr}`)
        return 0
      }
    } catch {
      /* no meta table: regenerate */
    } finally {
      await client.end()
    }
  }
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const started = performance.now()
  const migrate = spawnSync(process.execPath, [BIN, 'db', 'migrate', '--json'], {env: {...process.env, MB_DATABASE_URL: dbUrl(name)}, encoding: 'utf8'})
  if (migrate.status !== 0) throw new Error(`mb db migrate failed: ${migrate.stderr}`)
  const client = new pg.Client({connectionString: dbUrl(name)})
  await client.connect()
  try {
    const random = rng(files * 7919 + mirrors)
    const ids: number[] = []
    for (let m = 0; m < mirrors; m++) {
      const [cc, continent, lat, lon] = COUNTRIES[m % COUNTRIES.length]
      const score = [50, 100, 100, 150, 200][m % 5]
      const r = await client.query(`INSERT INTO mirror (identifier, http_url, https_url, country, continent, latitude, longitude, score) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`, [
        `m${m}.${cc.toLowerCase()}.example.net`,
        `http://m${m}.${cc.toLowerCase()}.example.net/pub/`,
        m % 3 === 0 ? null : `https://m${m}.${cc.toLowerCase()}.example.net/pub/`,
        cc,
        continent,
        lat + random() * 2,
        lon + random() * 2,
        score,
      ])
      ids.push(r.rows[0].id)
    }
    await client.query(`CREATE TABLE bench_meta (key text PRIMARY KEY, value text)`)
    const batch = 10_000
    const now = Math.floor(Date.now() / 1000)
    const directorySets = directoryMirrorSets(ids, random)
    for (let start = 0; start < files; start += batch) {
      const paths: string[] = []
      const sizes: number[] = []
      const mtimes: number[] = []
      const sets: string[] = []
      const md5: string[] = []
      const sha1: string[] = []
      const sha256: string[] = []
      for (let i = start; i < Math.min(files, start + batch); i++) {
        const path = filePath(i)
        paths.push(path)
        sizes.push(8192 + Math.floor(random() * 4e9))
        mtimes.push(now - Math.floor(random() * 3e7))
        sets.push(`{${fileMirrorSet(directorySets[directoryOf(i)], random).join(',')}}`)
        // Digests of the path: deterministic, distinct per file, and cheap to make.
        md5.push(createHash('md5').update(path).digest('hex'))
        sha1.push(createHash('sha1').update(path).digest('hex'))
        sha256.push(createHash('sha256').update(path).digest('hex'))
      }
      // hashed_size/hashed_mtime equal size/mtime: the hashes describe the indexed version,
      // so the snapshot serves them (src/lib/origin/freshness.ts).
      await client.query(
        `INSERT INTO file (path, size, mtime, mirrors, md5, sha1, sha256, hashed_size, hashed_mtime) SELECT p, s, t, m::smallint[], h1, h2, h3, s, t FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[]) AS u(p, s, t, m, h1, h2, h3)`,
        [paths, sizes, mtimes, sets, md5, sha1, sha256],
      )
      if ((start / batch) % 10 === 9) process.stdout.write(`  generated ${start + batch} files\n`)
    }
    await client.query('ANALYZE')
    await client.query(`INSERT INTO bench_meta VALUES ('shape', $1)`, [datasetShape(files, mirrors)])
  } finally {
    await client.end()
  }
  return (performance.now() - started) / 1000
}

/**
 * Creates the origin tree under `root`: sparse files with the indexed size and mtime, for
 * `paths` (origin-relative, no leading '/'), or for every indexed file when `paths` is
 * undefined. Returns the number of files created.
 */
export async function createOriginTree(url: string, root: string, paths: string[] | undefined): Promise<number> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  let created = 0
  const dirs = new Set<string>()
  const make = (path: string, size: number, mtime: number) => {
    const full = join(root, path)
    const dir = full.slice(0, full.lastIndexOf('/'))
    if (!dirs.has(dir)) {
      mkdirSync(dir, {recursive: true})
      dirs.add(dir)
    }
    const fd = openSync(full, 'w')
    ftruncateSync(fd, size)
    closeSync(fd)
    utimesSync(full, mtime, mtime)
    created++
  }
  try {
    if (paths !== undefined) {
      const rows = await client.query('SELECT path, size, mtime FROM file WHERE path = ANY($1::text[])', [paths])
      for (const r of rows.rows) make(r.path, Number(r.size), Number(r.mtime))
      return created
    }
    for (let lastId = 0; ; ) {
      const rows = await client.query('SELECT id, path, size, mtime FROM file WHERE id > $1 ORDER BY id LIMIT 20000', [lastId])
      for (const r of rows.rows) make(r.path, Number(r.size), Number(r.mtime))
      if (rows.rows.length < 20000) return created
      lastId = rows.rows.at(-1).id
    }
  } finally {
    await client.end()
  }
}

/** Random public-ish IPv4 addresses (GeoIP resolves most of them to a country). */
export function clientAddresses(count: number): string[] {
  const random = rng(42)
  const out: string[] = []
  while (out.length < count) {
    const a = 1 + Math.floor(random() * 222)
    if (a === 10 || a === 127 || a === 100 || a === 169 || a === 172 || a === 192) continue
    out.push(`${a}.${Math.floor(random() * 256)}.${Math.floor(random() * 256)}.${1 + Math.floor(random() * 254)}`)
  }
  return out
}

/**
 * wrk's request script: GETs of random `paths`, each from a random address of `ips` in
 * X-Forwarded-For. With `ports`, wrk's threads go to 127.0.0.1 on those ports in turn (thread
 * k to `ports[k mod n]`), so that one wrk spreads its load over several servers.
 */
export function luaScript(paths: string[], ips: string[], ports: number[] = []): string {
  const list = (xs: string[]) => xs.map((x) => `"${x}"`).join(',\n')
  return `local paths = {\n${list(paths)}\n}
local ips = {\n${list(ips)}\n}
local ports = {${ports.join(', ')}}
local np, ni, threads = #paths, #ips, 0
function setup(thread)
  thread:set("seed", math.random(1, 1e9))
  if #ports > 0 then
    thread.addr = wrk.lookup("127.0.0.1", tostring(ports[threads % #ports + 1]))[1]
    threads = threads + 1
  end
end
function init(args) math.randomseed(seed or os.time()) end
function request()
  return wrk.format("GET", paths[math.random(np)], {["X-Forwarded-For"] = ips[math.random(ni)]})
end
`
}

function rssMB(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024)
  } catch {
    return Number.NaN
  }
}

/** CPU seconds (user + system) used so far by a process and its children (for --workers). */
export function cpuSeconds(pid: number): number {
  const pids = [
    pid,
    ...spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], {encoding: 'utf8'})
      .stdout.split('\n')
      .map((l) => Number(l.trim()))
      .filter((n) => n > 0),
  ]
  let ticks = 0
  for (const p of pids) {
    try {
      const fields = readFileSync(`/proc/${p}/stat`, 'utf8')
        .replace(/^.*\) /, '')
        .split(' ')
      ticks += Number(fields[11]) + Number(fields[12]) // utime, stime (fields 14 and 15 of stat)
    } catch {
      /* gone */
    }
  }
  return ticks / 100 // USER_HZ
}

/** Sum of RSS over a process and its children (for --workers). */
export function treeRssMB(pid: number): number {
  const r = spawnSync('ps', ['-o', 'rss=', '--ppid', String(pid)], {encoding: 'utf8'})
  const children = r.stdout
    .split('\n')
    .filter(Boolean)
    .reduce((a, l) => a + Number(l.trim()) / 1024, 0)
  return Math.round(rssMB(pid) + children)
}

function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffer = ''
    let stderr = ''
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${pattern}; stderr: ${stderr}`)), timeoutMs)
    const onData = (d: Buffer) => {
      buffer += d.toString()
      for (const line of buffer.split('\n')) {
        if (pattern.test(line)) {
          clearTimeout(timer)
          child.stdout!.off('data', onData)
          child.stdout!.resume()
          return resolve(line)
        }
      }
      if (buffer.length > 1e6) buffer = buffer.slice(-1e5)
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', (d) => (stderr += d))
    child.on('exit', (code) => reject(new Error(`process exited with ${code} before ${pattern}; stderr: ${stderr}`)))
  })
}

export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end()
        resolve(true)
      })
      socket.on('error', () => resolve(false))
    })
    if (open) return
    if (Date.now() > deadline) throw new Error(`port ${port} did not open within ${timeoutMs / 1000} s`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

export async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((r) => child.once('exit', r))
  child.kill('SIGTERM')
  const t = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(t)
}

/** Issue 19: mb's CPU per redirect may be at most this many times the trivial server's. */
const CPU_RATIO_TARGET = 2.5

/**
 * The ceiling: a trivial node:http 302 server, as N node:cluster workers when argv[3] > 1 (run
 * from a file: cluster forks argv[1]). With argv[4] = 'full' it sends the same header lines
 * as mb's redirect (X-MB-*, Vary, five Link alternatives, the describedby Link): what
 * node:http costs for mb's answer, with no selection at all.
 */
export const CEILING_SERVER = `
const http = require('node:http')
const cluster = require('node:cluster')
const port = Number(process.argv[2])
const workers = Number(process.argv[3] || 1)
const full = process.argv[4] === 'full'
const links = []
for (let i = 1; i <= 5; i++) links.push('<http://m' + i + '.de.example.net/pub/pub/dir1/sub0/file-1.iso>; rel=duplicate; pri=' + i + '; geo=de')
if (workers > 1 && cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_NONE
  let up = 0
  for (let i = 0; i < workers; i++) cluster.fork().on('listening', () => { if (++up === workers) console.log('listening') })
  process.on('SIGTERM', () => { for (const w of Object.values(cluster.workers)) w.process.kill('SIGTERM'); process.exit(0) })
} else {
  http.createServer((req, res) => {
    if (full) res.writeHead(302, ['Location', 'http://mirror.example.net' + req.url, 'X-MB-Mirror', 'm1.de.example.net', 'X-MB-Realm', 'country', 'Cache-Control', 'private, no-store', 'Vary', 'X-Forwarded-For, X-Forwarded-Proto', 'Content-Length', '0', 'Link', links, 'Link', '<http://127.0.0.1:' + port + req.url + '.meta4>; rel=describedby; type="application/metalink4+xml"'])
    else res.writeHead(302, ['Location', 'http://mirror.example.net' + req.url, 'Cache-Control', 'private, no-store', 'Content-Length', '0'])
    res.end()
  }).listen(port, '127.0.0.1', () => { if (workers === 1) console.log('listening') })
}
`

/**
 * `empty`: empties the bench database's statistics (earlier benchmarks' counts mean nothing),
 * so the first run counts into a fresh day (inserts) and later runs into a day that already
 * has most keys (updates), as a redirector does after its first minutes. Otherwise vacuums
 * `stats_daily`.
 */
export async function vacuumStats(url: string, empty: boolean): Promise<void> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    await client.query(empty ? 'TRUNCATE stats_daily, stats_monthly' : 'VACUUM stats_daily')
  } finally {
    await client.end()
  }
}

/** Waits until `count` lines match `pattern` (one "listening" line per worker). */
export async function waitForLines(child: ChildProcess, pattern: RegExp, count: number, timeoutMs: number): Promise<string> {
  let first = ''
  let seen = 0
  const deadline = Date.now() + timeoutMs
  return new Promise((resolve, reject) => {
    let buffer = ''
    let stderr = ''
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${count} x ${pattern}; stderr: ${stderr}`)), Math.max(0, deadline - Date.now()))
    const onData = (d: Buffer) => {
      buffer += d.toString()
      const lines = buffer.split('\n')
      buffer = lines.pop() ?? ''
      for (const line of lines) {
        if (!pattern.test(line)) continue
        if (seen++ === 0) first = line
        if (seen === count) {
          clearTimeout(timer)
          child.stdout!.off('data', onData)
          child.stdout!.resume()
          return resolve(first)
        }
      }
    }
    child.stdout!.on('data', onData)
    child.stderr!.on('data', (d) => (stderr += d))
    child.on('exit', (code) => reject(new Error(`process exited with ${code} before ${pattern}; stderr: ${stderr}`)))
  })
}

/** Entry point: `npm run bench -- [--files N] [--mirrors N] [--seconds S] [--connections C] ...` */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      files: {type: 'string', default: '100000'},
      mirrors: {type: 'string', default: '100'},
      seconds: {type: 'string', default: '10'},
      connections: {type: 'string', default: '64'},
      threads: {type: 'string', default: '2'},
      workers: {type: 'string', default: '1,2'},
      'log-level': {type: 'string', default: 'info'},
      fresh: {type: 'boolean', default: false},
      'no-ceiling': {type: 'boolean', default: false},
      timeout: {type: 'string', default: '900'},
      database: {type: 'string', default: 'mb_bench'},
      'serve-arg': {type: 'string', multiple: true, default: []},
      'stats-rounds': {type: 'string', default: '3'},
      rounds: {type: 'string', default: '1'},
      paths: {type: 'string', default: '5000'},
      clients: {type: 'string', default: '2000'},
      'origin-files': {type: 'string', default: 'requested'},
      'origin-check-rounds': {type: 'string', default: '2'},
      'retry-rounds': {type: 'string', default: '2'},
    },
  })
  const files = Number(values.files)
  const mirrors = Number(values.mirrors)
  const seconds = Number(values.seconds)
  const connections = Number(values.connections)
  if (!(files > 0 && mirrors > 0 && mirrors < 32_000 && seconds > 0 && connections > 0)) throw new Error('--files, --mirrors, --seconds and --connections must be positive numbers (mirrors < 32000)')
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('wrk is not installed: apt-get install wrk')
  if (!existsSync(join(ROOT, 'dist', 'src', 'commands', 'serve.js'))) throw new Error('dist/ is missing: run `npm run build` first')

  const children: ChildProcess[] = []
  const work = mkdtempSync(join(tmpdir(), 'mb-bench-'))
  const abort = (why: string, signal: NodeJS.Signals) => {
    console.error(`bench: ${why}, stopping`)
    for (const c of children) c.kill(signal)
    rmSync(work, {recursive: true, force: true})
    process.exit(1)
  }
  const guard = setTimeout(() => abort(`--timeout ${values.timeout}s reached`, 'SIGKILL'), Number(values.timeout) * 1000)
  guard.unref()
  // Stopped by a signal, the servers started go with it (`mb serve --workers` stops its workers on SIGTERM).
  const onSignal = (signal: NodeJS.Signals) => abort(`${signal} received`, 'SIGTERM')
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    console.log(`dataset: ${files} files x ${mirrors} mirrors in ${COUNTRIES.length} countries on 6 continents (database ${values.database})`)
    const genSeconds = await prepareDataset(values.database, files, mirrors, values.fresh)
    console.log(genSeconds > 0 ? `  generated in ${genSeconds.toFixed(1)} s` : '  reused the existing dataset (--fresh regenerates)')

    const random = rng(7)
    const paths: string[] = []
    const pathCount = Number(values.paths)
    if (!(Number.isInteger(pathCount) && pathCount >= 1)) throw new Error('--paths takes a whole number >= 1')
    for (let i = 0; i < pathCount; i++) paths.push(`/${filePath(Math.floor(random() * files))}`)
    const script = join(work, 'requests.lua')
    const clients = Number(values.clients)
    if (!(Number.isInteger(clients) && clients >= 1)) throw new Error('--clients takes a whole number >= 1')
    writeFileSync(script, luaScript(paths, clientAddresses(clients)))
    const root = join(work, 'root')
    spawnSync('mkdir', ['-p', root])
    const originFiles = values['origin-files']!
    if (!['requested', 'all', 'none'].includes(originFiles)) throw new Error('--origin-files takes requested, all or none')
    if (originFiles !== 'none') {
      const t0 = performance.now()
      const created = await createOriginTree(dbUrl(values.database), root, originFiles === 'all' ? undefined : paths.map((p) => p.slice(1)))
      console.log(
        `origin tree: ${created} sparse files with the indexed size and mtime (${originFiles}) in ${((performance.now() - t0) / 1000).toFixed(1)} s; wrk requests ${pathCount} distinct paths`,
      )
    }
    const checkOff = join(work, 'disk-check-off.yaml')
    writeFileSync(checkOff, 'serve:\n  disk_check_seconds: 0\n')
    const checkRounds = Number(values['origin-check-rounds'])
    if (!(Number.isInteger(checkRounds) && checkRounds >= 0)) throw new Error('--origin-check-rounds takes a whole number (0 skips the comparison)')
    const retryRounds = Number(values['retry-rounds'])
    if (!(Number.isInteger(retryRounds) && retryRounds >= 0)) throw new Error('--retry-rounds takes a whole number (0 skips the comparison)')

    const ceilingFile = join(work, 'ceiling.cjs')
    writeFileSync(ceilingFile, CEILING_SERVER)
    const workerCounts = values.workers!.split(',').map((w) => Number(w.trim()))
    if (workerCounts.some((w) => !(Number.isInteger(w) && w >= 1))) throw new Error('--workers takes positive integers, e.g. 1 or 1,2')
    const verbose = ['info', 'debug', 'trace'].includes(values['log-level']!)
    const threads = Number(values.threads)
    const row = (name: string, r: WrkResult, cpuUs: number, rss?: number) =>
      `${name.padEnd(28)} ${r.rps.toFixed(0).padStart(8)} req/s   p50 ${r.p50ms.toFixed(2).padStart(6)} ms   p99 ${r.p99ms.toFixed(2).padStart(6)} ms   CPU ${cpuUs.toFixed(0).padStart(3)} us/req${rss === undefined ? '' : `   RSS ${rss} MB`}${r.non3xx ? `   non-3xx: ${r.non3xx}` : ''}${r.errors ? `   ${r.errors}` : ''}`
    const summary: string[] = []
    let snapshotSeconds: number | undefined
    const nodeArgs = (process.env.MB_BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean)
    /** Starts `mb serve --workers N` with `extra` flags, warms up, measures, stops it. */
    const measureServe = async (workers: number, extra: string[], announce: boolean) => {
      // Dead tuples of earlier runs' upserts are vacuumed first (where autovacuum is off, as
      // on this machine, they pile up and make every run's upserts dearer than the last).
      await vacuumStats(dbUrl(values.database), false)
      const port = await freePort()
      const serveStart = performance.now()
      const serve = spawn(
        process.execPath,
        [
          ...nodeArgs,
          BIN,
          'serve',
          '--root',
          root,
          '--listen',
          `127.0.0.1:${port}`,
          '--trusted-proxy',
          '127.0.0.1/32',
          '--log-level',
          values['log-level']!,
          '--workers',
          String(workers),
          ...(values['serve-arg'] as string[]),
          ...extra,
        ],
        {
          env: {...process.env, MB_DATABASE_URL: dbUrl(values.database), MB_CONFIG: undefined},
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      )
      children.push(serve)
      // One "listening" line per process that serves (every worker).
      let line = '{}'
      if (verbose) line = await waitForLines(serve, /"msg":"listening"/, workers, 300_000)
      else await waitForPort(port, 300_000)
      const ready = (performance.now() - serveStart) / 1000
      const info = JSON.parse(line)
      snapshotSeconds ??= info.snapshotSeconds
      if (announce && verbose)
        console.log(
          `mb serve --workers ${workers}: snapshot ${info.files} files, ${info.mirrors} mirrors loaded in ${info.snapshotSeconds} s (ready in ${ready.toFixed(1)} s), RSS after load ${info.rssMB} MB per process`,
        )
      else if (announce) console.log(`mb serve --workers ${workers}: ready in ${ready.toFixed(1)} s (--log-level ${values['log-level']} hides the snapshot figures)`)
      // Discard the log (events; one line per request at --log-level debug) while measuring.
      serve.stdout!.on('data', () => {})

      // Warm-up, then the measured run.
      const pg0 = await postgresCpuSeconds(ADMIN_URL, values.database!)
      const rows0 = await upsertedRows(dbUrl(values.database), 'stats_daily')
      const warm = runWrk(`http://127.0.0.1:${port}`, script, connections, 2, threads)
      const cpu0 = cpuSeconds(serve.pid!)
      const result = runWrk(`http://127.0.0.1:${port}`, script, connections, seconds, threads)
      const cpuUs = ((cpuSeconds(serve.pid!) - cpu0) / result.requests) * 1e6
      const rss = treeRssMB(serve.pid!)
      // PostgreSQL's CPU for these requests' counts, whenever the by-age flusher writes them
      // (each within 0.9 of the default 10 s interval, in a paced flush): from the warm-up
      // until PostgreSQL has been idle for 1.5 s, 9 s after the last request at the least,
      // per request of both runs. Not the measured window's share: a paced flush ends
      // after it as often as not.
      const pgSeconds = await postgresCpuWhenIdle(ADMIN_URL, values.database!, pg0, 9, 1.5)
      const requests = warm.requests + result.requests
      const rows = (await upsertedRows(dbUrl(values.database), 'stats_daily')) - rows0
      await stop(serve)
      return {result, cpuUs, pgCpuUs: (pgSeconds / requests) * 1e6, rss, rowsPerRequest: rows / requests, pgUsPerRow: rows > 0 ? (pgSeconds / rows) * 1e6 : 0}
    }
    const rounds = Number(values.rounds)
    if (!(Number.isInteger(rounds) && rounds >= 1)) throw new Error('--rounds takes a whole number >= 1 (interleaved mb/ceiling pairs)')
    const statsRounds = Number(values['stats-rounds'])
    if (!(Number.isInteger(statsRounds) && statsRounds >= 0)) throw new Error('--stats-rounds takes a whole number (0 skips the comparison)')
    await vacuumStats(dbUrl(values.database), true)
    // Load the machine for 5 s before measuring anything: here the first measurement of a
    // run often lagged the same configuration measured a minute later by 10-20%.
    {
      const wport = await freePort()
      const warm = spawn(process.execPath, [ceilingFile, String(wport), '2', 'plain'], {stdio: ['ignore', 'pipe', 'pipe']})
      children.push(warm)
      await waitForLine(warm, /listening/, 10_000)
      runWrk(`http://127.0.0.1:${wport}`, script, connections, 5, threads)
      await stop(warm)
    }
    for (const workers of workerCounts) {
      /** Measures the trivial server (`full`: with mb's header lines). */
      const measureTrivial = async (full: boolean) => {
        const cport = await freePort()
        const trivial = spawn(process.execPath, [ceilingFile, String(cport), String(workers), full ? 'full' : 'plain'], {stdio: ['ignore', 'pipe', 'pipe']})
        children.push(trivial)
        await waitForLine(trivial, /listening/, 10_000)
        runWrk(`http://127.0.0.1:${cport}`, script, connections, 2, threads)
        const c0 = cpuSeconds(trivial.pid!)
        const result = runWrk(`http://127.0.0.1:${cport}`, script, connections, seconds, threads)
        const cpuUs = ((cpuSeconds(trivial.pid!) - c0) / result.requests) * 1e6
        await stop(trivial)
        return {result, cpuUs}
      }
      // `--rounds` interleaved pairs (mb, then the ceiling): the machine drifts by 10-20%
      // within a minute, so one pair's ratio scatters; the median of several is steadier.
      const pairs: Array<{mb: Awaited<ReturnType<typeof measureServe>>; ceiling?: {result: WrkResult; cpuUs: number}}> = []
      for (let r = 0; r < rounds; r++) {
        const mb = await measureServe(workers, [], r === 0)
        pairs.push({mb, ceiling: values['no-ceiling'] ? undefined : await measureTrivial(false)})
      }
      const fullHeaders = values['no-ceiling'] ? undefined : await measureTrivial(true)
      const mbResult = pairs[0].mb.result
      const mbRss = pairs[0].mb.rss
      const mbPgCpuUs = pairs[0].mb.pgCpuUs

      const processes = workers === 1 ? '1 process' : `${workers} workers`
      console.log(`\nwrk, ${connections} connections, ${seconds} s, ${pathCount} random paths from ${clients} X-Forwarded-For addresses, ${processes}:`)
      const ratios: number[] = []
      const cpuRatios: number[] = []
      const of = rounds > 1 ? `, median of ${rounds}` : ''
      pairs.forEach(({mb, ceiling}, r) => {
        const tag = rounds > 1 ? ` #${r + 1}` : ''
        console.log(`${row(`mb serve (${processes})${tag}`, mb.result, mb.cpuUs, mb.rss)}   PostgreSQL CPU ${mb.pgCpuUs.toFixed(1)} us/req`)
        if (!ceiling) return
        console.log(row(`trivial 302 (${processes})${tag}`, ceiling.result, ceiling.cpuUs))
        ratios.push(mb.result.rps / ceiling.result.rps)
        cpuRatios.push(mb.cpuUs / ceiling.cpuUs)
        console.log(`ratio to the ${processes} ceiling${tag}: ${((mb.result.rps / ceiling.result.rps) * 100).toFixed(1)}% (by CPU per request: ${((ceiling.cpuUs / mb.cpuUs) * 100).toFixed(1)}%)`)
      })
      if (fullHeaders) console.log(row(`trivial 302, mb's headers`, fullHeaders.result, fullHeaders.cpuUs))
      if (ratios.length > 0) console.log(`machine load average: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${cpus().length} cores (wrk shares them)`)
      if (cpuRatios.length > 0) {
        // Issue 19: mb's own CPU per redirect (PostgreSQL's is apart) against the trivial
        // server's, the median of the interleaved pairs' ratios.
        const cpuRatio = median(cpuRatios)
        const verdict = `mb CPU per redirect / ceiling CPU per redirect = ${cpuRatio.toFixed(2)} (target <= ${CPU_RATIO_TARGET}): ${cpuRatio <= CPU_RATIO_TARGET ? 'PASS' : 'FAIL'}`
        const detail = `${processes}, ${median(pairs.map((p) => p.mb.cpuUs)).toFixed(1)} vs ${median(pairs.flatMap((p) => (p.ceiling ? [p.ceiling.cpuUs] : []))).toFixed(1)} us${of}`
        console.log(`${verdict} (${detail})`)
        summary.push(`${verdict} (${detail})`)
      }
      const rps = median(pairs.map((p) => p.mb.result.rps))
      const p99 = median(pairs.map((p) => p.mb.result.p99ms))
      const ratio = ratios.length > 0 ? median(ratios) : undefined
      summary.push(
        `${processes}: >= 15000 req/s ${rps >= 15_000 ? 'met' : 'MISSED'} (${rps.toFixed(0)}${of}); p99 < 10 ms ${p99 < 10 ? 'met' : 'MISSED'} (${p99.toFixed(2)}${of})` +
          `${ratio === undefined ? '' : `; >= 50% of the ${processes} ceiling ${ratio >= 0.5 ? 'met' : 'MISSED'} (${(ratio * 100).toFixed(1)}%${of})`}; RSS < 1.5 GB ${mbRss < 1536 ? 'met' : 'MISSED'} (${mbRss} MB)`,
      )
      if (workers === 1) summary.push(...scaleTargets(files, mirrors, mbRss, p99, snapshotSeconds))

      // What counting downloads costs. Alternating runs with and without --no-stats
      // (the machine's speed drifts over a minute); medians of each side.
      if (statsRounds > 0 && workers === workerCounts[0]) {
        const on = [mbResult.rps]
        const off: number[] = []
        const pgOn = [mbPgCpuUs]
        const pgOff: number[] = []
        const perRow = [pairs[0].mb.pgUsPerRow]
        const rowsPerRequest = [pairs[0].mb.rowsPerRequest]
        for (let r = 0; r < statsRounds; r++) {
          const without = await measureServe(workers, ['--no-stats'], false)
          off.push(without.result.rps)
          pgOff.push(without.pgCpuUs)
          if (r < statsRounds - 1) {
            const again = await measureServe(workers, [], false)
            on.push(again.result.rps)
            pgOn.push(again.pgCpuUs)
            perRow.push(again.pgUsPerRow)
            rowsPerRequest.push(again.rowsPerRequest)
          }
        }
        const drop = (1 - median(on) / median(off)) * 100
        console.log(`counting downloads (${processes}): on ${on.map((x) => x.toFixed(0)).join(', ')} req/s, off ${off.map((x) => x.toFixed(0)).join(', ')} req/s; median drop ${drop.toFixed(1)}%`)
        const pgCounting = median(pgOn) - median(pgOff)
        console.log(`  PostgreSQL CPU per request: on ${median(pgOn).toFixed(1)} us, off ${median(pgOff).toFixed(1)} us (medians; the backends of ${values.database})`)
        console.log(
          `  rows upserted per request ${median(rowsPerRequest).toFixed(2)}, PostgreSQL CPU per row ${median(perRow).toFixed(1)} us (medians; more requests per second fold more of them into one row)`,
        )
        console.log(`PostgreSQL CPU per request for counting: ${pgCounting.toFixed(1)} µs (target <= 7.5): ${pgCounting <= 7.5 ? 'PASS' : 'FAIL'}`)
        console.log(
          '  (uniformly random paths and clients: most requests in a flush interval bring a new day x path x mirror x country key, near the worst case; PostgreSQL upserts them on the same 2 cores)',
        )
        summary.push(
          `${processes}: counting costs <= 10% of throughput ${drop <= 10 ? 'met' : 'MISSED'} (${drop.toFixed(1)}%); PostgreSQL CPU for counting <= 7.5 us/request ${pgCounting <= 7.5 ? 'met' : 'MISSED'} (${pgCounting.toFixed(1)})`,
        )
      }

      // What checking the disk on each redirect costs (a stat per path at most once a second):
      // alternating runs with the check off and on, medians of each side, CPU per redirect too.
      if (checkRounds > 0 && workers === workerCounts[0]) {
        const on: Array<Awaited<ReturnType<typeof measureServe>>> = []
        const off: Array<Awaited<ReturnType<typeof measureServe>>> = []
        for (let r = 0; r < checkRounds; r++) {
          off.push(await measureServe(workers, ['--config', checkOff], false))
          on.push(await measureServe(workers, [], false))
        }
        const rpsOn = median(on.map((m) => m.result.rps))
        const rpsOff = median(off.map((m) => m.result.rps))
        const drop = (1 - rpsOn / rpsOff) * 100
        const cpuOn = median(on.map((m) => m.cpuUs))
        const cpuOff = median(off.map((m) => m.cpuUs))
        const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
        console.log(
          `origin check (${processes}, ${pathCount} paths, origin files: ${originFiles}): off ${off.map((m) => m.result.rps.toFixed(0)).join(', ')} req/s, on ${on.map((m) => m.result.rps.toFixed(0)).join(', ')} req/s (interleaved off/on); median cost ${drop.toFixed(1)}% of throughput, CPU ${cpuOff.toFixed(1)} -> ${cpuOn.toFixed(1)} us/redirect (medians); load average ${load}`,
        )
        summary.push(`${processes}: the origin check costs <= 5% of throughput ${drop <= 5 ? 'met' : 'MISSED'} (${drop.toFixed(1)}%, median of ${checkRounds} pairs)`)
      }

      // What remembering answers for retries costs: interleaved pairs without and with it.
      if (retryRounds > 0 && workers === workerCounts[0]) {
        const on: Array<Awaited<ReturnType<typeof measureServe>>> = []
        const off: Array<Awaited<ReturnType<typeof measureServe>>> = []
        for (let r = 0; r < retryRounds; r++) {
          off.push(await measureServe(workers, ['--retry-window', '0'], false))
          on.push(await measureServe(workers, [], false))
        }
        const cpuOn = median(on.map((m) => m.cpuUs))
        const cpuOff = median(off.map((m) => m.cpuUs))
        const cost = (cpuOn / cpuOff - 1) * 100
        const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
        console.log(
          `retry memory (${processes}): off ${off.map((m) => m.cpuUs.toFixed(1)).join(', ')} us/redirect, on ${on.map((m) => m.cpuUs.toFixed(1)).join(', ')} (interleaved off/on); median cost ${cost.toFixed(1)}% of a redirect's CPU; load average ${load}`,
        )
        summary.push(`${processes}: the retry memory costs <= 5% of a redirect ${cost <= 5 ? 'met' : 'MISSED'} (${cost.toFixed(1)}% CPU per redirect, median of ${retryRounds} pairs)`)
      }
    }
    console.log('\ntargets:')
    for (const line of summary) console.log(`  ${line}`)
    console.log(`  snapshot load < 30 s ${snapshotSeconds === undefined ? 'not measured' : snapshotSeconds < 30 ? `met (${snapshotSeconds} s)` : `MISSED (${snapshotSeconds} s)`}`)
  } finally {
    for (const c of children) await stop(c)
    rmSync(work, {recursive: true, force: true})
    clearTimeout(guard)
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
