// @store-independent: logrotate and the access log (no store)
/**
 * logrotate with the shipped contrib/logrotate/mb against a running `mb serve` whose reload
 * fails (issue 36, item 4): logrotate reports the failure (non-zero exit, the error on
 * stderr), mb reopens its access log by itself within a second, and every request is in the
 * rotated file or the new one: no line lost, and none in the rotated file once mb has seen it.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const CONTRIB = new URL('../../contrib/logrotate/mb', import.meta.url).pathname

describe('logrotate with contrib/logrotate/mb when the reload fails', function () {
  this.timeout(120_000)
  let t: TestDatabase
  let dir: string
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'logrotate', 'logrotate')
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-logrotate-'))
    mkdirSync(join(dir, 'root'))
    writeFileSync(join(dir, 'root', 'hello.txt'), 'hello\n')
  })

  after(async () => {
    await serve?.stop()
    await t?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('reports the failed reload and loses no line', async () => {
    const log = join(dir, 'access.log')
    serve = await startServe(['--root', join(dir, 'root'), '--access-log', log], t.env)
    for (let i = 0; i < 20; i++) expect((await request(serve.port, `/hello.txt?before=${i}`)).status).to.equal(200)
    // The shipped file, pointed at this log, creating files as the user running the test, and
    // reloading a unit that does not exist here: its postrotate fails as a failed reload would.
    const uid = process.getuid?.() ?? 0
    const user = spawnSync('id', ['-un'], {encoding: 'utf8'}).stdout.trim()
    const group = spawnSync('id', ['-gn'], {encoding: 'utf8'}).stdout.trim()
    const config = readFileSync(CONTRIB, 'utf8')
      .replace('/var/log/mb/access.log', log)
      .replace('create 0640 mb mb', `create 0640 ${user} ${group}`)
      .replace('mb-serve.service', `mb-serve-missing-${process.pid}.service`)
    expect(config).to.contain(log)
    writeFileSync(join(dir, 'logrotate.conf'), config)
    await sleep(400) // the access log writes out every 250 ms
    const rotated = spawnSync('logrotate', ['-f', '-s', join(dir, 'state'), join(dir, 'logrotate.conf')], {encoding: 'utf8'})
    expect(rotated.status, rotated.stderr).to.not.equal(0)
    expect(rotated.stderr).to.match(/error/i)
    for (let i = 0; i < 20; i++) expect((await request(serve.port, `/hello.txt?after=${i}`)).status).to.equal(200)
    await sleep(1600) // within a second mb sees the new file at the path
    for (let i = 0; i < 20; i++) expect((await request(serve.port, `/hello.txt?later=${i}`)).status).to.equal(200)
    await sleep(400)
    const old = readdirSync(dir).filter((name) => name.startsWith('access.log-'))
    expect(old, readdirSync(dir).join(' ')).to.have.length(1)
    const before = readFileSync(join(dir, old[0]), 'utf8').trim().split('\n')
    const now = readFileSync(log, 'utf8').trim().split('\n')
    const count = (lines: string[], mark: string) => lines.filter((l) => l.includes(mark)).length
    expect(count(before, '?before=')).to.equal(20)
    expect(count(now, '?after=') + count(before, '?after=')).to.equal(20)
    expect([count(now, '?later='), count(before, '?later=')]).to.deep.equal([20, 0])
    expect(statSync(log).uid).to.equal(uid)
  })
})
