/**
 * `npm run bench -- scan [--entries N] [--tree-files N] [--database-url URL]`
 *
 * 1. Generated listing: an origin index of N files (default 1,000,000) and a listing of the same
 *    N paths (1% at another size, 1% absent), reconciled into PostgreSQL by the real reconciler;
 *    then a rescan with nothing changed.
 * 2. Real tree: M small files (default 100,000) on disk: `mb index` library walk + upsert, then a
 *    scan through a real `rsync --daemon` on a loopback port.
 *
 * Prints seconds and the process's peak RSS (targets: 1M entries < 60 s, < 512 MB).
 * PostgreSQL: --database-url, else MB_BENCH_DATABASE_URL, else a scratch database on
 * MB_BENCH_ADMIN_URL's server (default postgres://postgres@127.0.0.1:5432; created and dropped).
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import pg from 'pg'
import {openDatabase, type Database} from '../src/lib/db/index.js'
import {indexOrigin} from '../src/lib/origin/index.js'
import {reconcileListing} from '../src/lib/scan/reconcile.js'
import {scanMirror} from '../src/lib/scan/scan.js'
import type {ListingEntry} from '../src/lib/scan/types.js'
import {ADMIN_URL, dbUrl, freePort} from './lib.js'

const T = 1_700_000_000

function arg(args: string[], name: string): string | undefined {
  const i = args.indexOf(name)
  return i >= 0 ? args[i + 1] : undefined
}

function rssMiB(): number {
  return Math.round(process.resourceUsage().maxRSS / 1024)
}

function pathOf(i: number): string {
  return `pub/dir${Math.floor(i / 1000)}/sub${Math.floor(i / 100) % 10}/file-${i}.rpm`
}

async function* generated(n: number): AsyncGenerator<ListingEntry> {
  for (let i = 0; i < n; i++) {
    if (i % 100 === 7) continue // absent on the mirror
    yield {path: pathOf(i), type: 'file', size: i % 100 === 3 ? 1 : 1000 + (i % 5000), mtime: T + (i % 1000), mtimePrecision: 1}
  }
}

/** `url` itself when given, else a new database `name` on the admin URL's server (dropped by `drop`). */
export async function scratchDatabase(url: string | undefined, name = `mb_bench_scan_${process.pid}`): Promise<{url: string; drop: () => Promise<void>}> {
  if (url) return {url, drop: async () => {}}
  const admin = ADMIN_URL
  const client = new pg.Client({connectionString: admin})
  await client.connect()
  await client.query(`CREATE DATABASE ${name}`)
  await client.end()
  return {
    url: dbUrl(name),
    drop: async () => {
      const c = new pg.Client({connectionString: admin})
      await c.connect()
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await c.end()
    },
  }
}

/**
 * Reconciles a generated listing of `n` entries against an origin index of `n` rows it
 * generates (the database must hold no files): a first scan, then a rescan with nothing
 * changed. Returns both reconcile times in seconds.
 */
export async function generatedListing(database: Database, n: number): Promise<{first: number; rescan: number}> {
  const db = database.db
  let t = performance.now()
  await sql`INSERT INTO file (path, size, mtime)
    SELECT 'pub/dir' || (i / 1000) || '/sub' || ((i / 100) % 10) || '/file-' || i || '.rpm', 1000 + (i % 5000), ${T} + (i % 1000)
    FROM generate_series(0, ${n - 1}::int) AS i`.execute(db)
  console.log(`origin index: ${n} rows generated in ${((performance.now() - t) / 1000).toFixed(1)} s`)
  const mirror = await db
    .insertInto('mirror')
    .values({identifier: 'bench', http_url: 'http://bench.example/'})
    .returning(['id', 'identifier', 'base_path', 'include_patterns', 'exclude_patterns'])
    .executeTakeFirstOrThrow()
  const seconds: number[] = []
  for (const label of ['first scan (all rows join the set)', 'rescan (nothing changed)']) {
    t = performance.now()
    const result = await reconcileListing(database, generated(n), {mirror, protocol: 'rsync'})
    const s = (performance.now() - t) / 1000
    seconds.push(s)
    console.log(
      `scan ${label}: ${result.files} entries, ${result.matched} matched, ${result.stale} stale, ${result.missing} missing in ${s.toFixed(1)} s ` +
        `(${Math.round(result.files / s)} entries/s), peak RSS ${rssMiB()} MiB`,
    )
  }
  return {first: seconds[0], rescan: seconds[1]}
}

async function realTree(database: Database, files: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'mb-bench-scan-'))
  let daemon: ChildProcess | undefined
  try {
    const root = join(dir, 'tree')
    let t = performance.now()
    for (let d = 0; d * 1000 < files; d++) {
      mkdirSync(join(root, `d${d}`), {recursive: true})
      for (let f = d * 1000; f < Math.min(files, (d + 1) * 1000); f++) writeFileSync(join(root, `d${d}`, `f${f}.txt`), String(f))
    }
    console.log(`tree: ${files} files written in ${((performance.now() - t) / 1000).toFixed(1)} s`)
    await sql`TRUNCATE file, mirror_file_stale, file_tombstone CASCADE`.execute(database.db) // CASCADE: file_zsync references file too
    t = performance.now()
    const first = await indexOrigin(database.db, root)
    console.log(`mb index (first run): ${first.files} files, ${first.added} added in ${first.seconds.toFixed(1)} s, peak RSS ${rssMiB()} MiB`)
    const again = await indexOrigin(database.db, root)
    console.log(`mb index (re-run, nothing changed): ${again.unchanged} unchanged in ${again.seconds.toFixed(1)} s`)

    const port = await freePort()
    writeFileSync(join(dir, 'rsyncd.conf'), `use chroot = no\nuid = root\ngid = root\npid file = ${join(dir, 'pid')}\n[pub]\npath = ${root}\nread only = yes\n`)
    daemon = spawn('rsync', ['--daemon', '--no-detach', `--config=${join(dir, 'rsyncd.conf')}`, `--port=${port}`, '--address=127.0.0.1'], {stdio: 'ignore'})
    await new Promise((r) => setTimeout(r, 500))
    const mirror = await database.db
      .insertInto('mirror')
      .values({identifier: 'bench-rsync', http_url: 'http://bench-rsync.example/', rsync_url: `rsync://127.0.0.1:${port}/pub/`})
      .returningAll()
      .executeTakeFirstOrThrow()
    t = performance.now()
    const scan = await scanMirror(database, mirror, {})
    if (!scan.ok) throw new Error(`rsync scan failed: ${scan.error}`)
    console.log(`mb scan over rsync --daemon: ${scan.files} files, ${scan.matched} matched in ${((performance.now() - t) / 1000).toFixed(1)} s, peak RSS ${rssMiB()} MiB`)
  } finally {
    if (daemon?.pid) daemon.kill('SIGTERM')
    rmSync(dir, {recursive: true, force: true})
  }
}

/** Entry point called by bench/run.ts with the arguments after `scan`. */
export async function main(args: string[]): Promise<void> {
  const entries = Number(arg(args, '--entries') ?? 1_000_000)
  const treeFiles = Number(arg(args, '--tree-files') ?? 100_000)
  const scratch = await scratchDatabase(arg(args, '--database-url') ?? process.env.MB_BENCH_DATABASE_URL)
  const database = await openDatabase({url: scratch.url, schema: 'auto'})
  try {
    console.log(`scan benchmark on PostgreSQL ${database.location} (Node ${process.version})`)
    await generatedListing(database, entries)
    if (treeFiles > 0) await realTree(database, treeFiles)
    console.log(`peak RSS of the whole run: ${rssMiB()} MiB`)
  } finally {
    await database.close()
    await scratch.drop()
  }
}
