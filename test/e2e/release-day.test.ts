/**
 * Release day end to end (issue 38; docs/operations.md, "Release day"): the origin publishes a
 * new 50 MB file (sparse) and updates its sync trace; two mirrors copy the tree with real
 * rsync, trace included, and one does not; real nginx serves each mirror. With no manual step:
 *
 * - with `select.trust_trace`, the background probe of `mb serve` reads the moved traces and
 *   the new file is redirected to the two synced mirrors, never to the lagging one;
 * - without it, the first request (answered by the origin at once) queues a scan of the file's
 *   folder on demand, and within seconds requests are redirected to the synced mirrors; the
 *   metrics and `mb stats` count the scan and the copies it found;
 * - the lagging mirror's one-folder scan of the new folder (nginx answers 404) is 0 files, exit
 *   0; a mirror whose base URL answers 404 too still fails.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, truncateSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {parsePrometheus} from '../helpers/prometheus.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const TRACE = 'project/trace/origin.example.org'
const MIRRORS = ['synced-a.test', 'synced-b.test', 'lagging.test'] as const
const SYNCED = new Set(['synced-a.test', 'synced-b.test'])
const PROBE_INTERVAL = 2

describe(`release day: a new file reaches the mirrors with no manual step (${backend})`, function () {
  this.timeout(180_000)
  let tdb: TestDatabase
  let work: string
  let root: string
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined

  const tree = (mirror: string) => join(work, 'mirrors', mirror)
  /** A mirror's sync: real rsync of the origin tree, trace included. */
  function sync(mirror: string): void {
    const copied = spawnSync('rsync', ['-a', '--sparse', '--delete', `${root}/`, `${tree(mirror)}/`], {encoding: 'utf8'})
    expect(copied.status, copied.stderr).to.equal(0)
  }
  /** A new config file in the test's directory, written from `yaml`. */
  function configFile(yaml: string): string {
    const file = join(work, `mb-${Math.random().toString(36).slice(2)}.yaml`)
    writeFileSync(file, yaml)
    return file
  }
  /** mb with the test's database and a config file written from `yaml`. */
  async function run(args: string[], yaml: string) {
    const result = await mb([...args, '--config', configFile(yaml)], {env: tdb.env})
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0)
    return result
  }
  const base = () => `root: ${root}\nsync:\n  trace_path: ${TRACE}\n  margin_seconds: 0\nprobe:\n  timeout: 3\n  connect_timeout: 2\n`
  /** The origin publishes `path` (50 MB, sparse), indexes it, and writes its trace a little later. */
  async function publish(path: string): Promise<void> {
    mkdirSync(join(root, path, '..'), {recursive: true})
    writeFileSync(join(root, path), '')
    truncateSync(join(root, path), 50 * 1024 * 1024)
    await run(['index'], base())
    await new Promise((r) => setTimeout(r, 1500))
    writeFileSync(join(root, TRACE), `${Math.floor(Date.now() / 1000)}\n`)
  }
  /** The mirrors `mb file lookup` names for `path`, as `IDENTIFIER by HOW` (how it knows), sorted. */
  async function holders(path: string, yaml: string): Promise<string[]> {
    const lookup = await run(['file', 'lookup', path, '--json'], yaml)
    return lookup
      .json()
      .files[0].mirrors.map((m: any) => `${m.identifier} by ${m.by}`)
      .sort()
  }
  /** The mirror a HEAD for `path` is sent to (its identifier), or `origin` with the reason. */
  async function answer(path: string): Promise<string> {
    const res = await request(serve!.port, `/${path}`, {method: 'HEAD'})
    if (res.status === 302) return String(res.headers['x-mb-mirror'])
    expect(res.status).to.equal(200)
    return `origin ${res.headers['x-mb-origin-reason']}`
  }
  /** Asks for `path` until a mirror is named (at most `seconds`); every answer on the way must be the origin or a synced mirror. */
  async function untilRedirected(path: string, seconds: number): Promise<string[]> {
    const seen: string[] = []
    const deadline = Date.now() + seconds * 1000
    while (Date.now() < deadline) {
      const who = await answer(path)
      seen.push(who)
      if (!who.startsWith('origin')) break
      await new Promise((r) => setTimeout(r, 200))
    }
    for (let i = 0; i < 20; i++) seen.push(await answer(path))
    return seen
  }

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'rsync', 'rsync')
    work = mkdtempSync(join(tmpdir(), 'mb-release-day-'))
    root = join(work, 'origin')
    mkdirSync(join(work, 'mirrors'))
    mkdirSync(join(root, 'pub', '15.5'), {recursive: true})
    mkdirSync(join(root, 'pub', '15.6'), {recursive: true})
    writeFileSync(join(root, 'pub', '15.5', 'release.iso'), Buffer.alloc(200_000, 'o'))
    writeFileSync(join(root, 'pub', '15.6', 'old.iso'), Buffer.alloc(200_000, 'p'))
    tdb = await createTestDatabase()
    await run(['index'], base())
    for (const mirror of MIRRORS) {
      sync(mirror)
      const server = await startNginx({root: tree(mirror), autoindex: 'json'})
      nginx.push(server)
      await run(['mirror', 'add', mirror, '--http-url', server.url, '--country', 'GB', '--lat', '51.5', '--lon', '-0.1'], base())
    }
    await run(['scan', '--all'], base())
  })

  afterEach(async () => {
    await serve?.stop()
    serve = undefined
  })

  after(async () => {
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('with select.trust_trace, within a probe interval the new file goes to the two synced mirrors, never the lagging one', async () => {
    const yaml = `${base()}select:\n  trust_trace: true\nscan:\n  demand: false\nserve:\n  probe_interval: ${PROBE_INTERVAL}\n  poll_seconds: 0.5\n`
    serve = await startServe(['--config', configFile(yaml)], tdb.env)
    await publish('pub/15.6/release.iso')
    expect(await answer('pub/15.6/release.iso')).to.equal('origin no_mirror')
    for (const mirror of SYNCED) sync(mirror)
    const seen = await untilRedirected('pub/15.6/release.iso', 4 * PROBE_INTERVAL + 5)
    const mirrors = seen.filter((who) => !who.startsWith('origin'))
    expect(mirrors.length, seen.join(', ')).to.be.at.least(20)
    for (const who of seen) expect(who).to.be.oneOf(['origin no_mirror', ...SYNCED])
    // A probe round may have read one trace before the second mirror had synced: the next round
    // (one interval later) vouches for that one.
    const deadline = Date.now() + (2 * PROBE_INTERVAL + 5) * 1000
    let held = await holders('pub/15.6/release.iso', yaml)
    while (held.length < SYNCED.size && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500))
      held = await holders('pub/15.6/release.iso', yaml)
    }
    expect(held).to.deep.equal(['synced-a.test by trace', 'synced-b.test by trace'])
  })

  it('without it, the first request queues a folder scan on demand, and within seconds requests are redirected', async () => {
    const yaml = `${base()}serve:\n  poll_seconds: 0.5\n`
    await publish('pub/16.0/release.iso')
    for (const mirror of SYNCED) sync(mirror)
    // A probe round reads the traces: the demand scan leaves out the mirror whose trace is older than the file.
    await run(['probe'], yaml)
    serve = await startServe(['--config', configFile(yaml), '--metrics-listen', '127.0.0.1:0'], tdb.env)
    expect(await answer('pub/16.0/release.iso')).to.equal('origin no_mirror')
    const seen = await untilRedirected('pub/16.0/release.iso', 15)
    expect(seen.filter((who) => !who.startsWith('origin')).length, seen.join(', ')).to.be.at.least(20)
    for (const who of seen) expect(who).to.be.oneOf(['origin no_mirror', ...SYNCED])
    expect(await holders('pub/16.0/release.iso', yaml)).to.deep.equal(['synced-a.test by scan', 'synced-b.test by scan'])
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
    const families = parsePrometheus(await (await fetch(`${metricsUrl}/metrics`)).text())
    const value = (name: string, labels: Record<string, string> = {}) =>
      Number(families.find((f) => f.name === name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value)
    expect(value('mb_demand_folder_scans_total')).to.equal(1)
    expect(value('mb_demand_mirror_scans_total', {result: 'ok'})).to.equal(2)
    expect(value('mb_demand_mirror_scans_total', {result: 'failed'})).to.equal(0)
    expect(value('mb_demand_files_found_total')).to.equal(2)
    const stats = await run(['stats', '--json'], yaml)
    expect(stats.json().demand_scans).to.deep.equal({folder_scans: 1, mirror_scans: 2, failed: 0, files_found: 2})
  })

  it('200 requests of one client for old files no mirror holds cannot drain the budget: a release then reaches the synced mirrors within a minute', async () => {
    const yaml = `${base()}serve:\n  poll_seconds: 0.5\nscan:\n  demand_mirror_budget: 10\n`
    for (let i = 0; i < 200; i++) {
      mkdirSync(join(root, 'junk', String(i)), {recursive: true})
      writeFileSync(join(root, 'junk', String(i), 'old.iso'), Buffer.alloc(10_000, 'j'))
    }
    await run(['index'], base())
    // Indexed two days ago, and on no mirror: what a client asking for a pruned tree meets.
    const database = await tdb.open()
    try {
      await database.db
        .updateTable('file')
        .set({indexed_at: new Date(Date.now() - 2 * 86_400_000)})
        .where('path', 'like', 'junk/%')
        .execute()
    } finally {
      await database.close()
    }
    serve = await startServe(['--config', configFile(yaml), '--metrics-listen', '127.0.0.1:0'], tdb.env)
    for (let i = 0; i < 200; i++) expect(await answer(`junk/${i}/old.iso`)).to.equal('origin no_mirror')
    await new Promise((r) => setTimeout(r, 3000))
    await publish('pub/17.0/release.iso')
    for (const mirror of SYNCED) sync(mirror)
    await run(['probe'], yaml)
    const seen = await untilRedirected('pub/17.0/release.iso', 60)
    expect(seen.filter((who) => !who.startsWith('origin')).length, seen.join(', ')).to.be.at.least(20)
    expect(await holders('pub/17.0/release.iso', yaml)).to.deep.equal(['synced-a.test by scan', 'synced-b.test by scan'])
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve.output())![1]
    const families = parsePrometheus(await (await fetch(`${metricsUrl}/metrics`)).text())
    const overBudget = Number(families.find((f) => f.name === 'mb_demand_mirror_scans_total')?.metrics.find((m) => m.labels?.result === 'over_budget')?.value)
    expect(overBudget, 'the junk share ran out').to.be.greaterThan(0)
  })

  it('a mirror that has not synced the new folder yet scans as 0 files, not a failure; a broken base still fails', async () => {
    const folder = await run(['scan', 'lagging.test', '--dir', 'pub/16.0', '--no-recursive'], base())
    expect(folder.stdout).to.match(/^lagging\.test: ok via http, 0 files \(folder not on the mirror\), 0 matched, 0 stale, 1 missing/)
    const subtree = await run(['scan', 'lagging.test', '--dir', 'pub/16.0', '--json'], base())
    expect(subtree.json().mirrors[0]).to.deep.include({ok: true, files: 0, absent: true})
    await run(['mirror', 'add', 'broken.test', '--http-url', `${nginx[2].url}no-such-base/`, '--country', 'GB'], base())
    const broken = await mb(['scan', 'broken.test', '--dir', 'pub/16.0', '--no-recursive', '--config', configFile(base())], {env: tdb.env})
    expect(broken.code).to.equal(1)
    expect(broken.stderr).to.match(/answered 404 and the base URL http:\/\/127\.0\.0\.1:\d+\/no-such-base\/ answered 404; check the mirror's HTTP URL/)
  })
})
