// @store-independent: a private PostgreSQL primary and standby of its own
/**
 * `mb serve` on a read replica: a real streaming standby of a private PostgreSQL 15 primary on
 * loopback (initdb, pg_basebackup -R). The snapshot is read from the standby
 * (`database_read_url`) by polling, changes made on the primary reach it through replication,
 * and the download counts are written to the primary.
 */
import {execFileSync} from 'node:child_process'
import {chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import pg from 'pg'
import type {ReadView} from '../../src/lib/db/index.js'
import {openReadReplica, replicaLag} from '../../src/lib/db/replica.js'
import {mb} from '../helpers/cli.js'
import {parsePrometheus} from '../helpers/prometheus.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'
import {freePort} from '../helpers/servers.js'

const PG_BIN = '/usr/lib/postgresql/15/bin'

/** Runs `fn` until it returns a truthy value, every 100 ms for up to `ms`; the last value otherwise. */
async function until<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const value = await fn()
    if (value || Date.now() > end) return value
    await new Promise((r) => setTimeout(r, 100))
  }
}

/** One SQL statement on the server at `url`. */
async function query(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({connectionString: url})
  await client.connect()
  try {
    return await client.query(text)
  } finally {
    await client.end()
  }
}

describe('mb serve reading a streaming standby (e2e)', function () {
  this.timeout(240_000)
  let dir: string
  let origin: string
  let primaryUrl: string
  let standbyUrl: string
  let primary: string
  let primaryPort: number
  const running: string[] = []
  let serve: ServeProcess | undefined
  const asPostgres = (bin: string, args: string[]) => execFileSync('runuser', ['-u', 'postgres', '--', `${PG_BIN}/${bin}`, ...args], {stdio: 'pipe'})
  const start = (data: string, port: number) => {
    asPostgres('pg_ctl', [
      '-D',
      data,
      '-l',
      `${data}.log`,
      '-w',
      '-t',
      '60',
      '-o',
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c wal_level=replica -c max_wal_senders=4 -c hot_standby=on`,
      'start',
    ])
    running.push(data)
  }

  before(async function () {
    for (const bin of ['initdb', 'pg_basebackup', 'pg_ctl']) {
      if (!existsSync(`${PG_BIN}/${bin}`)) {
        if (process.env.CI === 'true') throw new Error(`${PG_BIN}/${bin} is missing under CI: .ci/run must install postgresql-15`)
        console.warn(`    (skipped: ${PG_BIN}/${bin} not found; install it with: apt-get install postgresql-15)`)
        this.skip()
      }
    }
    dir = mkdtempSync(join(tmpdir(), 'mb-standby-'))
    chmodSync(dir, 0o777)
    primaryPort = await freePort()
    const standbyPort = await freePort()
    primary = join(dir, 'primary')
    const standby = join(dir, 'standby')
    // initdb's -A trust covers the replication lines of pg_hba.conf too (local, 127.0.0.1, ::1).
    asPostgres('initdb', ['-D', primary, '-A', 'trust', '-U', 'postgres', '--no-sync'])
    start(primary, primaryPort)
    asPostgres('pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', standby, '-R', '-X', 'stream', '--no-sync'])
    start(standby, standbyPort)
    primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`
    standbyUrl = `postgres://postgres@127.0.0.1:${standbyPort}/postgres`
    expect((await query(standbyUrl, 'SELECT pg_is_in_recovery() AS r')).rows[0].r).to.equal(true)

    origin = join(dir, 'origin')
    mkdirSync(join(origin, 'pub'), {recursive: true})
    writeFileSync(join(origin, 'pub', 'a.iso'), Buffer.alloc(10_000, 1))
    const env = {MB_DATABASE_URL: primaryUrl}
    for (const args of [
      ['db', 'migrate', '--json'],
      ['mirror', 'add', 'm1.mirror.test', '--http-url', 'http://m1.mirror.test/pub/', '--country', 'DE', '--no-probe', '--json'],
      ['index', '--root', origin, '--json'],
    ]) {
      const r = await mb(args, {env})
      expect(r.code, `mb ${args.join(' ')}: ${r.stderr}`).to.equal(0)
    }
    await holdByMirror(primaryUrl, 'pub/a.iso')
    // The standby has replayed the mirror set.
    expect(await until(10_000, async () => (await query(standbyUrl, `SELECT mirrors FROM file WHERE path = 'pub/a.iso'`)).rows[0]?.mirrors?.length === 1)).to.equal(true)
  })

  after(async () => {
    await serve?.stop()
    for (const data of running.reverse()) {
      try {
        asPostgres('pg_ctl', ['-D', data, '-m', 'fast', '-w', 'stop'])
      } catch {
        /* already stopped */
      }
    }
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  /** Sets `path`'s mirror set, on the primary, to the one mirror. */
  async function holdByMirror(url: string, path: string): Promise<void> {
    await query(url, `UPDATE file SET mirrors = ARRAY[(SELECT id FROM mirror WHERE identifier = 'm1.mirror.test')]::smallint[] WHERE path = '${path}'`)
  }

  it('serves from the standby, follows the primary by polling, writes its counts to the primary', async () => {
    serve = await startServe(['--root', origin, '--min-size', '0', '--metrics-listen', '127.0.0.1:0', '--stats-flush-interval', '1'], {
      MB_DATABASE_URL: primaryUrl,
      MB_DATABASE_READ_URL: standbyUrl,
    })
    // Downloads: redirects, and files the origin delivers itself (pub/b.iso before the snapshot has it).
    let downloads = 0
    const get = async (path: string) => {
      const r = await request(serve!.port, `/${path}`)
      if (r.status === 302 || r.status === 200) downloads += 1
      return r
    }
    const first = await get('pub/a.iso')
    expect(first.status, serve.output()).to.equal(302)
    expect(first.headers.location).to.match(/^http:\/\/m1\.mirror\.test\/pub\/pub\/a\.iso$/)
    // mb serve holds connections to the standby.
    const sessions = await query(standbyUrl, `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = 'postgres' AND pid <> pg_backend_pid() AND backend_type = 'client backend'`)
    expect(sessions.rows[0].n).to.be.greaterThan(0)

    // While the standby does not replay, a change on the primary does not reach mb serve:
    // the snapshot is the standby's.
    await query(standbyUrl, 'SELECT pg_wal_replay_pause()')
    writeFileSync(join(origin, 'pub', 'b.iso'), Buffer.alloc(20_000, 2))
    expect((await mb(['index', '--root', origin, '--json'], {env: {MB_DATABASE_URL: primaryUrl}})).code).to.equal(0)
    await holdByMirror(primaryUrl, 'pub/b.iso')
    await new Promise((r) => setTimeout(r, 3000))
    expect((await get('pub/b.iso')).status).not.to.equal(302)

    // The lag gauge: the standby holds WAL it has not replayed.
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
    const families = parsePrometheus(await (await fetch(`${metricsUrl.replace(/\/metrics$/, '')}/metrics`)).text())
    const lag = families.find((f) => f.name === 'mb_database_replica_lag_seconds')
    expect(lag, 'mb_database_replica_lag_seconds').not.to.equal(undefined)
    expect(Number(lag!.metrics[0].value)).to.be.at.least(0)
    const status = await mb(['db', 'status', '--json'], {env: {MB_DATABASE_URL: primaryUrl, MB_DATABASE_READ_URL: standbyUrl}})
    expect(status.code, status.stderr).to.equal(0)
    expect(status.json().replica).to.deep.include({reachable: true, standby: true})
    expect(status.json().replica.lag_seconds).to.be.a('number')

    // Replay resumes: the change reaches mb serve within a few seconds (polling, serve.poll_seconds 2).
    await query(standbyUrl, 'SELECT pg_wal_replay_resume()')
    const t0 = Date.now()
    const second = await until(10_000, async () => (await get('pub/b.iso')).status === 302)
    expect(second, `pub/b.iso not redirected within 10 s:\n${serve.output()}`).to.equal(true)
    expect(Date.now() - t0).to.be.below(10_000)
    for (let i = 0; i < 5; i++) expect((await get('pub/a.iso')).status).to.equal(302)

    // The primary goes away: the standby still answers, the counts wait in memory.
    asPostgres('pg_ctl', ['-D', primary, '-m', 'fast', '-w', 'stop'])
    for (let i = 0; i < 4; i++) expect((await get('pub/a.iso')).status).to.equal(302)
    expect(await until(10_000, async () => /flush to the database failed; counts kept/.test(serve!.output()))).to.equal(true)
    const up = parsePrometheus(await (await fetch(`${metricsUrl.replace(/\/metrics$/, '')}/metrics`)).text()).find((f) => f.name === 'mb_database_up')
    expect(up!.metrics[0].value, 'the snapshot is read from the standby, which is up').to.equal('1')
    start(primary, primaryPort)
    // The next flush (1 s) writes what waited.
    await new Promise((r) => setTimeout(r, 2500))

    await serve.stop()
    const output = serve.output()
    serve = undefined
    expect(output).not.to.match(/counts are lost|read-only transaction/)
    const stats = await mb(['stats', '--json'], {env: {MB_DATABASE_URL: primaryUrl}})
    expect(stats.code, stats.stderr).to.equal(0)
    expect(stats.json().total.downloads).to.equal(downloads)
  })

  it('reads a consistent view on the standby with helper connections (pg_export_snapshot), and refuses to write there', async () => {
    const replica = await openReadReplica(standbyUrl, {poolSize: 3})
    try {
      const views = await replica.readSnapshot((view) => view.parallel([1, 2, 3].map(() => async (v: ReadView) => (await v.query(`SELECT pg_current_snapshot()::text, count(*)::int FROM file`))[0])))
      expect(views[1]).to.deep.equal(views[0])
      expect(views[2]).to.deep.equal(views[0])
      expect((await replicaLag(replica)).standby).to.equal(true)
      let error: unknown
      try {
        await replica.db.deleteFrom('file_link').execute()
      } catch (e) {
        error = e
      }
      expect(String(error)).to.match(/read-only transaction/)
    } finally {
      await replica.close()
    }
  })

  it('keeps a read URL that names the primary by mistake read-only, with no lag', async () => {
    const primaryAsReplica = await openReadReplica(primaryUrl, {poolSize: 1})
    try {
      expect(await replicaLag(primaryAsReplica)).to.deep.include({standby: false, lagSeconds: 0})
      let error: unknown
      try {
        await primaryAsReplica.db.deleteFrom('file_link').execute()
      } catch (e) {
        error = e
      }
      expect(String(error)).to.match(/read-only transaction/)
    } finally {
      await primaryAsReplica.close()
    }
  })

  it('refuses database_read_url on the embedded store', async () => {
    const r = await mb(['db', 'status', '--json'], {env: {MB_DATABASE_URL: undefined, MB_DATABASE_READ_URL: standbyUrl, MB_DATA_DIR: join(dir, 'store')}})
    expect(r.code).to.equal(2)
    expect(r.stderr + r.stdout).to.match(/database_read_url/)
  })
})
