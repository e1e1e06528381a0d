// @store-independent: whole-copy content checks against nginx mirrors
/**
 * Whole-copy content checks (issue 45) through the compiled CLI and against nginx mirrors on
 * loopback whose access logs count what the checks read:
 * - 21 bytes corrupted at byte 300,000 of a never-checked 12 MiB copy (same size, same
 *   mtime, so every scan still matches it): ONE `mb probe NAME --content` round finds it;
 *   `mb file lookup` and `mb mirror show` say what was read;
 * - an hour of test clock of `mb serve`'s background rounds (12 rounds of a 300 s interval)
 *   fetches no more than `probe.content_budget_bytes` from each mirror, counted in the
 *   mirror's own access log, and its pieces rotate so that the rounds cover the whole copy.
 */
import {expect} from 'chai'
import {randomBytes} from 'node:crypto'
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {startBackgroundContentChecks} from '../../src/lib/probe/background-content.js'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {startNginx, type RunningServer} from '../helpers/servers.js'

const KiB = 1024
const MiB = 1024 * KiB
/** Origin files: big.iso has 48 SHA-1 pieces of 256 KiB. */
const FILES: Record<string, number> = {'pub/big.iso': 12 * MiB, 'pub/small.iso': 300 * KiB, 'pub/tiny.txt': 5 * KiB}
const HOUR_BUDGET = 30 * MiB
const INTERVAL = 300

/** One line of the mirrors' access logs: request path, Range header, status, body bytes. */
interface Logged {
  path: string
  range: string
  status: number
  bytes: number
}

describe(`e2e: whole-copy content checks (${backend})`, function () {
  this.timeout(300_000)
  let base: string
  let origin: string
  let tdb: TestDatabase
  let env: Record<string, string>
  const nginx: Record<string, RunningServer & {accessLog: string}> = {}

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    base = mkdtempSync(join(tmpdir(), 'mb-whole-'))
    origin = join(base, 'origin')
    mkdirSync(join(origin, 'pub'), {recursive: true})
    const mtime = new Date(Date.UTC(2026, 0, 2, 3, 4, 5))
    for (const [path, size] of Object.entries(FILES)) {
      writeFileSync(join(origin, path), randomBytes(size))
      utimesSync(join(origin, path), mtime, mtime)
    }
    for (const name of ['good', 'bad']) {
      cpSync(origin, join(base, name), {recursive: true, preserveTimestamps: true})
      const log = join(base, `${name}-access.log`)
      const server = await startNginx({
        root: join(base, name),
        autoindex: 'json',
        httpConfig: `log_format checks '$uri "$http_range" $status $body_bytes_sent';`,
        serverConfig: `access_log ${log} checks;`,
      })
      nginx[name] = {...server, accessLog: log}
    }
    // 21 bytes at byte 300,000 (in piece 1 of 48): same size, same mtime.
    const bad = join(base, 'bad', 'pub/big.iso')
    const before = statSync(bad)
    const bytes = readFileSync(bad)
    for (let i = 300_000; i < 300_021; i++) bytes[i] ^= 0x5a
    writeFileSync(bad, bytes)
    utimesSync(bad, before.atime, before.mtime)

    tdb = await createTestDatabase()
    env = {...tdb.env, MB_ROOT: origin}
    const index = await mb(['index', '--hashes', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    for (const name of ['good', 'bad']) {
      const add = await mb(['mirror', 'add', `${name}.test`, '--http-url', nginx[name].url, '--country', 'GB', '--json'], {env})
      expect(add.code, add.stderr).to.equal(0)
    }
    const scan = await mb(['scan', 'good.test', 'bad.test', '--json'], {env})
    expect(scan.code, scan.stdout + scan.stderr).to.equal(0)
  })

  after(async () => {
    await Promise.all(Object.values(nginx).map((n) => n.stop()))
    await tdb?.drop()
    if (base) rmSync(base, {recursive: true, force: true})
  })

  /** The content checks' requests in a mirror's access log (scans list directories; checks send Range). */
  function checksLogged(name: string): Logged[] {
    return readFileSync(nginx[name].accessLog, 'utf8')
      .split('\n')
      .map((line) => /^(\S+) "([^"]*)" (\d+) (\d+)$/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null && m[2] !== '-' && m[2] !== '')
      .map((m) => ({path: m[1], range: m[2], status: Number(m[3]), bytes: Number(m[4])}))
  }

  it('finds 21 corrupt bytes of a never-checked 12 MiB copy in ONE mb probe NAME --content round', async () => {
    const r = await mb(['probe', 'bad.test', '--content', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const round = r.json()
    const big = round.mirrors[0].checks.find((c: any) => c.path === 'pub/big.iso')
    expect(big).to.include({verdict: 'corrupt', piece: 0, pieces: 48})
    expect(big.detail).to.match(/^piece 1: SHA-1 /)
    expect(round).to.include({corrupt: 1, marked_bad: 1})
    const lookup = (await mb(['file', 'lookup', 'pub/big.iso', '--json'], {env})).json().files[0]
    expect(lookup.corrupt).to.deep.equal([{identifier: 'bad.test', piece: 1, found_at: lookup.corrupt[0].found_at}])
    const small = (await mb(['file', 'lookup', 'pub/small.iso', '--json'], {env})).json().files[0]
    expect(small.checks).to.have.length(1)
    expect(small.checks[0]).to.include({identifier: 'bad.test', pieces: 2, unchecked_at: null})
    expect(small.checks[0].whole_at).to.be.a('string')
    const human = await mb(['file', 'lookup', 'pub/small.iso'], {env})
    expect(human.stdout).to.match(/content checks .*\n.*\n.*bad\.test\s+0\/2\s+\d{4}-/)
    const show = (await mb(['mirror', 'show', 'bad.test', '--json'], {env})).json()
    expect(show.content_checks).to.include({held: 2, checked_whole: 2, unchecked: 0})
  })

  it('keeps within probe.content_budget_bytes per mirror in an hour of rounds, counted at the mirrors, and rotates through every piece', async () => {
    const config = ConfigSchema.parse({probe: {content_interval_seconds: INTERVAL, content_budget_bytes: HOUR_BUDGET}})
    const database = await tdb.open()
    const before = {good: checksLogged('good').length, bad: checksLogged('bad').length}
    try {
      // The last round is recent: only the rounds run here make up the hour.
      await database.db.insertInto('background_round').values({name: 'content-check', finished_at: new Date()}).execute()
      const checks = startBackgroundContentChecks(database, config)
      try {
        for (let round = 0; round < 3600 / INTERVAL; round++) await checks.runOnce()
      } finally {
        await checks.stop()
      }
      const file = await database.db.selectFrom('file').select('id').where('path', '=', 'pub/big.iso').executeTakeFirstOrThrow()
      const record = await database.db
        .selectFrom('mirror_file_check')
        .innerJoin('mirror', 'mirror.id', 'mirror_file_check.mirror_id')
        .select(['identifier', 'whole_at'])
        .where('file_id', '=', file.id)
        .execute()
      expect(record.find((r) => r.identifier === 'good.test')?.whole_at, 'the rounds covered the good copy whole').to.not.equal(null)
    } finally {
      await database.close()
    }
    for (const name of ['good', 'bad'] as const) {
      const hour = checksLogged(name).slice(before[name])
      const served = hour.reduce((n, l) => n + l.bytes, 0)
      expect(served, `${name}: bytes its nginx served to the checks in the hour`).to.be.at.most(HOUR_BUDGET).and.to.be.above(0)
      expect(hour.every((l) => l.status === 206)).to.equal(true)
    }
    // The good copy is read in consecutive spans, each round going on where the last stopped.
    const spans = checksLogged('good')
      .filter((l) => l.path === '/pub/big.iso')
      .map((l) => l.range.replace('bytes=', '').split('-').map(Number))
    expect(spans[0][0]).to.equal(0)
    for (let i = 1; i < spans.length && spans[i - 1][1] < 12 * MiB - 1; i++) expect(spans[i][0], `span ${i}`).to.equal(spans[i - 1][1] + 1)
    expect(spans.some((s) => s[1] === 12 * MiB - 1)).to.equal(true)
    const show = (await mb(['mirror', 'show', 'good.test', '--json'], {env})).json()
    expect(show.content_checks).to.include({held: 3, checked_whole: 3})
  })
})
