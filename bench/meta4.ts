/**
 * Metalink 4 benchmark: meta4 responses per second for one file held by
 * `--mirrors` mirrors (default 40), target >= 5,000/s (MirrorBrain: about 2,600/s).
 *
 * Creates a fresh PostgreSQL database `mb_bench_meta4` (MB_BENCH_ADMIN_URL, default
 * postgres://postgres@127.0.0.1:5432/postgres), a sparse origin file of `--size` bytes with
 * fresh (synthetic) hashes and piece hashes, starts `mb serve` in this process, and drives
 * `GET /pub/big.iso.meta4` with wrk for `--seconds` at `--connections`. Also prints the
 * in-process rate of building + rendering the document alone. Everything started is stopped.
 *
 * Then the same for `.torrent` and `.zsync` of a second sparse file of `--formats-size` bytes
 * (default 700 MB) with synthetic SHA-1 pieces and zsync block sums in the store.
 *
 *   npm run bench -- meta4
 *   npm run bench -- meta4 --size 17179869184 --mirrors 40 --seconds 10
 */
import {spawn} from 'node:child_process'
import {randomBytes} from 'node:crypto'
import {closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync, ftruncateSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import pg from 'pg'
import {ConfigSchema} from '../src/lib/config/schema.js'
import {openDatabase} from '../src/lib/db/index.js'
import {buildDocument} from '../src/lib/metalink/document.js'
import {renderMeta4} from '../src/lib/metalink/meta4.js'
import {pieceSizeFor} from '../src/lib/origin/hash.js'
import {zsyncParams} from '../src/lib/origin/zsync.js'
import type {Candidate} from '../src/lib/select/types.js'
import {startServe} from '../src/lib/serve/run.js'

const ADMIN_URL = process.env.MB_BENCH_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
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

function dbUrl(name: string): string {
  const url = new URL(ADMIN_URL)
  url.pathname = `/${name}`
  return url.toString()
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

/** Runs the benchmark; `args` are the command-line flags after `meta4`. */
export async function main(args: string[]): Promise<void> {
  const {values} = parseArgs({
    args,
    options: {
      size: {type: 'string', default: String(4 * 1024 ** 3)},
      mirrors: {type: 'string', default: '40'},
      seconds: {type: 'string', default: '10'},
      connections: {type: 'string', default: '32'},
      'formats-size': {type: 'string', default: '734003200'},
    },
  })
  const size = Number(values.size)
  const mirrorCount = Number(values.mirrors)
  const pieceSize = pieceSizeFor(size)
  const pieces = Math.max(1, Math.ceil(size / pieceSize))
  const hex = (bytes: number) => randomBytes(bytes).toString('hex')

  // In-process: build + render only.
  const ranked: Candidate[] = Array.from({length: mirrorCount}, (_, i) => ({
    mirror: {id: i + 1, identifier: `m${i}`, country: COUNTRIES[i % COUNTRIES.length][0]} as any,
    realm: 'world',
    rank: i + 1,
    url: `http://m${i}.example.net/pub/pub/big.iso`,
  }))
  const stored = {
    size,
    mtime: 1_700_000_000,
    md5: hex(16),
    sha1: hex(20),
    sha256: hex(32),
    piece_size: pieceSize,
    piece_hash: 'sha256',
    pieces: hex(32 * pieces),
    hashed_size: size,
    hashed_mtime: 1_700_000_000,
  }
  let n = 0
  const t0 = performance.now()
  while (performance.now() - t0 < 2000) {
    renderMeta4(buildDocument({path: 'pub/big.iso', size, mtime: stored.mtime, stored, selection: {realm: 'world', ranked, excluded: []}, baseUrl: 'http://127.0.0.1/'}))
    n++
  }
  const renderRate = n / ((performance.now() - t0) / 1000)

  // Through mb serve.
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
    const fd = openSync(join(root, 'pub', 'big.iso'), 'w')
    ftruncateSync(fd, size) // sparse: no disk space used
    closeSync(fd)
    const st = statSync(join(root, 'pub', 'big.iso'))
    const mtime = Math.floor(st.mtimeMs / 1000)
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
    await database.db
      .insertInto('file')
      .values({
        path: 'pub/big.iso',
        size,
        mtime,
        mirrors: ids,
        md5: stored.md5,
        sha1: stored.sha1,
        sha256: stored.sha256,
        piece_size: pieceSize,
        piece_hash: 'sha256',
        pieces: stored.pieces,
        hashed_size: size,
        hashed_mtime: mtime,
      })
      .execute()
    running = await startServe(ConfigSchema.parse({root, database_url: dbUrl(name), serve: {listen: '127.0.0.1:0'}, log_level: 'silent'}), {database})
    const url = `${running.url}/pub/big.iso.meta4`
    const probe = await fetch(url, {headers: {'x-forwarded-for': '81.2.69.142'}})
    const body = await probe.text()
    const urls = (body.match(/<url /g) ?? []).length
    if (probe.status !== 200 || !body.includes('<pieces')) throw new Error(`unexpected answer ${probe.status}: ${body.slice(0, 300)}`)
    // wrk runs as a child process while this process serves (an async spawn: the server needs the event loop).
    const wrk = await run('wrk', ['-t1', `-c${values.connections}`, `-d${values.seconds}s`, '--latency', url])
    if (wrk.status !== 0) throw new Error(`wrk failed (is it installed? apt-get install wrk): ${wrk.stderr}`)
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1] ?? Number.NaN)
    const p50 = /^\s+50%\s+(\S+)/m.exec(wrk.stdout)?.[1]
    const p99 = /^\s+99%\s+(\S+)/m.exec(wrk.stdout)?.[1]
    const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(wrk.stdout)?.[1] ?? '0'
    // For scale on this machine at this moment: the plain 302 of the same file.
    const redirect = await run('wrk', ['-t1', `-c${values.connections}`, `-d${values.seconds}s`, `${running.url}/pub/big.iso`])
    const redirectRps = Number(/Requests\/sec:\s+([\d.]+)/.exec(redirect.stdout)?.[1] ?? Number.NaN)
    console.log(`meta4 benchmark: file ${size} bytes (${pieces} pieces of ${pieceSize} bytes), ${mirrorCount} mirrors, ${urls} <url> per document, ${body.length} bytes per document`)
    console.log(`  build+render in process: ${Math.round(renderRate)} documents/s`)
    console.log(`  mb serve over HTTP (wrk, ${values.connections} connections, ${values.seconds} s): ${Math.round(rps)} responses/s, p50 ${p50}, p99 ${p99}, non-2xx ${non2xx} (target >= 5,000/s)`)
    console.log(`  for scale, the 302 of the same file: ${Math.round(redirectRps)} responses/s (meta4 at ${Math.round((rps / redirectRps) * 100)}% of it)`)
    await formatRates(database, root, running.url, ids, Number(values['formats-size']), values.connections, values.seconds)
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

/**
 * `.torrent` and `.zsync` responses/s through `mb serve` for a sparse file of `size` bytes held
 * by the mirrors `ids`, with synthetic SHA-1 pieces and zsync block sums (zsyncmake's
 * parameters for that size) in the store.
 */
async function formatRates(database: Awaited<ReturnType<typeof openDatabase>>, root: string, baseUrl: string, ids: number[], size: number, connections: string, seconds: string): Promise<void> {
  const path = join(root, 'pub', 'formats.iso')
  const fd = openSync(path, 'w')
  ftruncateSync(fd, size)
  closeSync(fd)
  const mtime = Math.floor(statSync(path).mtimeMs / 1000)
  const pieceSize = pieceSizeFor(size)
  const pieces = Math.ceil(size / pieceSize)
  const z = zsyncParams(size)
  const blocks = Math.ceil(size / z.blockSize)
  const hex = (bytes: number) => randomBytes(bytes).toString('hex')
  const row = await database.db
    .insertInto('file')
    .values({
      path: 'pub/formats.iso',
      size,
      mtime,
      mirrors: ids,
      md5: hex(16),
      sha1: hex(20),
      sha256: hex(32),
      piece_size: pieceSize,
      piece_hash: 'sha256',
      pieces: hex(32 * pieces),
      sha1_pieces: hex(20 * pieces),
      zsync_block_size: z.blockSize,
      hashed_size: size,
      hashed_mtime: mtime,
    })
    .returning('id')
    .executeTakeFirstOrThrow()
  await database.db
    .insertInto('file_zsync')
    .values({file_id: row.id, hash_lengths: `${z.seqMatches},${z.rsumLen},${z.checksumLen}`, sums: randomBytes(blocks * (z.rsumLen + z.checksumLen))})
    .execute()
  for (const kind of ['torrent', 'zsync']) {
    const url = `${baseUrl}/pub/formats.iso.${kind}`
    let res = await fetch(url)
    for (let i = 0; i < 100 && res.status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 100)) // the snapshot picks the row up
      res = await fetch(url)
    }
    const bytes = (await res.arrayBuffer()).byteLength
    if (res.status !== 200) throw new Error(`unexpected answer ${res.status} for ${url}`)
    const wrk = await run('wrk', ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', url])
    const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(wrk.stdout)?.[1] ?? Number.NaN)
    const p99 = /^\s+99%\s+(\S+)/m.exec(wrk.stdout)?.[1]
    const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(wrk.stdout)?.[1] ?? '0'
    console.log(`  .${kind} of a ${size}-byte file on ${ids.length} mirrors (${bytes} bytes per response): ${Math.round(rps)} responses/s, p99 ${p99}, non-2xx ${non2xx}`)
  }
}
