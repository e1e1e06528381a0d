/**
 * The origin's share under repeats (issue 44; docs/selection.md, "Retries keep their
 * locality"): `npm run bench -- origin-share`. A database of its own (`mb_bench_origin` on
 * the bench PostgreSQL) holds one file on 40 mirrors: 5 in GB, 35 in 7 other countries;
 * `mb serve` runs on it with its defaults (retry window on). Three cases:
 *
 * - NAT: one GB address sends `--nat-requests` sequential GETs of the file (a NAT, a proxy, a
 *   CI runner): how many went to the origin (target 0), and how many stayed in GB (target all);
 * - wrk: `--connections` connections from 6 addresses (X-Forwarded-For, GB, SE, US and three
 *   unknown to GeoIP) hammer the file for `--seconds`: the origin's share of the answers
 *   (target 0, from `mb_origin_requests_total`);
 * - the same wrk run with `--retry-window 0`, interleaved with the default `--rounds` times:
 *   redirects per second with and without the retry memory (target: within 5%).
 *
 * Run it once at a tiny size to check it works (`-- origin-share --nat-requests 50 --seconds 1
 * --rounds 1`); the figures mean something only on a quiet machine. Every process started is
 * stopped by pid.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import http from 'node:http'
import {ftruncateSync, mkdtempSync, openSync, closeSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {ADMIN_URL, dbUrl, freePort, median, runWrk, verdict} from './lib.js'
import {BIN, luaScript, ROOT, stop, waitForPort} from './serve.js'
import {spawnSync} from 'node:child_process'

const FILE = 'pub/big.iso'
const SIZE = 700 * 1024 * 1024
const MTIME = 1_800_000_000
/** MaxMind's test database, which places the addresses below (test/fixtures/geoip). */
const GEOIP = join(ROOT, 'test', 'fixtures', 'geoip', 'GeoIP2-City-Test.mmdb')
/** A client address the test database places in GB. */
const GB = '81.2.69.142'
/** wrk's six client addresses: GB, SE, US, and three no database places. */
const SIX = [GB, '89.160.20.112', '216.160.83.56', '10.1.2.3', '10.4.5.6', '192.168.7.8']
const ELSEWHERE = ['SE', 'DE', 'FR', 'NL', 'US', 'BR', 'JP']
const CONTINENT: Record<string, string> = {SE: 'EU', DE: 'EU', FR: 'EU', NL: 'EU', GB: 'EU', US: 'NA', BR: 'SA', JP: 'AS'}

/** A fresh database `name` with the schema, and the file on 5 GB mirrors and 35 elsewhere; returns the GB mirrors' ids. */
async function prepare(name: string): Promise<Set<number>> {
  const admin = new pg.Client({connectionString: ADMIN_URL})
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const migrate = spawnSync(process.execPath, [BIN, 'db', 'migrate', '--json'], {env: {...process.env, MB_DATABASE_URL: dbUrl(name)}, encoding: 'utf8'})
  if (migrate.status !== 0) throw new Error(`mb db migrate failed: ${migrate.stderr}`)
  const client = new pg.Client({connectionString: dbUrl(name)})
  await client.connect()
  const gb = new Set<number>()
  try {
    const countries = [...Array(5).fill('GB'), ...ELSEWHERE.flatMap((c) => Array(5).fill(c))]
    for (const [i, country] of countries.entries()) {
      const id = i + 1
      if (country === 'GB') gb.add(id)
      await client.query('INSERT INTO mirror (id, identifier, http_url, country, continent) VALUES ($1, $2, $3, $4, $5)', [
        id,
        `m${id}.${country.toLowerCase()}.example`,
        `http://m${id}.example/`,
        country,
        CONTINENT[country],
      ])
    }
    await client.query('INSERT INTO file (path, size, mtime, mirrors) VALUES ($1, $2, $3, $4)', [FILE, SIZE, MTIME, countries.map((_, i) => i + 1)])
  } finally {
    await client.end()
  }
  return gb
}

/** Starts `mb serve` on `root` with `extra` flags and a metrics listener; resolves with its ports once it listens. */
async function startMb(name: string, root: string, extra: string[], children: ChildProcess[]): Promise<{child: ChildProcess; port: number; metrics: number}> {
  const port = await freePort()
  const metrics = await freePort()
  const args = [
    BIN,
    'serve',
    '--root',
    root,
    '--listen',
    `127.0.0.1:${port}`,
    '--metrics-listen',
    `127.0.0.1:${metrics}`,
    '--trusted-proxy',
    '127.0.0.1/32',
    '--geoip',
    GEOIP,
    '--log-level',
    'warn',
    ...extra,
  ]
  const child = spawn(process.execPath, args, {cwd: ROOT, env: {...process.env, MB_DATABASE_URL: dbUrl(name), MB_CONFIG: 'none'}, stdio: ['ignore', 'ignore', 'pipe']})
  children.push(child)
  await waitForPort(port, 120_000)
  return {child, port, metrics}
}

/** Requests the origin answered with the file itself, from `mb_origin_requests_total`. */
async function originRequests(metrics: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metrics}/metrics`)).text()
  let sum = 0
  for (const m of text.matchAll(/^mb_origin_requests_total\{[^}]*\} (\d+)$/gm)) sum += Number(m[1])
  return sum
}

/** `count` sequential GETs of the file from `ip` over one keep-alive connection: where each went (mirror id, or 0 for the origin). */
async function natRun(port: number, ip: string, count: number): Promise<number[]> {
  const agent = new http.Agent({keepAlive: true, maxSockets: 1})
  const where: number[] = []
  try {
    for (let i = 0; i < count; i++) {
      where.push(
        await new Promise<number>((resolve, reject) => {
          http
            .get({host: '127.0.0.1', port, path: `/${FILE}`, agent, headers: {'X-Forwarded-For': ip}}, (res) => {
              res.resume()
              const id = /^http:\/\/m(\d+)\.example\//.exec(String(res.headers.location ?? ''))
              res.on('end', () => resolve(res.statusCode === 302 && id ? Number(id[1]) : 0))
            })
            .on('error', reject)
        }),
      )
    }
  } finally {
    agent.destroy()
  }
  return where
}

/** Entry point: `npm run bench -- origin-share [--nat-requests N] [--seconds S] [--connections C] [--rounds R]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      'nat-requests': {type: 'string', default: '1000'},
      seconds: {type: 'string', default: '10'},
      connections: {type: 'string', default: '64'},
      threads: {type: 'string', default: '2'},
      rounds: {type: 'string', default: '3'},
      database: {type: 'string', default: 'mb_bench_origin'},
    },
  })
  const nat = Number(values['nat-requests'])
  const seconds = Number(values.seconds)
  const connections = Number(values.connections)
  const rounds = Number(values.rounds)
  if (![nat, seconds, connections, rounds].every((x) => Number.isInteger(x) && x > 0)) throw new Error('--nat-requests, --seconds, --connections and --rounds take whole numbers > 0')
  const work = mkdtempSync(join(tmpdir(), 'mb-bench-origin-'))
  const children: ChildProcess[] = []
  try {
    const root = join(work, 'root')
    spawnSync('mkdir', ['-p', join(root, 'pub')])
    // A sparse file with the indexed size and mtime: the disk check finds the indexed version.
    const fd = openSync(join(root, FILE), 'w')
    ftruncateSync(fd, SIZE)
    closeSync(fd)
    utimesSync(join(root, FILE), MTIME, MTIME)
    const gb = await prepare(values.database!)
    console.log(`one ${SIZE / 2 ** 20} MiB file on 40 mirrors (5 in GB, 35 in ${ELSEWHERE.join(' ')}), database ${values.database}`)

    // NAT: one address, sequential GETs.
    let mb = await startMb(values.database!, root, [], children)
    const went = await natRun(mb.port, GB, nat)
    const toOrigin = went.filter((id) => id === 0).length
    const inGb = went.filter((id) => gb.has(id)).length
    console.log(`NAT: one GB address, ${nat} GETs: ${toOrigin} from the origin (${((toOrigin / nat) * 100).toFixed(1)}%), ${inGb} to GB mirrors (${((inGb / nat) * 100).toFixed(1)}%)`)
    await stop(mb.child)

    // wrk from 6 addresses, retries on and off, interleaved.
    const script = join(work, 'six.lua')
    writeFileSync(script, luaScript([`/${FILE}`], SIX))
    const on: number[] = []
    const off: number[] = []
    let share = 0
    for (let r = 0; r < rounds; r++) {
      for (const window of ['0', '600']) {
        mb = await startMb(values.database!, root, ['--retry-window', window], children)
        runWrk(`http://127.0.0.1:${mb.port}`, script, connections, 1, Number(values.threads))
        const before = await originRequests(mb.metrics)
        const result = runWrk(`http://127.0.0.1:${mb.port}`, script, connections, seconds, Number(values.threads))
        const origin = (await originRequests(mb.metrics)) - before
        if (window === '600') share = Math.max(share, origin / result.requests)
        ;(window === '0' ? off : on).push(result.rps)
        console.log(
          `wrk, 6 addresses, ${connections} connections, ${seconds} s, --retry-window ${window}: ${result.rps.toFixed(0)} redirects/s, ${origin} of ${result.requests} from the origin${result.non3xx ? `, non-3xx ${result.non3xx}` : ''}`,
        )
        await stop(mb.child)
      }
    }
    const cost = (1 - median(on) / median(off)) * 100
    console.log('\ntargets:')
    verdict('NAT: origin deliveries', toOrigin, 0, '', 'lower')
    verdict('NAT: share in its country', (inGb / nat) * 100, 100, '%', 'higher')
    verdict('wrk from 6 addresses: origin share', share * 100, 0, '%', 'lower')
    verdict(`redirects/s lost to the retry memory (median of ${rounds})`, cost, 5, '%', 'lower')
  } finally {
    for (const c of children) await stop(c)
    rmSync(work, {recursive: true, force: true})
  }
}
