/**
 * What PostgreSQL's processes on this host spend in CPU for one database, for the
 * benchmarks that write counts (bench/serve.ts, bench/stats.ts). Read from /proc, so only
 * when PostgreSQL runs on this host; elsewhere the figures are 0.
 */
import {readFileSync} from 'node:fs'
import pg from 'pg'

/**
 * CPU seconds (user + system) used so far by each backend of `database` (PostgreSQL's
 * processes serving its clients: the benchmark's `mb serve`), by pid. Backends of other
 * databases and the processes shared by all (WAL writer, checkpointer, background writer)
 * are left out: other programs on a shared host (tests) would otherwise count as the
 * benchmark's. A committing backend flushes its WAL itself, so little of the writes' cost
 * is missed. `adminUrl` is any other database of the server.
 */
export async function postgresCpuSeconds(adminUrl: string, database: string): Promise<Map<number, number>> {
  const client = new pg.Client({connectionString: adminUrl})
  await client.connect()
  try {
    return await readCpu(client, database)
  } finally {
    await client.end()
  }
}

/**
 * Waits until the processes of {@link postgresCpuSeconds} have used at most `quietSeconds` of
 * CPU over `idleSeconds`, and at least `minSeconds` (e.g. until a flusher wrote what it holds),
 * polling every 250 ms, at most `maxSeconds` in all; returns the CPU seconds they used since
 * `before`. Not "no CPU at all": every `mb serve` process polls the database for changes
 * (every 2 s by default), so with two workers the backends are never idle for long. A backend
 * that exits meanwhile counts up to its last poll.
 */
export async function postgresCpuWhenIdle(
  adminUrl: string,
  database: string,
  before: ReadonlyMap<number, number>,
  minSeconds: number,
  idleSeconds: number,
  {quietSeconds = 0.02, maxSeconds = 60} = {},
): Promise<number> {
  const client = new pg.Client({connectionString: adminUrl})
  await client.connect()
  try {
    const last = new Map<number, number>()
    const started = performance.now()
    let quietFrom = started
    let quietTotal = Number.NEGATIVE_INFINITY
    for (;;) {
      for (const [pid, s] of await readCpu(client, database)) last.set(pid, s)
      const total = cpuSince(before, last)
      const now = performance.now()
      if (total - quietTotal > quietSeconds) {
        quietFrom = now
        quietTotal = total
      }
      const waited = now - started
      if (waited >= minSeconds * 1000 && (now - quietFrom >= idleSeconds * 1000 || waited >= maxSeconds * 1000)) return total
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
  } finally {
    await client.end()
  }
}

async function readCpu(client: pg.Client, database: string): Promise<Map<number, number>> {
  const out = new Map<number, number>()
  const {rows} = await client.query<{pid: number}>('SELECT pid FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database])
  for (const {pid} of rows) {
    const seconds = processCpuSeconds(pid)
    if (seconds !== undefined) out.set(pid, seconds)
  }
  return out
}

/**
 * CPU seconds (user + system) process `pid` of this host has used, or undefined when it is
 * gone. Read from `/proc/PID/schedstat` (time on the CPU, in nanoseconds) where the kernel
 * keeps it, else from `/proc/PID/stat` (utime + stime in 10 ms ticks): an idle backend spends
 * a fraction of a tick per poll, and ten of them rounded to ticks would blur a 1%-of-a-core
 * figure by as much as itself.
 */
export function processCpuSeconds(pid: number): number | undefined {
  try {
    const ns = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0])
    if (ns > 0) return ns / 1e9
  } catch {
    /* no schedstat: the ticks below */
  }
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8')
      .replace(/^.*\) /, '')
      .split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100 // utime, stime (fields 14 and 15 of stat); USER_HZ
  } catch {
    return undefined // gone, or on another host
  }
}

/**
 * CPU seconds the processes of `after` used since `before` (two {@link postgresCpuSeconds}
 * readings): a process started meanwhile counts whole, one that ended meanwhile is missed.
 */
export function cpuSince(before: ReadonlyMap<number, number>, after: ReadonlyMap<number, number>): number {
  let seconds = 0
  for (const [pid, s] of after) seconds += s - (before.get(pid) ?? 0)
  return seconds
}

/**
 * Rows inserted plus rows updated so far in `table` of the database at `url`
 * (`pg_stat_user_tables`; an upsert that adds to a row counts as an update). Backends report
 * these within about 1 s of going idle.
 */
export async function upsertedRows(url: string, table: string): Promise<number> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    const {rows} = await client.query<{n: string}>('SELECT coalesce(sum(n_tup_ins + n_tup_upd), 0) AS n FROM pg_stat_user_tables WHERE relname = $1', [table])
    return Number(rows[0].n)
  } finally {
    await client.end()
  }
}
