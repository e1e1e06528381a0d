/**
 * `npm run bench -- curves [--quick] [--only redirect,snapshot,scan,meta4] ...`: how each cost
 * grows with its work, on PostgreSQL at 127.0.0.1:5432 (`MB_BENCH_ADMIN_URL`).
 *
 * - redirect: mb's CPU per redirect against the mirrors holding the requested file (10, 40,
 *   100, 200 on average: datasets of 100,000 files on 25, 100, 250, 500 mirrors, each file held
 *   by 20-60% of them), beside the trivial node:http 302 server's CPU per request (the ceiling);
 * - snapshot: `mb serve`'s snapshot load time and RSS (after 2 s of serving) against files
 *   (100,000, 1,000,000, 5,000,000 on 100 mirrors);
 * - scan: reconciling a generated listing (bench/scan.ts) of 100,000, 300,000, 1,000,000 entries,
 *   first scan and rescan;
 * - meta4: `.meta4` responses/s against file size (1 MiB to 16 GiB, 40 mirrors, synthetic
 *   hashes and pieces), as a ratio to the trivial server's rate measured in the same round.
 *
 * Each curve gets its least-squares log-log slope and a verdict (bench/growth.ts), a table in
 * docs/benchmarks-curves.md and a chart in docs/curves/ID.svg (`--out DIR` moves both).
 * Throughput figures are medians of `--rounds` interleaved rounds (mb, then the ceiling).
 * Datasets live in databases `mb_bench_curves_<files>x<mirrors>` and are reused when present
 * (`--fresh` regenerates); scan databases `mb_bench_curves_scan_<n>` are created and dropped.
 * `--quick` uses small sizes and short runs, for a smoke test. The run is bounded by
 * `--timeout` seconds; every process started is stopped by pid.
 */
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import http from 'node:http'
import {cpus, tmpdir} from 'node:os'
import {join, relative, resolve} from 'node:path'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {openDatabase} from '../src/lib/db/index.js'
import {pieceSizeFor} from '../src/lib/origin/hash.js'
import {classifyGrowth, type Growth, logLogSlope, type Point, renderChartSvg, segmentSlopes} from './growth.js'
import {ADMIN_URL, dbUrl, freePort, median, rng, runWrk, type Verdict, verdict, type WrkResult} from './lib.js'
import {cpuSince, postgresCpuSeconds} from './postgres-cpu.js'
import {generatedListing, scratchDatabase} from './scan.js'
import {BIN, CEILING_SERVER, clientAddresses, cpuSeconds, createOriginTree, filePath, luaScript, prepareDataset, ROOT, stop, treeRssMB, vacuumStats, waitForLines} from './serve.js'

/** Mean share of the mirrors that hold a file in prepareDataset's datasets (20-60%). */
const HELD_SHARE = 0.4
const MiB = 1024 ** 2

/** The sizes and durations of one run. */
interface Plan {
  quick: boolean
  seconds: number
  rounds: number
  connections: number
  threads: number
  /** Average mirrors holding a file, one redirect dataset each. */
  held: number[]
  redirectFiles: number
  snapshotFiles: number[]
  snapshotMirrors: number
  scanEntries: number[]
  /** File sizes in bytes of the meta4 curve. */
  meta4Sizes: number[]
  meta4Mirrors: number
}

const FULL = {
  held: [10, 40, 100, 200],
  redirectFiles: 100_000,
  snapshotFiles: [100_000, 1_000_000, 5_000_000],
  scanEntries: [100_000, 300_000, 1_000_000],
  meta4Sizes: [MiB, 16 * MiB, 256 * MiB, 734_003_200, 4096 * MiB, 16_384 * MiB],
  seconds: 10,
  rounds: 3,
}
const QUICK = {
  held: [10, 40, 100],
  redirectFiles: 10_000,
  snapshotFiles: [10_000, 30_000, 100_000],
  scanEntries: [10_000, 50_000],
  meta4Sizes: [MiB, 64 * MiB, 734_003_200, 4096 * MiB],
  seconds: 3,
  rounds: 1,
}

/** One measured point of a curve, with the figures its table row prints. */
interface CurvePoint extends Point {
  xText: string
  yText: string
  /** Further columns of the table row (e.g. ratio to the ceiling, req/s). */
  extra: Record<string, string>
}

/** One measured curve and what its growth is compared with. */
interface Curve {
  id: string
  title: string
  xLabel: string
  yLabel: string
  points: CurvePoint[]
  /** 'inverse': y is a rate, and the cost whose growth is classified is 1/y. */
  cost: 'value' | 'inverse'
  /** What the algorithm makes us expect, and why (a fixed text). */
  expected: Growth
  reason: string
}

/** What the curve measurements share: the plan, the scratch directory, started processes. */
interface Context {
  plan: Plan
  work: string
  fresh: boolean
  children: ChildProcess[]
  ceilingFile: string
  started: number
}

function progress(ctx: Context, message: string): void {
  const s = Math.round((performance.now() - ctx.started) / 1000)
  console.log(`[curves +${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}] ${message}`)
}

/** 1234567 → "1.2M", 40000 → "40k", 40 → "40". */
function count(n: number): string {
  if (n >= 1e6) return `${Number((n / 1e6).toPrecision(2))}M`
  if (n >= 1e3) return `${Number((n / 1e3).toPrecision(3))}k`
  return String(Math.round(n))
}

/** Bytes as "700 MB" / "16 GiB" / "1 MiB" (powers of 1024 where exact, else of 1000). */
function bytes(n: number): string {
  for (const [unit, b] of [
    ['GiB', 1024 ** 3],
    ['MiB', MiB],
    ['KiB', 1024],
  ] as const)
    if (n >= b && n % b === 0) return `${n / b} ${unit}`
  return n >= 1e9 ? `${Number((n / 1e9).toPrecision(3))} GB` : `${Number((n / 1e6).toPrecision(3))} MB`
}

/** Seconds with two decimals below 10 s, one above. */
function seconds(s: number): string {
  return `${s.toFixed(s < 10 ? 2 : 1)} s`
}

function loadAverage(): string {
  return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
}

/** A redirect or meta4 request script: `paths` at random, from random client addresses. */
function script(ctx: Context, name: string, paths: string[]): string {
  const file = join(ctx.work, `${name}.lua`)
  writeFileSync(file, luaScript(paths, clientAddresses(2000)))
  return file
}

/**
 * The paths of `files` drawn at random (seeded by the dataset's shape), `paths` of them, only
 * files some mirror holds when `held`: a redirect curve must measure redirects, not the
 * origin delivering a file no mirror has (a sparse file of up to a gigabyte, whose bytes
 * would dwarf the redirect's cost).
 */
async function choosePaths(url: string, files: number, mirrors: number, paths: number, held: boolean): Promise<string[]> {
  const random = rng(files + mirrors)
  const draw = () => Array.from({length: paths}, () => filePath(Math.floor(random() * files)))
  if (!held) return draw()
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    const chosen: string[] = []
    while (chosen.length < paths) {
      const drawn = draw()
      const rows = (await client.query('SELECT path FROM file WHERE path = ANY($1) AND cardinality(mirrors) > 0', [drawn])).rows
      const holders = new Set(rows.map((r) => r.path as string))
      for (const path of drawn) if (holders.has(path) && chosen.length < paths) chosen.push(path)
    }
    return chosen
  } finally {
    await client.end()
  }
}

/** The dataset `files` x `mirrors` (reused when present), its origin tree for `paths` (held by a mirror when `held`), and its URL. */
async function dataset(ctx: Context, files: number, mirrors: number, paths: number, held = false): Promise<{name: string; url: string; root: string; paths: string[]}> {
  const name = `mb_bench_curves_${files}x${mirrors}`
  progress(ctx, `dataset ${name}: ${count(files)} files x ${mirrors} mirrors`)
  const generated = await prepareDataset(name, files, mirrors, ctx.fresh)
  progress(ctx, generated > 0 ? `  generated in ${generated.toFixed(1)} s` : '  reused (--fresh regenerates)')
  const chosen = await choosePaths(dbUrl(name), files, mirrors, paths, held)
  const root = join(ctx.work, `root-${name}`)
  mkdirSync(root, {recursive: true})
  await createOriginTree(dbUrl(name), root, chosen)
  return {name, url: dbUrl(name), root, paths: chosen.map((p) => `/${p}`)}
}

/** Starts `mb serve` (one process) on database `url` and origin `root`; resolves once it listens. */
async function startMb(ctx: Context, url: string, root: string): Promise<{child: ChildProcess; port: number; info: {files: number; snapshotSeconds: number; rssMB: number}}> {
  const port = await freePort()
  const args = ['serve', '--root', root, '--listen', `127.0.0.1:${port}`, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'info', '--workers', '1']
  const child = spawn(process.execPath, [BIN, ...args], {env: {...process.env, MB_DATABASE_URL: url, MB_CONFIG: undefined}, stdio: ['ignore', 'pipe', 'pipe']})
  ctx.children.push(child)
  let stderr = ''
  child.stderr!.on('data', (d) => (stderr = (stderr + d).slice(-4000)))
  child.on('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM') console.error(`mb serve on ${url} exited (${code ?? signal}): ${stderr}`)
  })
  const line = await waitForLines(child, /"msg":"listening"/, 1, 900_000)
  child.stdout!.on('data', () => {}) // the log is not read while measuring
  return {child, port, info: JSON.parse(line)}
}

/**
 * wrk for 2 s (warm-up), then `--seconds` measured: the result and CPU per request (µs) of
 * `pid` and, when `database` is given, of that database's PostgreSQL backends
 * (./postgres-cpu.ts; counts still pending at the end of the run are not included).
 */
async function measure(ctx: Context, port: number, lua: string, pid: number, database?: string): Promise<{result: WrkResult; cpuUs: number; pgUs: number}> {
  const {connections, seconds, threads} = ctx.plan
  runWrk(`http://127.0.0.1:${port}`, lua, connections, 2, threads)
  const cpu0 = cpuSeconds(pid)
  const pg0 = database === undefined ? undefined : await postgresCpuSeconds(ADMIN_URL, database)
  const result = runWrk(`http://127.0.0.1:${port}`, lua, connections, seconds, threads)
  if (!(result.requests > 0)) throw new Error(`wrk sent no requests to port ${port}`)
  const pgSeconds = pg0 === undefined || database === undefined ? 0 : cpuSince(pg0, await postgresCpuSeconds(ADMIN_URL, database))
  return {result, cpuUs: ((cpuSeconds(pid) - cpu0) / result.requests) * 1e6, pgUs: (pgSeconds / result.requests) * 1e6}
}

/** The trivial node:http 302 server (bench/serve.ts) under the same wrk run: the ceiling. */
async function ceiling(ctx: Context, lua: string): Promise<{result: WrkResult; cpuUs: number}> {
  const port = await freePort()
  const child = spawn(process.execPath, [ctx.ceilingFile, String(port), '1', 'plain'], {stdio: ['ignore', 'pipe', 'pipe']})
  ctx.children.push(child)
  await waitForLines(child, /listening/, 1, 10_000)
  const m = await measure(ctx, port, lua, child.pid!)
  await stop(child)
  return m
}

async function redirectCurve(ctx: Context): Promise<Curve> {
  const {plan} = ctx
  const sets: Array<Awaited<ReturnType<typeof dataset>> & {held: number; lua: string; cpu: number[]; pg: number[]; rps: number[]}> = []
  for (const h of plan.held) {
    const d = await dataset(ctx, plan.redirectFiles, Math.round(h / HELD_SHARE), 2000, true)
    const client = new pg.Client({connectionString: d.url})
    await client.connect()
    const held = Number((await client.query('SELECT avg(cardinality(mirrors)) AS a FROM file')).rows[0].a)
    await client.end()
    sets.push({...d, held, lua: script(ctx, d.name, d.paths), cpu: [], pg: [], rps: []})
  }
  const ceilings: Array<{result: WrkResult; cpuUs: number}> = []
  // Load the machine first: the first measurement of a run often lags the same one made a
  // minute later by 10-20% (as bench/serve.ts found).
  progress(ctx, 'warm-up: the trivial server under wrk')
  await ceiling(ctx, sets[0].lua)
  for (let r = 0; r < plan.rounds; r++) {
    for (const s of sets) {
      await vacuumStats(s.url, false)
      const mb = await startMb(ctx, s.url, s.root)
      const m = await measure(ctx, mb.port, s.lua, mb.child.pid!, s.name)
      await stop(mb.child)
      s.cpu.push(m.cpuUs)
      s.pg.push(m.pgUs)
      s.rps.push(m.result.rps)
      progress(
        ctx,
        `redirect round ${r + 1}/${plan.rounds}, ${s.held.toFixed(0)} mirrors per file: ${m.result.rps.toFixed(0)} req/s, mb ${m.cpuUs.toFixed(1)} us/req, PostgreSQL ${m.pgUs.toFixed(1)} us/req${m.result.non3xx ? `, non-3xx ${m.result.non3xx}` : ''}`,
      )
    }
    ceilings.push(await ceiling(ctx, sets[0].lua))
    progress(ctx, `redirect round ${r + 1}/${plan.rounds}, trivial 302: ${ceilings.at(-1)!.result.rps.toFixed(0)} req/s, ${ceilings.at(-1)!.cpuUs.toFixed(1)} us/req`)
  }
  const ceilingCpu = median(ceilings.map((c) => c.cpuUs))
  const ceilingRps = median(ceilings.map((c) => c.result.rps))
  return {
    id: 'redirect-cpu-vs-mirrors',
    title: 'Redirect: mb CPU per request vs. mirrors holding the file',
    xLabel: 'mirrors holding the requested file (mean)',
    yLabel: 'mb CPU per redirect (µs)',
    cost: 'value',
    expected: 'sub-linear',
    reason:
      'select() checks each mirror holding the file once for eligibility and ranks only the few the answer lists; HTTP parsing, headers and counting are a fixed cost per request (fewer holders: more answers from the continent or world realm)',
    points: sets.map((s) => {
      const cpu = median(s.cpu)
      const rps = median(s.rps)
      return {
        x: s.held,
        y: cpu,
        xText: s.held.toFixed(0),
        yText: cpu.toFixed(1),
        extra: {
          'mirrors in all': String(Math.round(s.held / HELD_SHARE)),
          'x trivial CPU': (cpu / ceilingCpu).toFixed(2),
          'req/s': rps.toFixed(0),
          'share of trivial req/s': `${((rps / ceilingRps) * 100).toFixed(0)}%`,
          // Every postgres process of this host: a backend that exits during the run takes its ticks along.
          'PostgreSQL µs/req': median(s.pg) >= 0 ? median(s.pg).toFixed(1) : 'n/a',
        },
      }
    }),
  }
}

async function snapshotCurves(ctx: Context, targets: Verdict[]): Promise<Curve[]> {
  const {plan} = ctx
  const load: CurvePoint[] = []
  const rss: CurvePoint[] = []
  for (const files of plan.snapshotFiles) {
    const d = await dataset(ctx, files, plan.snapshotMirrors, 1000)
    const mb = await startMb(ctx, d.url, d.root)
    runWrk(`http://127.0.0.1:${mb.port}`, script(ctx, d.name, d.paths), plan.connections, 2, plan.threads)
    const served = treeRssMB(mb.child.pid!)
    await stop(mb.child)
    const s = mb.info.snapshotSeconds
    progress(ctx, `snapshot ${count(files)} files: loaded in ${s} s, RSS ${mb.info.rssMB} MB after load, ${served} MB after 2 s of serving`)
    load.push({x: files, y: s, xText: count(files), yText: seconds(s), extra: {'files loaded': String(mb.info.files)}})
    rss.push({x: files, y: served, xText: count(files), yText: `${served} MB`, extra: {'RSS after load (MB)': String(mb.info.rssMB)}})
    const shape = `${count(files)} files x ${plan.snapshotMirrors}`
    if (files === 1_000_000 && plan.snapshotMirrors === 100) targets.push(verdict(`RSS serving ${shape}`, served, 400, 'MB', 'lower'))
    if (files === 5_000_000) {
      targets.push(verdict(`snapshot load, ${shape}`, s, 60, 's', 'lower'))
      targets.push(verdict(`RSS serving ${shape}`, served, 2560, 'MB', 'lower'))
    }
  }
  const common = {xLabel: 'files in the index', cost: 'value' as const}
  return [
    {
      ...common,
      id: 'snapshot-load-vs-files',
      title: `Snapshot load time vs. files (${plan.snapshotMirrors} mirrors)`,
      yLabel: 'snapshot load (s)',
      expected: 'linear',
      reason: 'the loader reads every file row once and appends it to the snapshot (arena entry, mirror set)',
      points: load,
    },
    {
      ...common,
      id: 'snapshot-rss-vs-files',
      title: `mb serve RSS vs. files (${plan.snapshotMirrors} mirrors)`,
      yLabel: 'RSS after 2 s of serving (MB)',
      expected: 'sub-linear',
      reason: 'a fixed runtime baseline (code, GeoIP databases) plus one entry per file (path, mirror set): sub-linear while the baseline dominates, linear beyond',
      points: rss,
    },
  ]
}

async function scanCurves(ctx: Context): Promise<Curve[]> {
  const first: CurvePoint[] = []
  const rescan: CurvePoint[] = []
  for (const n of ctx.plan.scanEntries) {
    const name = `mb_bench_curves_scan_${n}`
    progress(ctx, `scan: reconciling a generated listing of ${count(n)} entries (database ${name})`)
    const admin = new pg.Client({connectionString: ADMIN_URL})
    await admin.connect()
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) // a run stopped half-way leaves it
    await admin.end()
    const scratch = await scratchDatabase(undefined, name)
    try {
      const database = await openDatabase({url: scratch.url, schema: 'auto'})
      try {
        const t = await generatedListing(database, n)
        first.push({x: n, y: t.first, xText: count(n), yText: seconds(t.first), extra: {'entries/s': (n / t.first).toFixed(0)}})
        rescan.push({x: n, y: t.rescan, xText: count(n), yText: seconds(t.rescan), extra: {'entries/s': (n / t.rescan).toFixed(0)}})
      } finally {
        await database.close()
      }
    } finally {
      await scratch.drop()
    }
  }
  const common = {xLabel: 'listing entries', yLabel: 'reconcile time (s)', cost: 'value' as const, expected: 'linear' as const}
  return [
    {
      ...common,
      id: 'scan-first-vs-entries',
      title: 'Scan reconcile vs. listing size: first scan',
      reason: 'entries stream into a temp table in batches, then one set-based join against the index writes every row that joins the mirror set',
      points: first,
    },
    {
      ...common,
      id: 'scan-rescan-vs-entries',
      title: 'Scan reconcile vs. listing size: rescan, nothing changed',
      reason: 'the same streaming and join, which finds nothing to write: the cost is reading the listing and the index once',
      points: rescan,
    },
  ]
}

/**
 * GET `url` from a GeoIP-known client address on a connection of its own (a pooled keep-alive
 * connection may be closed by the server while wrk runs, and the next request on it fails).
 */
function get(url: string): Promise<{status: number; body: string}> {
  return new Promise((resolve, reject) => {
    http
      .get(url, {agent: false, headers: {'x-forwarded-for': '81.2.69.142'}}, (res) => {
        let body = ''
        res.setEncoding('utf8')
        res.on('data', (d) => (body += d))
        res.on('end', () => resolve({status: res.statusCode ?? 0, body}))
        res.on('error', reject)
      })
      .on('error', reject)
  })
}

/** Gives the first files of the meta4 dataset the curve's sizes, `mirrors` mirrors and synthetic hashes and pieces. */
async function meta4Files(url: string, sizes: number[], mirrors: number): Promise<string[]> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    const ids = (await client.query('SELECT id FROM mirror ORDER BY id LIMIT $1', [mirrors])).rows.map((r) => r.id)
    const hex = (n: number) => randomBytes(n).toString('hex')
    const paths: string[] = []
    for (const [k, size] of sizes.entries()) {
      const path = filePath(k)
      const piece = pieceSizeFor(size)
      await client.query(
        `UPDATE file SET size = $2, mirrors = $3::smallint[], md5 = $4, sha1 = $5, sha256 = $6, piece_size = $7, piece_hash = 'sha256', pieces = $8, hashed_size = $2, hashed_mtime = mtime WHERE path = $1`,
        [path, size, ids, hex(16), hex(20), hex(32), piece, hex(32 * Math.ceil(size / piece))],
      )
      paths.push(path)
    }
    return paths
  } finally {
    await client.end()
  }
}

async function meta4Curve(ctx: Context, targets: Verdict[]): Promise<Curve> {
  const {plan} = ctx
  const d = await dataset(ctx, 1000, 100, 1)
  const paths = await meta4Files(d.url, plan.meta4Sizes, plan.meta4Mirrors)
  rmSync(d.root, {recursive: true, force: true})
  await createOriginTree(d.url, d.root, paths)
  const runs = paths.map((p, k) => ({
    path: p,
    size: plan.meta4Sizes[k],
    lua: script(ctx, `meta4-${k}`, [`/${p}.meta4`]),
    rps: [] as number[],
    p99: [] as number[],
    cpu: [] as number[],
    bytes: 0,
    urls: 0,
  }))
  const ceilings: number[] = []
  for (let r = 0; r < plan.rounds; r++) {
    const mb = await startMb(ctx, d.url, d.root)
    for (const run of runs) {
      const probe = await get(`http://127.0.0.1:${mb.port}/${run.path}.meta4`)
      const body = probe.body
      if (probe.status !== 200 || !body.includes('<pieces')) throw new Error(`unexpected meta4 answer ${probe.status} for ${run.path}: ${body.slice(0, 300)}`)
      run.bytes = Buffer.byteLength(body)
      run.urls = (body.match(/<url /g) ?? []).length
      const m = await measure(ctx, mb.port, run.lua, mb.child.pid!)
      run.rps.push(m.result.rps)
      run.p99.push(m.result.p99ms)
      run.cpu.push(m.cpuUs)
      progress(
        ctx,
        `meta4 round ${r + 1}/${plan.rounds}, ${bytes(run.size)}: ${m.result.rps.toFixed(0)} documents/s, p99 ${m.result.p99ms.toFixed(1)} ms, ${m.cpuUs.toFixed(0)} us CPU, ${run.bytes} bytes, ${run.urls} <url>`,
      )
    }
    await stop(mb.child)
    ceilings.push((await ceiling(ctx, runs[0].lua)).result.rps)
    progress(ctx, `meta4 round ${r + 1}/${plan.rounds}, trivial 302: ${ceilings.at(-1)!.toFixed(0)} req/s`)
  }
  const ceilingRps = median(ceilings)
  const big = runs.find((r) => r.size === 734_003_200)
  if (big) targets.push(verdict(`meta4, 700 MB file on ${plan.meta4Mirrors} mirrors`, median(big.rps), 3000, 'documents/s', 'higher'))
  return {
    id: 'meta4-rate-vs-size',
    title: `Metalink (.meta4) rate vs. file size (${plan.meta4Mirrors} mirrors)`,
    xLabel: 'file size',
    yLabel: 'documents/s',
    cost: 'inverse',
    expected: 'sub-linear',
    reason: 'the document lists one piece hash per piece, and pieces grow with the size only up to 2,048 (then the piece size doubles); the ranked <url> part does not depend on the size',
    points: runs.map((run) => {
      const rps = median(run.rps)
      return {
        x: run.size,
        y: rps,
        xText: bytes(run.size),
        yText: rps.toFixed(0),
        extra: {
          pieces: String(Math.ceil(run.size / pieceSizeFor(run.size))),
          'document bytes': String(run.bytes),
          '<url>': String(run.urls),
          'share of trivial req/s': `${((rps / ceilingRps) * 100).toFixed(1)}%`,
          'p99 (ms)': median(run.p99).toFixed(1),
          'mb CPU µs/doc': median(run.cpu).toFixed(0),
        },
      }
    }),
  }
}

/** The slope of the curve's cost (1/y for a rate), its growth, and whether that is what the algorithm makes us expect. */
function growthOf(curve: Curve): {slope: number; segments: number[]; growth: Growth | 'not measured'} {
  const costs = curve.points.map((p) => ({x: p.x, y: curve.cost === 'inverse' ? 1 / p.y : p.y}))
  const slope = logLogSlope(costs)
  return {slope, segments: segmentSlopes(costs), growth: Number.isNaN(slope) ? 'not measured' : classifyGrowth(slope)}
}

/** Text for a Markdown page: angle brackets shown, not taken for HTML tags. */
function md(text: string): string {
  return text.replace(/</g, '&lt;').replace(/>/g, '&gt;')
}

/** GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens. */
function anchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-')
}

/** The line of docs/benchmarks-curves.md after which the sections of other benchmarks stand; a curves run keeps them. */
const KEPT_MARKER = '<!-- Sections below: from other benchmarks (npm run bench -- replicas), kept when `curves` rewrites this page. -->'

/** docs/benchmarks-curves.md: the conditions of the run, a summary of the verdicts, then each curve's chart and table. */
function writeDocs(out: string, curves: Curve[], targets: Verdict[], header: string[]): string {
  const svgDir = join(out, 'curves')
  mkdirSync(svgDir, {recursive: true})
  const page: string[] = ['# Benchmark curves', '', ...header, '', '| curve | slope (log-log) | growth | expected | why |', '|---|---:|---|---|---|']
  const sections: string[] = []
  for (const c of curves) {
    const g = growthOf(c)
    page.push(`| [${md(c.title)}](#${anchor(c.title)}) | ${g.slope.toFixed(2)} | ${g.growth} | ${c.expected} | ${md(c.reason)} |`)
    writeFileSync(join(svgDir, `${c.id}.svg`), renderChartSvg({title: c.title, xLabel: c.xLabel, yLabel: c.yLabel, points: c.points}))
    const cols = Object.keys(c.points[0]?.extra ?? {})
    const costNote = c.cost === 'inverse' ? ' of the cost per document (1 / rate)' : ''
    sections.push(
      '',
      `## ${md(c.title)}`,
      '',
      `![${md(c.title)}](curves/${c.id}.svg)`,
      '',
      `| ${c.xLabel} | ${c.yLabel} | cost slope from the previous point | ${cols.map(md).join(' | ')} |`,
      `|---|---:|---:|${cols.map(() => '---:').join('|')}|`,
      ...c.points.map((p, i) => `| ${p.xText} | ${p.yText} | ${i === 0 ? '' : (g.segments[i - 1]?.toFixed(2) ?? '')} | ${cols.map((k) => p.extra[k]).join(' | ')} |`),
      '',
      `Growth: least-squares log-log slope${costNote} ${g.slope.toFixed(2)}, **${g.growth}** (expected ${c.expected}: ${md(c.reason)}).`,
    )
  }
  if (targets.length > 0) page.push('', 'Targets measured on these curves:', '', '```', ...targets.map((t) => t.line.trimStart()), '```')
  const file = join(out, 'benchmarks-curves.md')
  // Sections from other benchmarks (`replicas`) follow KEPT_MARKER: kept as they are.
  const old = existsSync(file) ? readFileSync(file, 'utf8') : ''
  const kept = old.includes(KEPT_MARKER) ? `\n${old.slice(old.indexOf(KEPT_MARKER))}` : ''
  writeFileSync(file, `${[...page, ...sections].join('\n')}\n${kept}`)
  return file
}

/** Rough seconds the plan takes, datasets already present (generation adds about 2 min per million files). */
function expectedSeconds(plan: Plan, only: Set<string>): number {
  const wrk = 2 + plan.seconds + 2
  let s = 0
  if (only.has('redirect')) s += plan.rounds * (plan.held.length * (wrk + 5) + wrk)
  if (only.has('snapshot')) s += plan.snapshotFiles.reduce((a, f) => a + 8 + (f / 1e6) * 12, 0)
  if (only.has('scan')) s += plan.scanEntries.reduce((a, n) => a + 5 + (n / 1e6) * 60, 0)
  if (only.has('meta4')) s += plan.rounds * (5 + plan.meta4Sizes.length * wrk + wrk)
  return s
}

function planOf(values: Record<string, string | boolean | undefined>): Plan {
  const base = values.quick ? QUICK : FULL
  const n = (k: string, fallback: number) => {
    const v = values[k] === undefined ? fallback : Number(values[k])
    if (!(Number.isInteger(v) && v >= 1)) throw new Error(`--${k} takes a whole number >= 1`)
    return v
  }
  return {
    ...base,
    quick: Boolean(values.quick),
    seconds: n('seconds', base.seconds),
    rounds: n('rounds', base.rounds),
    connections: n('connections', 64),
    threads: n('threads', 2),
    snapshotMirrors: n('snapshot-mirrors', 100),
    meta4Mirrors: n('meta4-mirrors', 40),
  }
}

/** Entry point called by bench/run.ts with the arguments after `curves`. */
export async function main(args: string[]): Promise<void> {
  const {values} = parseArgs({
    args,
    options: {
      quick: {type: 'boolean', default: false},
      only: {type: 'string', default: 'redirect,snapshot,scan,meta4'},
      seconds: {type: 'string'},
      rounds: {type: 'string'},
      connections: {type: 'string'},
      threads: {type: 'string'},
      'snapshot-mirrors': {type: 'string'},
      'meta4-mirrors': {type: 'string'},
      fresh: {type: 'boolean', default: false},
      out: {type: 'string', default: join(ROOT, 'docs')},
      timeout: {type: 'string'},
    },
  })
  const plan = planOf(values)
  const only = new Set(values.only!.split(',').map((s) => s.trim()))
  for (const o of only) if (!['redirect', 'snapshot', 'scan', 'meta4'].includes(o)) throw new Error(`--only takes redirect, snapshot, scan, meta4 (comma-separated), not "${o}"`)
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('wrk is not installed: apt-get install wrk')
  if (!existsSync(join(ROOT, 'dist', 'src', 'commands', 'serve.js'))) throw new Error('dist/ is missing: run `npm run build` first')
  const timeout = Number(values.timeout ?? (plan.quick ? 1200 : 7200))
  const expected = expectedSeconds(plan, only)
  console.log(`curves (${plan.quick ? 'QUICK: small sizes, short runs' : 'full sizes'}): ${[...only].join(', ')}; wrk ${plan.connections} connections for ${plan.seconds} s, ${plan.rounds} round(s)`)
  console.log(`expected duration about ${Math.ceil(expected / 60)} min with the datasets present (each absent dataset adds 1-2 min per million files); --timeout ${timeout} s`)

  const ctx: Context = {plan, work: mkdtempSync(join(tmpdir(), 'mb-bench-curves-')), fresh: values.fresh!, children: [], ceilingFile: '', started: performance.now()}
  ctx.ceilingFile = join(ctx.work, 'ceiling.cjs')
  writeFileSync(ctx.ceilingFile, CEILING_SERVER)
  const guard = setTimeout(() => {
    console.error(`curves: --timeout ${timeout}s reached, stopping`)
    for (const c of ctx.children) c.kill('SIGKILL')
    process.exit(1)
  }, timeout * 1000)
  guard.unref()
  const loadBefore = loadAverage()
  const curves: Curve[] = []
  const targets: Verdict[] = []
  try {
    if (only.has('redirect')) curves.push(await redirectCurve(ctx))
    if (only.has('snapshot')) curves.push(...(await snapshotCurves(ctx, targets)))
    if (only.has('scan')) curves.push(...(await scanCurves(ctx)))
    if (only.has('meta4')) curves.push(await meta4Curve(ctx, targets))
  } finally {
    for (const c of ctx.children) await stop(c)
    rmSync(ctx.work, {recursive: true, force: true})
    clearTimeout(guard)
  }
  const minutes = ((performance.now() - ctx.started) / 60_000).toFixed(1)
  const header = [
    plan.quick
      ? '**Example from a `--quick` run: small sizes and short wrk runs on a loaded machine. The figures are indicative only: at these sizes fixed costs dominate and the load scatters single runs, so verdicts may differ from a full run. `npm run bench -- curves` (full sizes, on a quiet machine) replaces them.**'
      : 'Full sizes (`npm run bench -- curves`).',
    '',
    `Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC in ${minutes} min, Node ${process.version}, ${cpus().length} cores shared with wrk and PostgreSQL; load average ${loadBefore} before, ${loadAverage()} after. wrk: ${plan.connections} connections, ${plan.seconds} s per point after 2 s of warm-up; throughput and CPU are medians of ${plan.rounds} interleaved round(s), the trivial node:http 302 server (the ceiling) measured in each round.`,
    '',
    'Growth is the least-squares slope of log(cost) against log(work): about 1 is linear (0.9-1.1), below 0.9 sub-linear, above 1.1 worse than linear.',
  ]
  const file = writeDocs(resolve(values.out!), curves, targets, header)
  console.log('\ncurves:')
  for (const c of curves) {
    const g = growthOf(c)
    console.log(`  ${c.title.padEnd(62)} slope ${g.slope.toFixed(2).padStart(5)}  ${g.growth}${g.growth === c.expected ? '' : ` (expected ${c.expected})`}: ${c.reason}`)
  }
  if (targets.length > 0) {
    console.log('\ntargets:')
    for (const t of targets) console.log(t.line)
  }
  console.log(`\nwrote ${relative(process.cwd(), file)} and ${curves.length} charts in ${relative(process.cwd(), join(resolve(values.out!), 'curves'))}/`)
}
