/**
 * Statistics benchmark: what counting costs on the hot path.
 *
 * In process, with `--requests` synthetic answered requests spread over `--paths` files,
 * 50 mirrors and 30 countries, it times each observer `mb serve` may run per request (the
 * stats collector, the metrics observer, the access log writing to /dev/null) in ns/request,
 * and the share of a request's time that is at `--rate` requests/s (default 20,000/s, about
 * what `mb serve` answers per core here; see `npm run bench -- serve`). The budget is
 * 10%. Then it flushes the collected keys into PostgreSQL (database `mb_bench_stats`, created
 * fresh; MB_BENCH_ADMIN_URL, default postgres://postgres@127.0.0.1:5432/postgres) and prints
 * keys/s of the batched upsert and its CPU per key in this process and in PostgreSQL (the
 * database's backends, read from /proc: PostgreSQL on this host), the
 * second flush adding to existing rows.
 *
 *   npm run bench -- stats
 *   npm run bench -- stats --requests 2000000 --paths 100000 --rate 40000 --flush-interval 10 --no-db
 */
import {parseArgs} from 'node:util'
import {sql} from 'kysely'
import pg from 'pg'
import {openDatabase} from '../src/lib/db/index.js'
import {openAccessLog} from '../src/lib/operator/access-log.js'
import {createServeMetrics} from '../src/lib/operator/metrics.js'
import type {RequestObserver, RequestOutcome} from '../src/lib/serve/delivery/outcome.js'
import {StatsCollector} from '../src/lib/stats/collector.js'
import {cpuSince, postgresCpuSeconds} from './postgres-cpu.js'

const COUNTRIES = ['DE', 'FR', 'GB', 'SE', 'NL', 'IT', 'ES', 'PL', 'CZ', 'AT', 'CH', 'FI', 'US', 'CA', 'MX', 'BR', 'AR', 'CL', 'JP', 'CN', 'KR', 'IN', 'SG', 'TW', 'AU', 'NZ', 'ZA', 'KE', 'EG', 'NG']
const REALMS = ['country', 'continent', 'world'] as const

function requests(n: number, paths: number): RequestOutcome[] {
  const out: RequestOutcome[] = []
  let a = 42 // mulberry32: deterministic across runs
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const now = Date.now()
  for (let i = 0; i < n; i++) {
    const p = Math.floor(rand() ** 2 * paths) // popular files get more requests
    const local = rand() < 0.1
    out.push({
      time: now + i,
      method: rand() < 0.05 ? 'HEAD' : 'GET',
      target: `/pub/dir${p % 100}/file-${p}.iso`,
      path: `pub/dir${p % 100}/file-${p}.iso`,
      httpVersion: '1.1',
      status: local ? 200 : 302,
      outcome: local ? 'local' : 'redirect',
      mirrorId: local ? undefined : 1 + Math.floor(rand() * 50),
      mirrorIdentifier: local ? undefined : `mirror${p % 50}.example.org`,
      realm: local ? null : REALMS[p % 3],
      clientIp: `192.0.2.${i % 250}`,
      country: COUNTRIES[Math.floor(rand() * COUNTRIES.length)],
      bytesSent: local ? 4000 : 0,
      fileSize: 700_000_000,
      rangeStart: rand() < 0.03 ? 1000 : undefined,
      userAgent: 'Wget/1.21.3',
      referer: undefined,
      durationSeconds: 0.00005,
    })
  }
  return out
}

function time(observer: RequestObserver, mix: RequestOutcome[], warmUp = true): number {
  if (warmUp) for (let i = 0; i < Math.min(mix.length, 50_000); i++) observer(mix[i])
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < mix.length; i++) observer(mix[i])
  return Number(process.hrtime.bigint() - t0) / mix.length
}

export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      requests: {type: 'string', default: '1000000'},
      paths: {type: 'string', default: '20000'},
      rate: {type: 'string', default: '20000'},
      'flush-interval': {type: 'string', default: '10'},
      'no-db': {type: 'boolean', default: false},
    },
  })
  const n = Number(values.requests)
  const paths = Number(values.paths)
  const rate = Number(values.rate)
  if (!(n > 0 && paths > 0 && rate > 0)) throw new Error('--requests, --paths and --rate must be positive numbers')
  const mix = requests(n, paths)
  const budgetNs = 1e9 / rate
  const row = (name: string, ns: number) => console.log(`${name.padEnd(26)} ${ns.toFixed(0).padStart(6)} ns/request  ${((100 * ns) / budgetNs).toFixed(2).padStart(5)}% of a request at ${rate}/s`)

  console.log(`${n} requests over ${paths} files, 50 mirrors, ${COUNTRIES.length} countries`)
  // The collector is flushed every `--flush-interval` seconds: time it over chunks of
  // rate x interval requests, a fresh map each (what a flush leaves behind).
  const chunk = Math.max(1, Math.round(rate * Number(values['flush-interval'])))
  let collector = new StatsCollector({maxPendingKeys: 10_000_000})
  let statsTotal = 0
  let keysPerFlush = 0
  for (let i = 0; i < mix.length; i += chunk) {
    collector = new StatsCollector({maxPendingKeys: 10_000_000})
    const part = mix.slice(i, i + chunk)
    statsTotal += time(collector.observer, part, false) * part.length
    keysPerFlush = Math.max(keysPerFlush, collector.pendingKeys)
  }
  const statsNs = statsTotal / mix.length
  row('stats collector', statsNs)
  console.log(`  (up to ${keysPerFlush} keys per ${values['flush-interval']} s flush interval)`)
  const metrics = createServeMetrics({}, {defaultMetrics: false})
  const metricsNs = time(metrics.observer, mix)
  row('metrics observer', metricsNs)
  const log = openAccessLog('/dev/null', {reopenOnSighup: false})
  const logNs = time(log.observer, mix)
  await log.close()
  row('access log (/dev/null)', logNs)
  row('all three', statsNs + metricsNs + logNs)

  if (values['no-db']) return
  const admin = process.env.MB_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const name = 'mb_bench_stats'
  const client = new pg.Client({connectionString: admin})
  await client.connect()
  await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await client.query(`CREATE DATABASE ${name}`)
  await client.end()
  const url = new URL(admin)
  url.pathname = `/${name}`
  const database = await openDatabase({url: url.toString(), schema: 'auto'})
  try {
    // one flush interval's keys, flushed into an empty table, then the same again (adding)
    const part = mix.slice(0, chunk)
    const fill = () => {
      collector = new StatsCollector({maxPendingKeys: 10_000_000})
      for (const o of part) collector.observer(o)
      return collector.pendingKeys
    }
    for (const label of ['into an empty stats_daily', 'adding to existing rows ']) {
      const keys = fill()
      const t0 = performance.now()
      const cpu0 = process.cpuUsage()
      const pg0 = await postgresCpuSeconds(admin, name)
      const result = await collector.flush(database)
      const s = (performance.now() - t0) / 1000
      const cpu = process.cpuUsage(cpu0)
      const cpuUs = (cpu.user + cpu.system) / Math.max(1, keys)
      const pgUs = (cpuSince(pg0, await postgresCpuSeconds(admin, name)) * 1e6) / Math.max(1, keys)
      console.log(`flush ${label}: ${result.rows} keys in ${s.toFixed(2)} s (${Math.round(keys / s)} keys/s; CPU per key: this process ${cpuUs.toFixed(1)} us, PostgreSQL ${pgUs.toFixed(1)} us)`)
    }
    const total = await sql<{d: number; n: number}>`SELECT sum(downloads)::bigint AS d, count(*)::bigint AS n FROM stats_daily`.execute(database.db)
    console.log(`stored: ${total.rows[0].n} rows, ${total.rows[0].d} downloads`)
  } finally {
    await database.close()
    const c2 = new pg.Client({connectionString: admin})
    await c2.connect()
    await c2.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await c2.end()
  }
}
