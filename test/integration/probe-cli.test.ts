import {expect} from 'chai'
import {mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {mb} from '../helpers/cli.js'
import {closedPort, httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

const FILES = {'pub/small.txt': 'hello', 'pub/data.bin': 'a'.repeat(1000)}

describe(`mb probe CLI (${backend})`, () => {
  let tdb: TestDatabase
  let empty: TestDatabase
  let dir: string
  let config: string
  const servers: TestServer[] = []
  const ids: Record<string, number> = {}

  before(async () => {
    tdb = await createTestDatabase()
    empty = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-probe-cli-'))
    config = join(dir, 'mb.yaml')
    writeFileSync(config, 'probe:\n  timeout: 15\n  connect_timeout: 5\n')
    const good = await httpServer(staticHandler(FILES))
    const stale = await httpServer(staticHandler({'pub/small.txt': 'hello', 'pub/data.bin': 'a'.repeat(700)}))
    const missing = await httpServer(staticHandler({'pub/small.txt': 'hello'}))
    servers.push(good, stale, missing)
    const refused = await closedPort()
    const database = await tdb.open()
    try {
      const urls: Record<string, string> = {
        'good.test': `http://127.0.0.1:${good.port}/`,
        'stale.test': `http://127.0.0.1:${stale.port}/`,
        'missing.test': `http://127.0.0.1:${missing.port}/`,
        'dead.test': `http://127.0.0.1:${refused}/`,
      }
      for (const [identifier, http_url] of Object.entries(urls)) {
        ids[identifier] = (await database.db.insertInto('mirror').values({identifier, http_url}).returning('id').executeTakeFirstOrThrow()).id
      }
      const all = Object.values(ids)
      await database.db.insertInto('file').values({path: 'pub/small.txt', size: 5, mtime: 1700000000, mirrors: all}).execute()
      const data = await database.db
        .insertInto('file')
        .values({path: 'pub/data.bin', size: 1000, mtime: 1700000000, mirrors: [ids['good.test'], ids['missing.test']]})
        .returning('id')
        .executeTakeFirstOrThrow()
      await database.db.insertInto('mirror_file_stale').values({mirror_id: ids['stale.test'], file_id: data.id, size: 700, mtime: 1700000000}).execute()
    } finally {
      await database.close()
    }
  })
  after(async () => {
    await Promise.all(servers.map((s) => s.close()))
    await tdb?.drop()
    await empty?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  const run = (args: string[], db = tdb) => mb([...args, '--config', config], {env: db.env})

  it('probes named mirrors and prints the full result with --json', async () => {
    const result = await run(['probe', 'good.test', 'dead.test', '--json'])
    expect(result.code, result.stderr).to.equal(0)
    const round = result.json()
    expect(round).to.include({probed: 2, up: 1, down: 1, skipped: 0})
    const byName = Object.fromEntries(round.mirrors.map((m: any) => [m.identifier, m]))
    expect(byName['good.test'].checks[0]).to.include({key: 'http/ipv4', ok: true, reason: 'ok', http_status: 206})
    expect(byName['good.test'].request).to.deep.equal({kind: 'file', path: 'pub/small.txt'})
    expect(byName['dead.test']).to.include({up: false, reason: 'refused'})
    expect(byName['dead.test'].transitions.map((t: any) => `${t.scope}:${t.from}->${t.to}`)).to.include('mirror:up->down')
  })

  it('prints plain tab-separated lines without a TTY', async () => {
    const result = await run(['probe', 'good.test', 'dead.test'])
    expect(result.code, result.stderr).to.equal(0)
    const lines = result.stdout.trim().split('\n')
    expect(lines[0]).to.equal('mirror\tstate\tcheck\thttp\tms\treason\tnote')
    expect(lines.find((l) => l.startsWith('dead.test\t'))).to.match(/^dead\.test\tdown\thttp\/ipv4\t-\t\d+\trefused\t-$/)
    expect(lines.find((l) => l.startsWith('good.test\t'))).to.match(/^good\.test\tup\thttp\/ipv4\t206\t\d+\tok\t-$/)
    expect(lines.at(-1)).to.equal('1/2 mirrors up')
  })

  it('nagios: OK when no mirror is down (exit 0)', async () => {
    const result = await run(['probe', 'good.test', 'stale.test', '--format', 'nagios'])
    expect(result.stdout.trim()).to.equal('MB PROBE OK - 2/2 mirrors up | up=2;;;0;2 down=0;;;0;2')
    expect(result.code).to.equal(0)
  })

  it('nagios: WARNING when the down share reaches --warning (exit 1)', async () => {
    const result = await run(['probe', 'good.test', 'stale.test', 'missing.test', 'dead.test', '--format', 'nagios', '--warning', '20', '--critical', '50'])
    expect(result.stdout.trim()).to.equal('MB PROBE WARNING - 3/4 mirrors up (down: dead.test) | up=3;;;0;4 down=1;;;0;4')
    expect(result.code).to.equal(1)
    expect(result.stderr).to.equal('')
  })

  it('nagios: CRITICAL when the down share reaches --critical (exit 2)', async () => {
    const result = await run(['probe', 'good.test', 'dead.test', '--format', 'nagios', '--warning', '10', '--critical', '50'])
    expect(result.stdout.trim()).to.equal('MB PROBE CRITICAL - 1/2 mirrors up (down: dead.test) | up=1;;;0;2 down=1;;;0;2')
    expect(result.code).to.equal(2)
  })

  it('nagios: UNKNOWN when nothing can be probed, a name is wrong, or the database is unreachable (exit 3)', async () => {
    const none = await run(['probe', '--format', 'nagios'], empty)
    expect(none.stdout.trim()).to.equal('MB PROBE UNKNOWN - no mirror could be probed')
    expect(none.code).to.equal(3)
    const wrong = await run(['probe', 'nope.test', '--format', 'nagios'])
    expect(wrong.stdout.trim()).to.match(/^MB PROBE UNKNOWN - No mirror named "nope\.test"/)
    expect(wrong.code).to.equal(3)
    const unreachable = await mb(['probe', '--format', 'nagios', '--config', config], {env: {MB_DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/none', MB_DATA_DIR: undefined}})
    expect(unreachable.stdout.trim()).to.match(/^MB PROBE UNKNOWN - Cannot connect to PostgreSQL at postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none/)
    expect(unreachable.stdout).not.to.contain('secret')
    expect(unreachable.code).to.equal(3)
    const badFlag = await run(['probe', '--format', 'nagios', '--warning', 'lots'])
    expect(badFlag.stdout.trim()).to.match(/^MB PROBE UNKNOWN - /)
    expect(badFlag.code).to.equal(3)
  })

  it('mirror list shows probe state, last probe time and reason; mirror show prints recent transitions', async () => {
    expect((await run(['probe', 'good.test', 'dead.test'])).code).to.equal(0)
    const list = await run(['mirror', 'list', '--json'])
    expect(list.code, list.stderr).to.equal(0)
    const byName = Object.fromEntries(list.json().map((m: any) => [m.identifier, m]))
    expect(byName['dead.test'].probe).to.include({state: 'down', reason: 'refused (http/ipv4)'})
    expect(byName['good.test'].probe).to.include({state: 'up', reason: 'ok'})
    expect(Date.parse(byName['good.test'].probe.last_probe_at)).to.be.a('number').and.not.NaN
    const show = await run(['mirror', 'show', 'dead.test'])
    expect(show.code, show.stderr).to.equal(0)
    expect(show.stdout).to.match(/recent transitions:\n/)
    expect(show.stdout).to.match(/Z {2}mirror {6}up -> down {2}\(refused\)/)
    expect(show.stdout).to.match(/Z {2}http\/ipv4 {3}unknown -> down {2}\(refused\)/)
    // The probe's checks as words, and times in whole seconds as the other fields are.
    expect(show.stdout).to.match(/^status: +http\/ipv4 down since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(refused, \d+ failed in a row\)$/m)
    expect(show.stdout).to.match(/^last_probe: +\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/m)
  })

  it('exits 1 on an unknown mirror name, like mb mirror show, and changes nothing', async () => {
    const result = await run(['probe', 'nope.test', '--json'])
    expect(result.code).to.equal(1)
    expect(result.json().error.code).to.equal('MIRROR_NOT_FOUND')
  })

  it('probe file shows which mirrors serve the file at the origin size, which are stale and which miss it', async () => {
    const result = await run(['probe', 'file', 'pub/data.bin', '--json'])
    expect(result.code, result.stderr).to.equal(0)
    const out = result.json()
    expect(out).to.include({path: 'pub/data.bin', size: 1000})
    const byName = Object.fromEntries(out.mirrors.map((m: any) => [m.mirror, m]))
    expect(Object.keys(byName).sort()).to.deep.equal(['good.test', 'missing.test', 'stale.test'])
    expect(byName['good.test']).to.include({verdict: 'ok', http_status: 206, size: 1000, claim: 'held'})
    expect(byName['stale.test']).to.include({verdict: 'stale', http_status: 206, size: 700, claim: 'stale_record'})
    expect(byName['missing.test']).to.include({verdict: 'missing', http_status: 404, size: null})

    const text = await run(['probe', 'file', '/pub/data.bin'])
    expect(text.code, text.stderr).to.equal(0)
    expect(text.stdout).to.contain('pub/data.bin: 1000 bytes at the origin; 3 mirror(s) claim it')
    expect(text.stdout).to.match(/\nstale\.test\tstale\t206\t700\tstale \(700\)\tok\t\d+\thttp:\/\/127\.0\.0\.1:\d+\/pub\/data\.bin\n/)
    expect(text.stdout.trim().split('\n').at(-1)).to.equal('1 ok, 1 stale, 1 missing')
  })

  it('probe file --hash exits 1 with HASH_UNAVAILABLE while the index holds no hash of the file', async () => {
    const result = await run(['probe', 'file', 'pub/data.bin', '--hash', '--timeout', '5', '--json'])
    expect(result.code).to.equal(1)
    expect(result.json().error.code).to.equal('HASH_UNAVAILABLE')
  })

  it('probe file exits 1 for a path the origin index does not have', async () => {
    const result = await run(['probe', 'file', 'no/such/file', '--json'])
    expect(result.code).to.equal(1)
    expect(result.json().error.code).to.equal('FILE_NOT_FOUND')
  })
})
