/**
 * Sync traces end to end with real nginx mirrors on loopback and the compiled CLI: `mb index`
 * writes the origin's trace and leaves it out of the index, each probe round reads every
 * mirror's copy (conditionally the second time), and `mb mirror list`/`show` and the Nagios
 * verdict tell how far each mirror is behind; `mb serve --watch` keeps the origin's trace
 * current.
 */
import {expect} from 'chai'
import {addMirror} from '../../src/lib/mirrors/registry.js'
import {cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase, withDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {parsePrometheus} from '../helpers/prometheus.js'
import {request, startServe, type ServeProcess} from '../helpers/serve-process.js'

const TRACE = 'project/trace/origin.example.org'

describe(`sync traces with nginx mirrors (${backend})`, function () {
  let tdb: TestDatabase
  let work: string
  let root: string
  let config: string
  let originTrace: number
  /** The time in synced.test's trace (a test below moves it on). */
  let syncedTrace: number
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined

  /** A mirror tree: a copy of the origin whose trace holds `trace` (undefined: no trace file). */
  function mirrorTree(name: string, trace: string | undefined): string {
    const dir = join(work, name)
    cpSync(root, dir, {recursive: true})
    rmSync(join(dir, TRACE), {force: true})
    if (trace !== undefined) writeFileSync(join(dir, TRACE), trace)
    return dir
  }

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    work = mkdtempSync(join(tmpdir(), 'mb-trace-e2e-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'pub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'release.iso'), Buffer.alloc(50_000, 'r'))
    config = join(work, 'mb.yaml')
    writeFileSync(config, `root: ${root}\nsync:\n  trace_path: ${TRACE}\n  lag_warning_seconds: 3600\n  lag_critical_seconds: 86400\nprobe:\n  timeout: 3\n  connect_timeout: 2\n`)
    tdb = await createTestDatabase()
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('mb index writes the origin trace and leaves it out of the index', async () => {
    const result = await mb(['index', '--json', '--config', config], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    const json = result.json()
    expect(json.files).to.equal(1)
    originTrace = Number(readFileSync(join(root, TRACE), 'utf8').trim())
    expect(json.trace).to.equal(new Date(originTrace * 1000).toISOString())
    expect(Math.abs(originTrace - Date.now() / 1000)).to.be.below(60)
    const again = await mb(['index', '--config', config], {env: tdb.env})
    expect(again.stdout).to.match(/trace:\s+project\/trace\/origin\.example\.org \(written less than a minute ago\)/)
    const lookup = await mb(['file', 'lookup', TRACE, '--json', '--config', config], {env: tdb.env})
    expect(lookup.code).to.not.equal(0)
  })

  it('a probe round reads every mirror trace: a time, or a clear error', async () => {
    const trees: Record<string, string | undefined> = {
      'synced.test': `${originTrace}\n`,
      'lagging.test': `${originTrace - 7200}\n`,
      'garbage.test': '<html><body>Welcome to nginx!</body></html>',
      'notrace.test': undefined,
    }
    // Registered in-process, as `mb mirror add --no-probe` would: the round below is their first probe.
    await withDatabase(tdb, async (database) => {
      for (const [name, trace] of Object.entries(trees)) {
        const server = await startNginx({root: mirrorTree(name, trace), autoindex: 'html'})
        nginx.push(server)
        await addMirror(database.db, {identifier: name, http_url: server.url, country: 'GB', latitude: 51.5, longitude: -0.1})
      }
    })
    const result = await mb(['probe', '--json', '--config', config], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    const trace = Object.fromEntries(result.json().mirrors.map((m: any) => [m.identifier, m.trace]))
    expect(trace['synced.test']).to.deep.equal({synced_at: new Date(originTrace * 1000).toISOString()})
    expect(trace['lagging.test']).to.deep.equal({synced_at: new Date((originTrace - 7200) * 1000).toISOString()})
    expect(trace['garbage.test'].error).to.match(/no time in a known format/)
    expect(trace['notrace.test'].error).to.match(/^HTTP 404 for http:\/\/127\.0\.0\.1:\d+\/project\/trace\/origin\.example\.org$/)
  })

  it('reads an unchanged trace conditionally the next round (a 304), and keeps the time', async () => {
    const result = await mb(['probe', 'synced.test', '--json', '--config', config], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    expect(result.json().mirrors[0].trace).to.deep.equal({unchanged: true})
    const show = await mb(['mirror', 'show', 'synced.test', '--json', '--config', config], {env: tdb.env})
    expect(show.json()).to.include({synced_at: new Date(originTrace * 1000).toISOString(), sync_lag_seconds: 0, sync_error: null})
  })

  it('mb mirror list and show tell how far each mirror is behind the origin', async () => {
    const list = await mb(['mirror', 'list', '--json', '--config', config], {env: tdb.env})
    const lag = Object.fromEntries(list.json().map((m: any) => [m.identifier, m.sync_lag_seconds]))
    expect(lag).to.deep.equal({'garbage.test': null, 'lagging.test': 7200, 'notrace.test': null, 'synced.test': 0})
    const show = await mb(['mirror', 'show', 'lagging.test', '--config', config], {env: tdb.env})
    expect(show.stdout).to.match(/^sync_lag_seconds:\s+7200 \(2h behind\)$/m)
    const garbage = await mb(['mirror', 'show', 'garbage.test', '--config', config], {env: tdb.env})
    expect(garbage.stdout).to.match(/^sync_error:\s+the trace holds no time in a known format/m)
  })

  it('the Nagios verdict warns about a mirror behind the warning threshold, with max_lag perfdata', async () => {
    const result = await mb(['probe', '--format', 'nagios', '--config', config], {env: tdb.env})
    expect(result.code, result.stdout).to.equal(1)
    expect(result.stdout.trim()).to.match(/^MB PROBE WARNING - 4\/4 mirrors up \(behind: lagging\.test 7200s\) \| .* max_lag=7200s;3600;86400;0;$/)
  })

  it('with sync.max_lag_seconds, a mirror further behind leaves selection (sync_lag), named in mb file lookup', async () => {
    for (const name of ['synced.test', 'lagging.test']) {
      const scanned = await mb(['scan', name, '--config', config], {env: tdb.env})
      expect(scanned.code, scanned.stderr).to.equal(0)
    }
    const strict = join(work, 'strict.yaml')
    writeFileSync(strict, readFileSync(config, 'utf8').replace('sync:\n', 'sync:\n  max_lag_seconds: 3600\n'))
    const explain = async (file: string) => {
      const lookup = await mb(['file', 'lookup', 'pub/release.iso', '--client-ip', '192.0.2.1', '--json', '--config', file], {env: tdb.env})
      expect(lookup.code, lookup.stderr).to.equal(0)
      return lookup.json().files[0].explain
    }
    const strictly = await explain(strict)
    const excluded = Object.fromEntries(strictly.excluded.map((e: any) => [e.mirror, [e.reason, e.detail]]))
    expect(excluded['lagging.test'][0]).to.equal('sync_lag')
    expect(excluded['lagging.test'][1]).to.match(/^its sync trace says \S+Z, 2h behind the origin's, above sync\.max_lag_seconds 3600$/)
    expect(strictly.ranked.map((r: any) => r.mirror)).to.deep.equal(['synced.test'])
    expect((await explain(config)).ranked.map((r: any) => r.mirror).sort()).to.deep.equal(['lagging.test', 'synced.test'])
  })

  it('with select.trust_trace, a moved trace vouches for new files in folders the mirror holds, until the next scan decides', async () => {
    const trust = join(work, 'trust.yaml')
    writeFileSync(trust, readFileSync(config, 'utf8').replace('sync:\n', 'select:\n  trust_trace: true\nsync:\n  margin_seconds: 0\n'))
    // The origin publishes two files; synced.test copies one of them, then writes a newer trace (a lie about the other).
    writeFileSync(join(root, 'pub', 'new.iso'), Buffer.alloc(30_000, 'n'))
    writeFileSync(join(root, 'pub', 'gone.iso'), Buffer.alloc(30_000, 'g'))
    const indexed = await mb(['index', '--config', trust], {env: tdb.env})
    expect(indexed.code, indexed.stderr).to.equal(0)
    cpSync(join(root, 'pub', 'new.iso'), join(work, 'synced.test', 'pub', 'new.iso'), {preserveTimestamps: true})
    await new Promise((r) => setTimeout(r, 1100))
    syncedTrace = Math.floor(Date.now() / 1000)
    writeFileSync(join(work, 'synced.test', TRACE), `${syncedTrace}\n`)
    const round = await mb(['probe', '--json', '--config', trust], {env: tdb.env})
    expect(round.code, round.stderr).to.equal(0)
    const trace = Object.fromEntries(round.json().mirrors.map((m: any) => [m.identifier, m.trace]))
    expect(trace['synced.test'].trusted).to.deep.equal(['pub/gone.iso', 'pub/new.iso'])
    expect(trace['lagging.test']).to.deep.equal({unchanged: true})
    const holders = async (path: string) => {
      const lookup = await mb(['file', 'lookup', path, '--json', '--config', trust], {env: tdb.env})
      expect(lookup.code, lookup.stderr).to.equal(0)
      return lookup.json().files[0].mirrors.map((m: any) => `${m.identifier} by ${m.by}`)
    }
    expect(await holders('pub/new.iso')).to.deep.equal(['synced.test by trace'])
    const text = await mb(['file', 'lookup', 'pub/new.iso', '--config', trust], {env: tdb.env})
    expect(text.stdout).to.match(/synced\.test\s.*trace \(no scan yet\)/)
    // The scan confirms what it lists and takes out what it does not.
    const scanned = await mb(['scan', 'synced.test', '--config', trust], {env: tdb.env})
    expect(scanned.code, scanned.stderr).to.equal(0)
    expect(await holders('pub/new.iso')).to.deep.equal(['synced.test by scan'])
    expect(await holders('pub/gone.iso')).to.deep.equal([])
  })

  it('mb serve --watch writes the origin trace when it starts, and shows each lag in /mirrors and the metrics', async () => {
    rmSync(join(root, TRACE))
    serve = await startServe(['--config', config, '--watch', '--metrics-listen', '127.0.0.1:0'], tdb.env)
    for (let i = 0; i < 50 && !existsSync(join(root, TRACE)); i++) await new Promise((r) => setTimeout(r, 100))
    const written = Number(readFileSync(join(root, TRACE), 'utf8').trim())
    expect(written).to.be.closeTo(Date.now() / 1000, 60)
    const overview = JSON.parse((await request(serve.port, '/mirrors', {headers: {accept: 'application/json'}})).body.toString())
    const lag = Object.fromEntries(overview.mirrors.map((m: any) => [m.name, [m.sync_lag, m.lagging]]))
    // The lag is measured against the origin's trace, which mb serve rewrote when it started.
    const behind = written - (originTrace - 7200)
    expect(lag['lagging.test'][0]).to.be.closeTo(behind, 60)
    expect(lag['lagging.test'][1]).to.equal(true)
    expect(lag['synced.test'][0]).to.be.closeTo(Math.max(0, written - syncedTrace), 60)
    expect(lag['garbage.test']).to.deep.equal([null, false])
    const html = (await request(serve.port, '/mirrors')).body.toString()
    const markers = html.match(/<circle class="marker[\s\S]*?<\/circle>/g) ?? []
    expect(markers.filter((m) => m.includes('lagging.test')).join('\n')).to.match(
      /^<circle class="marker up lagging"[^>]*fill="#fdae61"[^>]*><title>lagging\.test: up, 2h\d*m? behind the origin<\/title>/,
    )
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
    const families = parsePrometheus(await (await fetch(`${metricsUrl}/metrics`)).text())
    const samples = families.find((f) => f.name === 'mb_mirror_sync_lag_seconds')!.metrics
    const byMirror = Object.fromEntries(samples.map((m) => [m.labels!.mirror, Number(m.value)]))
    expect(Object.keys(byMirror).sort()).to.deep.equal(['lagging.test', 'synced.test'])
    expect(byMirror['lagging.test']).to.be.closeTo(behind, 60)
  })
})
