/**
 * `npm run bench -- replicas`: many `mb serve` replicas on one PostgreSQL primary (issue 37,
 * item 2). One dataset of `--files` files (default 1,000,000) x `--mirrors` mirrors
 * (bench/serve.ts's, database `mb_bench_replicas`) serves every replica count of `--replicas`
 * (default 1,4,10): replicas are added, never restarted, so each snapshot is loaded once. For
 * each count it runs `--rounds` interleaved rounds of
 *
 * 1. a settle of `--settle` seconds (the stats flush interval and 2 s: the probes of the
 *    previous change, below, are written by then);
 * 2. an idle window of `--idle-seconds` (default 30, one `serve.listen_poll_seconds`: every
 *    replica polls once in it, so a shorter window catches a varying share of the polls): the
 *    CPU of the database's PostgreSQL backends per second (target for 10 replicas: under 1%
 *    of a core);
 * 3. a scan's change of `--change` files (default 1,000): the statement reconcile writes
 *    (src/lib/scan/reconcile.ts `updateMirrorSets`) adding, then in the next round removing,
 *    mirror `bench-scan` to or from the sets of those files, `txid` stamped as
 *    docs/change-tracking.md requires. The files hold no other mirror, so each replica's
 *    answer to a HEAD of one of them turns from local delivery (200) into a redirect to
 *    bench-scan and back: the bench polls every replica every 10 ms and takes the time from
 *    the commit to the last replica's new answer (target for 10: under 2 s), and the
 *    backends' CPU from the commit until then, less the idle rate, as the CPU per change.
 *
 * At the largest count it then drives every replica with one wrk (its threads spread over
 * them; random held paths, 2,000 client addresses in X-Forwarded-For) for `--seconds` and
 * checks the counting: the downloads the replicas wrote to `stats_daily` after they stopped
 * (SIGTERM flushes what they hold) must equal the redirects they answered
 * (`mb_requests_total{outcome="redirect"}` on each replica's metrics listener).
 *
 * The cost per change is set beside a full read of the file table by one backend (what an
 * idle refresh cost before item 1). PostgreSQL's CPU is read from /proc (bench/postgres-cpu.ts),
 * so it needs PostgreSQL on this host. Every process started is stopped by pid; the database is
 * dropped at the end unless `--keep`; the run is bounded by `--timeout` seconds.
 *
 *   npm run bench -- replicas                                    # the full run (about 17 min)
 *   npm run bench -- replicas --files 20000 --replicas 1,2 --rounds 2 --idle-seconds 3 --seconds 3
 */
import {type ChildProcess, spawn, spawnSync} from 'node:child_process'
import http from 'node:http'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {logLogSlope} from './growth.js'
import {ADMIN_URL, dbUrl, freePort, median, runWrk, type Verdict, verdict} from './lib.js'
import {cpuSince, postgresCpuSeconds, processCpuSeconds} from './postgres-cpu.js'
import {BIN, clientAddresses, createOriginTree, filePath, luaScript, prepareDataset, stop, vacuumStats, waitForLines} from './serve.js'

/** The mirror whose "scan" each round's change is: it holds the changed files or not. */
const SCAN_MIRROR = 'bench-scan.example.net'

/** One running replica: the process, its port and its metrics port. */
interface Replica {
  child: ChildProcess
  port: number
  metricsPort: number
}

/** The run's settings, from the flags. */
interface Plan {
  files: number
  mirrors: number
  counts: number[]
  change: number
  rounds: number
  idleSeconds: number
  settleSeconds: number
  seconds: number
  database: string
}

/** What one round at one replica count measured. */
interface Round {
  /** PostgreSQL CPU seconds per second at idle. */
  idle: number
  /** Seconds from the commit to the last replica's new answer. */
  reach: number
  /** PostgreSQL CPU seconds of the replicas' refreshes for the change (idle rate taken off). */
  perChange: number
  /** PostgreSQL CPU seconds of the writing statement itself. */
  write: number
}

/** The shared state of a run: processes to stop, the scratch directory, the writer. */
interface Context {
  plan: Plan
  work: string
  root: string
  replicas: Replica[]
  writer: pg.Client
  writerPid: number
  scanMirror: number
  /** The changed files' ids and paths, and the path probed on every replica. */
  ids: number[]
  changed: Set<string>
  probe: string
}

function parsePlan(args: string[]): Plan & {fresh: boolean; keep: boolean; timeout: number} {
  const {values} = parseArgs({
    args,
    options: {
      files: {type: 'string', default: '1000000'},
      mirrors: {type: 'string', default: '100'},
      replicas: {type: 'string', default: '1,4,10'},
      change: {type: 'string', default: '1000'},
      rounds: {type: 'string', default: '5'},
      'idle-seconds': {type: 'string', default: '30'},
      settle: {type: 'string', default: '12'},
      seconds: {type: 'string', default: '10'},
      database: {type: 'string', default: 'mb_bench_replicas'},
      fresh: {type: 'boolean', default: false},
      keep: {type: 'boolean', default: false},
      timeout: {type: 'string', default: '1800'},
    },
  })
  const counts = values.replicas.split(',').map(Number)
  const plan = {
    files: Number(values.files),
    mirrors: Number(values.mirrors),
    counts,
    change: Number(values.change),
    rounds: Number(values.rounds),
    idleSeconds: Number(values['idle-seconds']),
    settleSeconds: Number(values.settle),
    seconds: Number(values.seconds),
    database: values.database,
    fresh: values.fresh,
    keep: values.keep,
    timeout: Number(values.timeout),
  }
  const whole = [plan.files, plan.mirrors, plan.change, plan.rounds, ...counts]
  if (whole.some((n) => !(Number.isInteger(n) && n >= 1)) || plan.change > plan.files / 4)
    throw new Error('--files, --mirrors, --change (at most a quarter of the files), --rounds and --replicas take whole numbers >= 1')
  if (counts.some((n, i) => i > 0 && n <= counts[i - 1])) throw new Error('--replicas takes increasing counts, e.g. 1,4,10')
  if (![plan.idleSeconds, plan.settleSeconds, plan.seconds].every((n) => n > 0)) throw new Error('--idle-seconds, --settle and --seconds take positive numbers')
  return plan
}

/**
 * A rough duration of the run in seconds, printed at the start: generating the dataset
 * (about 100 s per million files, skipped when reused), loading each replica's snapshot
 * (about 10 s per million files, one at a time on 2 cores), the rounds, the wrk run.
 */
function estimateSeconds(plan: Plan, reused: boolean): number {
  const millions = plan.files / 1e6
  const generate = reused ? 0 : 100 * millions + 10
  const loads = plan.counts.at(-1)! * (10 * millions + 2)
  const rounds = plan.counts.length * (plan.rounds * (plan.settleSeconds + plan.idleSeconds + 2) + 2)
  return generate + loads + rounds + plan.seconds + 30
}

/** Starts `mb serve` on the bench database with a metrics listener; resolves once it listens. */
async function startReplica(ctx: Context): Promise<Replica> {
  const port = await freePort()
  const metricsPort = await freePort()
  const args = ['serve', '--root', ctx.root, '--listen', `127.0.0.1:${port}`, '--metrics-listen', `127.0.0.1:${metricsPort}`, '--trusted-proxy', '127.0.0.1/32', '--log-level', 'info']
  const child = spawn(process.execPath, [BIN, ...args], {env: {...process.env, MB_DATABASE_URL: dbUrl(ctx.plan.database), MB_CONFIG: undefined}, stdio: ['ignore', 'pipe', 'pipe']})
  const replica = {child, port, metricsPort}
  ctx.replicas.push(replica)
  await waitForLines(child, /"msg":"listening"/, 1, 600_000)
  child.stdout!.on('data', () => {}) // the log is not read while measuring
  return replica
}

/**
 * Prepares what the rounds change: mirror bench-scan (created once), and `change` files spread
 * over the tree whose sets are emptied (in one statement stamped like reconcile's), so that
 * bench-scan alone holds them after an add; their origin files, for local delivery.
 */
async function prepareChange(ctx: Omit<Context, 'scanMirror' | 'ids' | 'changed' | 'probe'>): Promise<Pick<Context, 'scanMirror' | 'ids' | 'changed' | 'probe'>> {
  const {writer, plan} = ctx
  await writer.query(`INSERT INTO mirror (identifier, http_url, country, continent, latitude, longitude, score) VALUES ($1, $2, 'DE', 'EU', 51, 9, 100) ON CONFLICT (identifier) DO NOTHING`, [
    SCAN_MIRROR,
    `http://${SCAN_MIRROR}/pub/`,
  ])
  const scanMirror = Number((await writer.query('SELECT id FROM mirror WHERE identifier = $1', [SCAN_MIRROR])).rows[0].id)
  const step = Math.floor(plan.files / plan.change)
  const rows = (await writer.query<{id: string; path: string}>('SELECT id, path FROM file WHERE id % $1 = 0 ORDER BY id LIMIT $2', [step, plan.change])).rows
  const ids = rows.map((r) => Number(r.id))
  await writer.query(`UPDATE file SET mirrors = '{}', txid = pg_current_xact_id() WHERE id = ANY($1)`, [ids])
  return {scanMirror, ids, changed: new Set(rows.map((r) => r.path)), probe: `/${rows[rows.length >> 1].path}`}
}

const agent = new http.Agent({keepAlive: true, maxSockets: 1})

/** HEAD of `path` on `port`: whether the answer is a redirect to mirror bench-scan. */
function redirectsToScanMirror(port: number, path: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, path, method: 'HEAD', agent}, (res) => {
      res.resume()
      resolve(res.statusCode === 302 && String(res.headers.location).includes(SCAN_MIRROR))
    })
    req.on('error', reject)
    req.end()
  })
}

/** Seconds after `since` (performance.now()) at which `replica` answers `expected`, polled every 10 ms, at most 60 s. */
async function arrival(replica: Replica, path: string, expected: boolean, since: number): Promise<number> {
  for (;;) {
    if ((await redirectsToScanMirror(replica.port, path)) === expected) return (performance.now() - since) / 1000
    if (performance.now() - since > 60_000) throw new Error(`replica on port ${replica.port} did not see the change within 60 s`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** The database's backends' CPU seconds by pid, without the bench's own writer. */
async function replicaBackends(ctx: Context): Promise<Map<number, number>> {
  const cpu = await postgresCpuSeconds(ADMIN_URL, ctx.plan.database)
  cpu.delete(ctx.writerPid)
  return cpu
}

/** One round: settle, the idle window, then the change (`add`: bench-scan now holds the files) and its arrival everywhere. */
async function round(ctx: Context, add: boolean): Promise<Round> {
  const {plan} = ctx
  await new Promise((r) => setTimeout(r, plan.settleSeconds * 1000))
  const idle0 = await replicaBackends(ctx)
  const t0 = performance.now()
  await new Promise((r) => setTimeout(r, plan.idleSeconds * 1000))
  const idle = cpuSince(idle0, await replicaBackends(ctx)) / ((performance.now() - t0) / 1000)
  return {idle, ...(await change(ctx, add, idle))}
}

/**
 * The change of one round, written as reconcile writes it, and its arrival at every replica:
 * seconds from the commit to the last replica's new answer, the replicas' backends' CPU
 * seconds until then less `idle` (CPU seconds per second) over the same time, and the writer's.
 */
async function change(ctx: Context, add: boolean, idle: number): Promise<Omit<Round, 'idle'>> {
  const before = await replicaBackends(ctx)
  const write0 = processCpuSeconds(ctx.writerPid) ?? 0
  const statement = add
    ? 'UPDATE file SET mirrors = array_append(mirrors, $1::smallint), txid = pg_current_xact_id() WHERE id = ANY($2) AND NOT ($1::smallint = ANY(mirrors))'
    : 'UPDATE file SET mirrors = array_remove(mirrors, $1::smallint), txid = pg_current_xact_id() WHERE id = ANY($2) AND $1::smallint = ANY(mirrors)'
  const written = await ctx.writer.query(statement, [ctx.scanMirror, ctx.ids])
  const committed = performance.now()
  if (written.rowCount !== ctx.ids.length) throw new Error(`the change wrote ${written.rowCount} rows, not ${ctx.ids.length}`)
  const write = (processCpuSeconds(ctx.writerPid) ?? 0) - write0
  const reach = Math.max(...(await Promise.all(ctx.replicas.map((r) => arrival(r, ctx.probe, add, committed)))))
  await new Promise((r) => setTimeout(r, 300)) // a backend's last reply precedes its accounting by a little
  const window = (performance.now() - committed) / 1000
  return {reach, perChange: cpuSince(before, await replicaBackends(ctx)) - idle * window, write}
}

/** CPU seconds one backend spends reading the whole file table: what a refresh cost when it scanned it. */
async function fullReadSeconds(ctx: Context): Promise<number> {
  const cpu0 = processCpuSeconds(ctx.writerPid) ?? 0
  await ctx.writer.query('SELECT sum(length(path)) + sum(cardinality(mirrors)) + sum(size) FROM file')
  return (processCpuSeconds(ctx.writerPid) ?? 0) - cpu0
}

/**
 * GET of a replica's `/metrics` on a connection of its own, closed after the answer. Not
 * `fetch`, whose pool keeps the connection of the reading before wrk: wrk runs in
 * `spawnSync`, so for `--seconds` this process reads no socket, while the replica closes
 * that idle connection after its keep-alive timeout (5 s). A failure names the replica and
 * whether its process still runs, where `fetch` said only `fetch failed`.
 */
function metricsText(replica: Replica): Promise<string> {
  return new Promise((resolve, reject) => {
    const fail = (error: Error) => {
      const state = replica.child.exitCode === null && replica.child.signalCode === null ? 'running' : `exited (${replica.child.exitCode ?? replica.child.signalCode})`
      reject(new Error(`reading the metrics of the replica on port ${replica.port} (metrics port ${replica.metricsPort}, ${state}): ${error.message}`))
    }
    const req = http.get({host: '127.0.0.1', port: replica.metricsPort, path: '/metrics', agent: false, timeout: 30_000}, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => (res.statusCode === 200 ? resolve(text) : fail(new Error(`HTTP ${res.statusCode}`))))
      res.on('error', fail)
    })
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')))
    req.on('error', fail)
  })
}

/** The sum of `mb_requests_total{outcome="redirect"}` (every realm) on a replica's metrics listener. */
async function redirectsAnswered(replica: Replica): Promise<number> {
  const text = await metricsText(replica)
  let sum = 0
  for (const m of text.matchAll(/^mb_requests_total\{([^}]*)\} (\S+)$/gm)) if (m[1].includes('outcome="redirect"')) sum += Number(m[2])
  return sum
}

/** The paths wrk requests: 5,000 spread over the tree, none of the changed files. */
function wrkPaths(plan: Plan, changed: Set<string>): string[] {
  const drawn = Array.from({length: 5000}, (_, i) => filePath(Math.floor(((i + 0.5) * plan.files) / 5000)))
  return drawn.filter((p) => !changed.has(p))
}

/**
 * The counting check at the largest count: one wrk spread over every replica for
 * `--seconds`, then every replica stopped (each flushes its counts), then the downloads in
 * `stats_daily` against the redirects the replicas answered. Stops the replicas.
 */
async function countingCheck(ctx: Context): Promise<{counted: number; answered: number}> {
  const {plan} = ctx
  const paths = wrkPaths(plan, ctx.changed).map((p) => `/${p}`)
  const script = join(ctx.work, 'replicas.lua')
  writeFileSync(
    script,
    luaScript(
      paths,
      clientAddresses(2000),
      ctx.replicas.map((r) => r.port),
    ),
  )
  await vacuumStats(dbUrl(plan.database), true)
  const answered0 = await Promise.all(ctx.replicas.map(redirectsAnswered))
  const pg0 = await replicaBackends(ctx)
  const n = ctx.replicas.length
  const wrk = runWrk(`http://127.0.0.1:${ctx.replicas[0].port}`, script, 2 * n, plan.seconds, n)
  const answered1 = await Promise.all(ctx.replicas.map(redirectsAnswered))
  const answered = answered1.reduce((s, x, i) => s + x - answered0[i], 0)
  const pgSeconds = cpuSince(pg0, await replicaBackends(ctx))
  for (const r of ctx.replicas) await stop(r.child)
  const counted = Number((await ctx.writer.query(`SELECT coalesce(sum(downloads), 0) AS n FROM stats_daily WHERE mirror_id <> 0`)).rows[0].n)
  console.log(
    `\ncounting, ${n} replicas under one wrk (${n} threads, ${2 * n} connections, ${plan.seconds} s, ${paths.length} paths, 2,000 client addresses): ${wrk.rps.toFixed(0)} req/s in all, wrk saw ${wrk.requests - wrk.non3xx} 3xx; the replicas answered ${answered} redirects; stats_daily holds ${counted} redirected downloads; PostgreSQL ${((pgSeconds / Math.max(1, answered)) * 1e6).toFixed(1)} µs/request until wrk ended${wrk.errors ? `; ${wrk.errors}` : ''}`,
  )
  return {counted, answered}
}

/** Prints one replica count's rounds and medians; returns the medians. */
function report(n: number, rounds: Round[], fullRead: number, change: number): Round {
  const med = (f: (r: Round) => number) => median(rounds.map(f))
  const m = {idle: med((r) => r.idle), reach: med((r) => r.reach), perChange: med((r) => r.perChange), write: med((r) => r.write)}
  const each = (f: (r: Round) => number, scale: number, digits: number) => rounds.map((r) => (f(r) * scale).toFixed(digits)).join(', ')
  console.log(
    `${String(n).padStart(3)} replicas: idle PostgreSQL ${(m.idle * 100).toFixed(2)}% of a core [${each((r) => r.idle, 100, 2)}]; a change of ${change} files reaches all in ${m.reach.toFixed(2)} s [${each((r) => r.reach, 1, 2)}]; their refreshes cost PostgreSQL ${(m.perChange * 1000).toFixed(1)} ms [${each((r) => r.perChange, 1000, 1)}], ${((m.perChange / n) * 1000).toFixed(1)} ms per replica (${((m.perChange / n / fullRead) * 100).toFixed(1)}% of a full read of the file table); the write itself ${(m.write * 1000).toFixed(1)} ms`,
  )
  return m
}

/** Prints the targets: idle and arrival at the largest count, the growth of the cost per change with the replicas. */
function targets(plan: Plan, medians: Round[], fullRead: number, counting: {counted: number; answered: number}): Verdict[] {
  const last = medians.length - 1
  const n = plan.counts[last]
  const out = [
    verdict(`counting, ${n} replicas: |downloads counted - 302s|`, Math.abs(counting.counted - counting.answered), 0, '', 'lower'),
    verdict(`idle PostgreSQL CPU, ${n} replicas`, medians[last].idle * 100, 1, '% core', 'lower'),
    verdict(`change of ${plan.change} files reaches ${n} replicas`, medians[last].reach, 2, 's', 'lower'),
    verdict(`per change per replica / a full read (${n})`, (medians[last].perChange / n / fullRead) * 100, 10, '%', 'lower'),
  ]
  if (medians.length > 1) {
    const slope = logLogSlope(medians.map((m, i) => ({x: plan.counts[i], y: Math.max(m.perChange, 1e-6)})))
    out.push(verdict('CPU per change vs replicas, log-log slope', slope, 1.2, '', 'lower'))
  }
  return out
}

/** Prints the medians as the table of docs/benchmarks-curves.md ("Replicas on one primary"). */
function markdown(plan: Plan, medians: Round[], fullRead: number): void {
  console.log(`\nfor docs/benchmarks-curves.md (${plan.files} files, a change of ${plan.change} files, medians of ${plan.rounds} rounds):\n`)
  console.log('| replicas | idle PostgreSQL CPU (% of a core) | change reaches every replica (s) | PostgreSQL CPU per change (ms) | per replica (ms) | per replica, share of a full read |')
  console.log('|---:|---:|---:|---:|---:|---:|')
  medians.forEach((m, i) => {
    const n = plan.counts[i]
    console.log(
      `| ${n} | ${(m.idle * 100).toFixed(2)} | ${m.reach.toFixed(2)} | ${(m.perChange * 1000).toFixed(1)} | ${((m.perChange / n) * 1000).toFixed(1)} | ${((m.perChange / n / fullRead) * 100).toFixed(1)}% |`,
    )
  })
}

/** Opens the writer, prepares the dataset and the change, returns the run's context. */
async function setUp(plan: Plan & {fresh: boolean}, work: string, replicas: Replica[]): Promise<Context> {
  const admin = new pg.Client({connectionString: ADMIN_URL})
  await admin.connect()
  const exists = (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [plan.database])).rowCount! > 0
  await admin.end()
  const estimate = estimateSeconds(plan, exists && !plan.fresh)
  console.log(
    `replicas benchmark: ${plan.files} files x ${plan.mirrors} mirrors (database ${plan.database}), replicas ${plan.counts.join(', ')}, ${plan.rounds} rounds; expect about ${Math.ceil(estimate / 60)} min`,
  )
  const generated = await prepareDataset(plan.database, plan.files, plan.mirrors, plan.fresh)
  console.log(generated > 0 ? `  dataset generated in ${generated.toFixed(1)} s` : '  reused the existing dataset (--fresh regenerates)')
  const writer = new pg.Client({connectionString: dbUrl(plan.database)})
  await writer.connect()
  const writerPid = Number((await writer.query('SELECT pg_backend_pid() AS pid')).rows[0].pid)
  const root = join(work, 'root')
  const base = {plan, work, root, replicas, writer, writerPid}
  const change = await prepareChange(base)
  // Origin files for every path requested (the origin check finds them): sparse, with the indexed size and mtime.
  await createOriginTree(dbUrl(plan.database), root, [...change.changed, ...wrkPaths(plan, change.changed)])
  return {...base, ...change}
}

/** Starts replicas up to `n`, one at a time (each snapshot load has the cores to itself). */
async function growTo(ctx: Context, n: number): Promise<void> {
  const t0 = performance.now()
  while (ctx.replicas.length < n) await startReplica(ctx)
  console.log(`  ${n} replicas listening (${((performance.now() - t0) / 1000).toFixed(1)} s to start the new ones)`)
}

/** Entry point: `npm run bench -- replicas [--files N] [--replicas 1,4,10] [--rounds R] ...` */
export async function main(args: string[]): Promise<void> {
  const plan = parsePlan(args)
  if (spawnSync('sh', ['-c', 'command -v wrk']).status !== 0) throw new Error('wrk is not installed: apt-get install wrk')
  const work = mkdtempSync(join(tmpdir(), 'mb-bench-replicas-'))
  const replicas: Replica[] = []
  const guard = setTimeout(() => {
    console.error(`bench: --timeout ${plan.timeout}s reached, stopping`)
    for (const r of replicas) r.child.kill('SIGKILL')
    process.exit(1)
  }, plan.timeout * 1000)
  guard.unref()
  let ctx: Context | undefined
  const started = performance.now()
  try {
    ctx = await setUp(plan, work, replicas)
    const fullRead = await fullReadSeconds(ctx)
    console.log(`  a full read of the file table costs one backend ${(fullRead * 1000).toFixed(0)} ms of CPU`)
    const medians: Round[] = []
    let add = true
    for (const n of plan.counts) {
      await growTo(ctx, n)
      const rounds: Round[] = []
      // One change not counted: a replica's first refresh after its load also opens
      // connections and fills its backend's caches (127 ms against 1-6 ms in a smoke run).
      await change(ctx, add, 0)
      add = !add
      for (let r = 0; r < plan.rounds; r++, add = !add) rounds.push(await round(ctx, add))
      medians.push(report(n, rounds, fullRead, plan.change))
    }
    const counting = await countingCheck(ctx)
    console.log(`\ntargets (medians of ${plan.rounds} rounds; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}):`)
    targets(plan, medians, fullRead, counting)
    markdown(plan, medians, fullRead)
    console.log(`took ${((performance.now() - started) / 60_000).toFixed(1)} min`)
  } finally {
    for (const r of replicas) await stop(r.child)
    agent.destroy()
    await ctx?.writer.end()
    rmSync(work, {recursive: true, force: true})
    if (!plan.keep) await dropDatabase(plan.database)
    clearTimeout(guard)
  }
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({connectionString: ADMIN_URL})
  await admin.connect()
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  } finally {
    await admin.end()
  }
}
