/**
 * Metalink benchmark (issue 19, part 1): responses/s of the client documents of `mb serve`
 * for files on `--mirrors` mirrors (default 40), every eligible mirror listed, each case
 * against the plain 302 of the same file in the same round (the ceiling on this machine at
 * this moment). Cases:
 *
 * - `meta4` and `metalink` of a typical file (`--size`, default 16 MiB, 64 pieces of 256 KiB):
 *   target >= 7,500/s each (3x MirrorBrain's ~2,500/s on this machine);
 * - `meta4` of a 700 MB file (`--big-size`, 1,400 pieces of 512 KiB): target >= 3,000/s;
 * - `.torrent`, `.magnet` and `.zsync` of the 700 MB file and the `.mirrorlist` of the
 *   typical file: measured, no target;
 * - the same as users arrive (`redirect_mixed`, `meta4_mixed`): the 302 and the `.meta4` of
 *   `--mixed-files` files of the typical size (default 5,000) on the same mirrors, each
 *   request for a random one of them from a random one of `--clients` addresses (default
 *   2,000, in X-Forwarded-For from a trusted proxy), so that GeoIP, selection and the
 *   per-version document cache see many keys; printed beside the hot-file figure.
 *
 * Creates a fresh PostgreSQL database `mb_bench_meta4` (MB_BENCH_ADMIN_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres) and sparse origin files with synthetic hashes,
 * piece hashes, SHA-1 pieces and zsync block sums, starts `mb serve` in this process and
 * drives each URL with wrk for `--seconds` at `--connections`. With `--rounds N` the cases run
 * N times interleaved (302, then every case, N times) and the verdicts are judged on the
 * medians. Also prints the in-process rate of building + rendering each meta4 with its cached
 * file part. `--json FILE` writes `{case: {rate, p99_ms, cpu_us, sys_us, bytes}}` (medians; `cpu_us`: this process's
 * CPU time per response, the figure that holds on a loaded machine; `sys_us`: its system time). `--cpu-prof DIR` writes a V8
 * CPU profile of each measured run alone (not the setup, the cold requests or the warm-up) to
 * DIR/CASE-ROUND.cpuprofile (for Chrome DevTools or any `.cpuprofile` reader). `--dump FILE` writes the
 * answers (status, headers, body) to 300 fixed (path, client) pairs of the mixed cases to FILE, the
 * same pairs and the same synthetic digests in every run: two checkouts' files must be equal. Everything started is stopped.
 *
 *   npm run bench -- meta4
 *   npm run bench -- meta4 --rounds 3 --seconds 5 --json /tmp/meta4.json
 */
import {spawn} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Session} from 'node:inspector/promises'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {ConfigSchema} from '../src/lib/config/schema.js'
import {openDatabase} from '../src/lib/db/index.js'
import {buildDocument} from '../src/lib/metalink/document.js'
import {meta4FilePart, meta4Head, meta4Tail} from '../src/lib/metalink/meta4.js'
import {pieceSizeFor} from '../src/lib/origin/hash.js'
import {zsyncParams} from '../src/lib/origin/zsync.js'
import type {Candidate} from '../src/lib/select/types.js'
import {startServe} from '../src/lib/redirector/run.js'
import {ADMIN_URL, dbUrl, median, rng, verdict} from './lib.js'
import {clientAddresses, luaScript} from './serve.js'

const COUNTRIES: Array<[string, string]> = [
  ['DE', 'EU'],
  ['FR', 'EU'],
  ['GB', 'EU'],
  ['SE', 'EU'],
  ['NL', 'EU'],
  ['US', 'NA'],
  ['CA', 'NA'],
  ['BR', 'SA'],
  ['JP', 'AS'],
  ['AU', 'OC'],
]

type Database = Awaited<ReturnType<typeof openDatabase>>

/** One measured URL: its name in the output and the JSON, and its target (responses/s), if any. */
interface Case {
  name: string
  path: string
  target?: number
  /** A wrk request script (random paths and clients); `path` is then one of its paths, checked before measuring. */
  script?: string
}

/** What one wrk run of a case gave. */
interface Measured {
  rate: number
  cpu_us: number
  /** The system-time share of `cpu_us` (the kernel's work for this process: socket writes, wake-ups), µs. */
  sys_us: number
  p99_ms: number
  bytes: number
  non2xx: number
}

function run(command: string, args: string[]): Promise<{status: number; stdout: string; stderr: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({status: code ?? -1, stdout, stderr}))
  })
}

/** Synthetic digests: the same in every run (seeded), so that `--dump` files of two checkouts compare. */
const digestBytes = rng(7)
const hex = (bytes: number) => Buffer.from(Array.from({length: bytes}, () => Math.floor(digestBytes() * 256))).toString('hex')

/** wrk's latency figure (`812.00us`, `9.10ms`, `1.02s`) in milliseconds. */
function latencyMs(text: string | undefined): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text ?? '')
  if (!m) return Number.NaN
  return Number(m[1]) * (m[2] === 'us' ? 0.001 : m[2] === 's' ? 1000 : 1)
}

/** Random digests and SHA-256 pieces of a file of `size` bytes and `mtime` (Unix seconds), as the hash columns of its row. */
function syntheticHashes(size: number, pieceSize: number, mtime: number) {
  const pieces = Math.ceil(size / pieceSize)
  return {md5: hex(16), sha1: hex(20), sha256: hex(32), piece_size: pieceSize, piece_hash: 'sha256', pieces: hex(32 * pieces), sha1_pieces: hex(20 * pieces), hashed_size: size, hashed_mtime: mtime}
}

/** In-process build + render of a meta4 with `pieces` pieces and `mirrors` ranked mirrors, its file part made once (as the server keeps it): documents/s. */
function renderRate(size: number, pieceSize: number, mirrors: number): number {
  const ranked: Candidate[] = Array.from({length: mirrors}, (_, i) => ({
    mirror: {id: i + 1, identifier: `m${i}`, country: COUNTRIES[i % COUNTRIES.length][0]} as any,
    realm: 'world',
    rank: i + 1,
    url: `http://m${i}.example.net/pub/pub/file.iso`,
  }))
  const stored = {size, mtime: 1_700_000_000, ...syntheticHashes(size, pieceSize, 1_700_000_000)}
  const build = () => buildDocument({path: 'pub/file.iso', size, mtime: stored.mtime, stored, selection: {realm: 'world', ranked, excluded: []}, baseUrl: 'http://127.0.0.1/', maxUrls: 100})
  const part = Buffer.from(meta4FilePart(build()))
  let n = 0
  const t0 = performance.now()
  while (performance.now() - t0 < 1000) {
    // What the server does per request: the document, its head and tail, their UTF-8 lengths (the part is sent as it is).
    const doc = build()
    Buffer.byteLength(meta4Head(doc)) + part.length + Buffer.byteLength(meta4Tail(doc))
    n++
  }
  return n / ((performance.now() - t0) / 1000)
}

/** A sparse file of `size` bytes at root/pub/NAME and its index row (synthetic digests and pieces, SHA-1 pieces, zsync sums for `zsync`). */
async function addFile(database: Database, root: string, name: string, size: number, ids: number[], zsync: boolean): Promise<void> {
  const fd = openSync(join(root, 'pub', name), 'w')
  ftruncateSync(fd, size) // sparse: no disk space used
  closeSync(fd)
  const mtime = Math.floor(statSync(join(root, 'pub', name)).mtimeMs / 1000)
  const pieceSize = pieceSizeFor(size)
  const z = zsyncParams(size)
  const row = await database.db
    .insertInto('file')
    .values({
      path: `pub/${name}`,
      size,
      mtime,
      mirrors: ids,
      ...syntheticHashes(size, pieceSize, mtime),
      sha1_pieces: hex(20 * Math.ceil(size / pieceSize)),
      zsync_block_size: zsync ? z.blockSize : null,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  if (zsync) {
    const blocks = Math.ceil(size / z.blockSize)
    await database.db
      .insertInto('file_zsync')
      .values({file_id: row.id, hash_lengths: `${z.seqMatches},${z.rsumLen},${z.checksumLen}`, sums: randomBytes(blocks * (z.rsumLen + z.checksumLen))})
      .execute()
  }
}

/** The path of mixed file `i` (100 directories). */
function mixedPath(i: number): string {
  return `pub/mixed/d${i % 100}/file-${i}.iso`
}

/**
 * `count` files of `size` bytes on every mirror of `ids` for the mixed cases (sparse origin
 * files, synthetic hashes and pieces, one mtime), and their wrk scripts in `root`: the 302s and
 * the `.meta4`s of random ones of them, each from a random one of `clients` addresses.
 */
async function addMixedFiles(database: Database, root: string, count: number, size: number, ids: number[], clients: number): Promise<string[]> {
  const mtime = 1_700_000_000
  const pieceSize = pieceSizeFor(size)
  const paths = Array.from({length: count}, (_, i) => mixedPath(i))
  for (const path of paths) {
    const full = join(root, path)
    mkdirSync(full.slice(0, full.lastIndexOf('/')), {recursive: true})
    const fd = openSync(full, 'w')
    ftruncateSync(fd, size) // sparse: no disk space used
    closeSync(fd)
    utimesSync(full, mtime, mtime)
  }
  for (let start = 0; start < count; start += 500) {
    const rows = paths.slice(start, start + 500).map((path) => ({path, size, mtime, mirrors: ids, ...syntheticHashes(size, pieceSize, mtime)}))
    await database.db.insertInto('file').values(rows).execute()
  }
  const addresses = clientAddresses(clients)
  for (const [name, suffix] of [
    ['redirect_mixed', ''],
    ['meta4_mixed', '.meta4'],
  ]) {
    writeFileSync(
      join(root, `${name}.lua`),
      luaScript(
        paths.map((p) => `/${p}${suffix}`),
        addresses,
      ),
    )
  }
  return paths
}

/**
 * Requests every one of `urls` once, 16 at a time: what the first request of each file costs
 * (caches cold: the hash row read from the database, the file part rendered), in responses/s.
 * Run before the mixed cases are measured, so that they measure a server that has seen its
 * files, as one does minutes after a start.
 */
async function firstRequests(urls: string[]): Promise<number> {
  const t0 = performance.now()
  let next = 0
  const worker = async () => {
    while (next < urls.length) {
      const res = await fetch(urls[next++], {redirect: 'manual'})
      await res.arrayBuffer()
    }
  }
  await Promise.all(Array.from({length: 16}, worker))
  return urls.length / ((performance.now() - t0) / 1000)
}

/** Waits until `url` answers 200 (the snapshot has picked the rows up); its body's bytes. */
async function ready(url: string, check: (body: string) => boolean): Promise<number> {
  let status = 0
  let body = ''
  for (let i = 0; i < 100; i++) {
    const res = await fetch(url, {headers: {'x-forwarded-for': '81.2.69.142'}, redirect: 'manual'})
    status = res.status
    body = await res.text()
    if ((status === 200 || status === 302) && check(body)) return Buffer.byteLength(body)
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`unexpected answer ${status} for ${url}: ${body.slice(0, 300)}`)
}

/** One wrk run against `url`; `cpu_us`: this process's CPU time (user + system: the server and its PostgreSQL client) per response, µs. */
async function measure(url: string, connections: string, seconds: string, bytes: number, script?: string): Promise<Measured> {
  const cpu = process.cpuUsage()
  const wrk = await run('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', ...(script ? ['-s', script] : []), url])
  const used = process.cpuUsage(cpu)
  if (wrk.status !== 0) throw new Error(`wrk failed (is it installed? apt-get install wrk): ${wrk.stderr}`)
  const requests = Number(/(\d+) requests in/.exec(wrk.stdout)?.[1] ?? Number.NaN)
  return {
    cpu_us: (used.user + used.system) / requests,
    sys_us: used.system / requests,
    rate: Number(/Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1] ?? Number.NaN),
    p99_ms: latencyMs(/^\s+99%\s+(\S+)/m.exec(wrk.stdout)?.[1]),
    bytes,
    non2xx: Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(wrk.stdout)?.[1] ?? '0'),
  }
}

/** What {@link sampleAnswers} keeps of one answer. */
interface Sample {
  url: string
  client: string
  status: number
  headers: Array<[string, string]>
  body: string
}

/**
 * The answers to 300 (path, client) pairs of the mixed world, the same pairs in every run
 * (seeded): 200 `.meta4`, 50 `.metalink`, 50 redirects, each with its status, its headers
 * (not `Date`, `Connection`, `Keep-Alive`) and its body (`<published>` and `pubdate` blanked,
 * they are the time of the request; this server's base URL as `BASE`), for `--dump`: two checkouts' files must be equal.
 */
async function sampleAnswers(base: string, paths: string[], clients: string[]): Promise<Sample[]> {
  const random = rng(11)
  const out: Sample[] = []
  for (let i = 0; i < 300; i++) {
    const suffix = i < 200 ? '.meta4' : i < 250 ? '.metalink' : ''
    const url = `/${paths[Math.floor(random() * paths.length)]}${suffix}`
    const client = clients[Math.floor(random() * clients.length)]
    const res = await fetch(`${base}${url}`, {headers: {'x-forwarded-for': client}, redirect: 'manual'})
    const headers = [...res.headers].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name)).map(([name, value]): [string, string] => [name, value.replaceAll(base, 'BASE')])
    const body = (await res.text())
      .replaceAll(base, 'BASE')
      .replace(/<published>[^<]*<\/published>/, '<published/>')
      .replace(/pubdate="[^"]*"/, 'pubdate=""')
    out.push({url, client, status: res.status, headers, body})
  }
  return out
}

/** Starts V8's CPU profiler on this process (the server runs in it), for `--cpu-prof`. */
async function startProfile(): Promise<Session> {
  const session = new Session()
  session.connect()
  await session.post('Profiler.enable')
  await session.post('Profiler.start')
  return session
}

/** Stops the profiler of {@link startProfile} and writes its profile (Chrome's `.cpuprofile` JSON) to `file`. */
async function stopProfile(session: Session, file: string): Promise<void> {
  const {profile} = await session.post('Profiler.stop')
  writeFileSync(file, JSON.stringify(profile))
  session.disconnect()
}

/** Runs the benchmark; `args` are the command-line flags after `meta4`. */
export async function main(args: string[]): Promise<void> {
  const {values} = parseArgs({
    args,
    options: {
      size: {type: 'string', default: String(16 * 1024 ** 2)},
      'big-size': {type: 'string', default: '734003200'},
      mirrors: {type: 'string', default: '40'},
      seconds: {type: 'string', default: '5'},
      connections: {type: 'string', default: '32'},
      rounds: {type: 'string', default: '1'},
      json: {type: 'string'},
      cases: {type: 'string'},
      'mixed-files': {type: 'string', default: '5000'},
      clients: {type: 'string', default: '2000'},
      'cpu-prof': {type: 'string'},
      dump: {type: 'string'},
    },
  })
  const size = Number(values.size)
  const bigSize = Number(values['big-size'])
  const mirrorCount = Number(values.mirrors)
  const rounds = Math.max(1, Number(values.rounds))
  const all: Case[] = [
    {name: 'redirect', path: 'pub/file.iso'},
    {name: 'meta4', path: 'pub/file.iso.meta4', target: 7500},
    {name: 'metalink', path: 'pub/file.iso.metalink', target: 7500},
    {name: 'meta4_big', path: 'pub/big.iso.meta4', target: 3000},
    {name: 'torrent', path: 'pub/big.iso.torrent'},
    {name: 'magnet', path: 'pub/big.iso.magnet'},
    {name: 'zsync', path: 'pub/big.iso.zsync'},
    {name: 'mirrorlist', path: 'pub/file.iso.mirrorlist'},
    {name: 'redirect_mixed', path: mixedPath(0), script: 'redirect_mixed.lua'},
    {name: 'meta4_mixed', path: `${mixedPath(0)}.meta4`, script: 'meta4_mixed.lua'},
  ]
  const only = values.cases?.split(',')
  const cases = all.filter((c) => c.name === 'redirect' || !only || only.includes(c.name))
  const inProcess = {meta4: renderRate(size, pieceSizeFor(size), mirrorCount), meta4_big: renderRate(bigSize, pieceSizeFor(bigSize), mirrorCount)}

  const name = 'mb_bench_meta4'
  const admin = new pg.Client({connectionString: ADMIN_URL})
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const root = mkdtempSync(join(tmpdir(), 'mb-bench-meta4-'))
  const database = await openDatabase({url: dbUrl(name), schema: 'auto'})
  let running: Awaited<ReturnType<typeof startServe>> | undefined
  try {
    mkdirSync(join(root, 'pub'))
    const ids: number[] = []
    for (let i = 0; i < mirrorCount; i++) {
      const [cc, continent] = COUNTRIES[i % COUNTRIES.length]
      const row = await database.db
        .insertInto('mirror')
        .values({identifier: `m${i}.example.net`, http_url: `http://m${i}.example.net/pub/`, country: cc, continent} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      ids.push(row.id)
    }
    await addFile(database, root, 'file.iso', size, ids, false)
    await addFile(database, root, 'big.iso', bigSize, ids, true)
    const mixedPaths = await addMixedFiles(database, root, Number(values['mixed-files']), size, ids, Number(values.clients))
    // No retry memory: wrk's one client asking again and again for the hot file would be a
    // client retrying, sent down the ranks and every 42nd time to the origin, which then
    // delivers 16 MiB; the hot 302 is the plain redirect of that file, the ceiling.
    const select = {metalink_max_mirrors: 100, retry_window_seconds: 0}
    const config = ConfigSchema.parse({root, database_url: dbUrl(name), trusted_proxies: ['127.0.0.1/32'], serve: {listen: '127.0.0.1:0'}, select, log_level: 'silent'})
    running = await startServe(config, {database})
    const base = running.url
    const bytes = new Map<string, number>()
    for (const c of cases) bytes.set(c.name, await ready(`${base}/${c.path}`, (body) => !c.path.endsWith('.meta4') || body.includes('<pieces')))
    for (const c of cases) {
      if (c.script === undefined) continue
      const suffix = c.path.slice(mixedPath(0).length)
      const rate = await firstRequests(mixedPaths.map((p) => `${base}/${p}${suffix}`))
      console.log(`  ${c.name}: the first request of each of ${mixedPaths.length} files (caches cold, 16 at a time): ${Math.round(rate)}/s`)
    }
    const urls = ((await (await fetch(`${base}/pub/file.iso.meta4`)).text()).match(/<url /g) ?? []).length
    if (values.dump) writeFileSync(values.dump, `${JSON.stringify(await sampleAnswers(base, mixedPaths, clientAddresses(Number(values.clients))), null, 1)}\n`)
    const script = (c: Case) => (c.script ? join(root, c.script) : undefined)
    for (const c of cases) await measure(`${base}/${c.path}`, values.connections, '1', 0, script(c)) // warm-up, not counted
    const results = new Map<string, Measured[]>(cases.map((c) => [c.name, []]))
    const profileDir = values['cpu-prof']
    for (let round = 0; round < rounds; round++) {
      for (const c of cases) {
        const profiler = profileDir === undefined ? undefined : await startProfile()
        results.get(c.name)!.push(await measure(`${base}/${c.path}`, values.connections, values.seconds, bytes.get(c.name)!, script(c)))
        if (profiler) await stopProfile(profiler, join(profileDir!, `${c.name}-${round + 1}.cpuprofile`))
      }
    }
    report(cases, results, {
      size,
      bigSize,
      mirrorCount,
      urls,
      rounds,
      seconds: values.seconds,
      connections: values.connections,
      inProcess,
      mixedFiles: Number(values['mixed-files']),
      clients: Number(values.clients),
    })
    if (values.json) {
      const figures = Object.fromEntries(
        cases.map((c) => [
          c.name,
          {
            rate: Math.round(median(results.get(c.name)!.map((m) => m.rate))),
            p99_ms: median(results.get(c.name)!.map((m) => m.p99_ms)),
            cpu_us: Math.round(median(results.get(c.name)!.map((m) => m.cpu_us)) * 10) / 10,
            sys_us: Math.round(median(results.get(c.name)!.map((m) => m.sys_us)) * 10) / 10,
            bytes: bytes.get(c.name),
          },
        ]),
      )
      writeFileSync(values.json, `${JSON.stringify(figures, null, 2)}\n`)
    }
  } finally {
    await running?.close()
    await database.close()
    rmSync(root, {recursive: true, force: true})
    const cleanup = new pg.Client({connectionString: ADMIN_URL})
    await cleanup.connect()
    await cleanup.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await cleanup.end()
  }
}

/** Prints each case's median rate, p99, size and share of the 302, and each target with its verdict. */
function report(
  cases: Case[],
  results: Map<string, Measured[]>,
  run: {size: number; bigSize: number; mirrorCount: number; urls: number; rounds: number; seconds: string; connections: string; inProcess: Record<string, number>; mixedFiles: number; clients: number},
): void {
  const rate = (name: string) => median(results.get(name)!.map((m) => m.rate))
  console.log(
    `metalink benchmark: ${run.mirrorCount} mirrors (${run.urls} <url> per document), typical file ${run.size} bytes, big file ${run.bigSize} bytes (${Math.ceil(run.bigSize / pieceSizeFor(run.bigSize))} pieces); wrk ${run.connections} connections, ${run.seconds} s per case, ${run.rounds} interleaved round(s), medians`,
  )
  console.log(`  in process, build + render with the cached file part: meta4 ${Math.round(run.inProcess.meta4)}/s, meta4_big ${Math.round(run.inProcess.meta4_big)}/s`)
  for (const c of cases) {
    const m = results.get(c.name)!
    const p99 = median(m.map((x) => x.p99_ms))
    const non2xx = m.reduce((n, x) => n + x.non2xx, 0)
    const mixed = c.script !== undefined
    const against = mixed && c.name !== 'redirect_mixed' && results.has('redirect_mixed') ? 'redirect_mixed' : 'redirect'
    const share = c.name === 'redirect' ? 'the ceiling' : `${((rate(c.name) / rate(against)) * 100).toFixed(0)}% of the ${against === 'redirect' ? '302' : 'mixed 302'}`
    const each = run.rounds > 1 ? ` [${m.map((x) => Math.round(x.rate)).join(', ')}]` : ''
    console.log(
      `  ${c.name.padEnd(14)} ${String(Math.round(rate(c.name))).padStart(6)}/s${each}, p99 ${p99.toFixed(1)} ms, ${median(m.map((x) => x.cpu_us)).toFixed(1)} µs CPU (${median(m.map((x) => x.sys_us)).toFixed(1)} system), ${m[0].bytes} bytes, ${share}${non2xx ? `, NON-2XX ${non2xx}` : ''}  (/${c.path}${mixed ? ` and the rest of ${run.mixedFiles} paths from ${run.clients} clients` : ''})`,
    )
  }
  // As users arrive: each mixed figure beside the hot file's (one path, one client).
  for (const hot of ['redirect', 'meta4']) {
    if (!results.has(`${hot}_mixed`) || !results.has(hot)) continue
    const mixed = rate(`${hot}_mixed`)
    console.log(
      `  ${hot}: hot file ${Math.round(rate(hot))}/s, mixed (${run.mixedFiles} paths, ${run.clients} clients) ${Math.round(mixed)}/s, ${((mixed / rate(hot)) * 100).toFixed(0)}% of the hot figure`,
    )
  }
  for (const c of cases) if (c.target !== undefined) verdict(c.name, rate(c.name), c.target, '/s', 'higher')
}
