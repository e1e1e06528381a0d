// @store-independent: the probe's exit codes and on_change hook
/**
 * A cron line that tells: `mb probe --all --quiet --fail-on-down` prints nothing and exits 0
 * while the mirrors stay up, and exits 1 naming the mirror when one goes down; the
 * `probe.on_change` hook runs on each state transition, bounded in time, its failure reported
 * and not fatal.
 */
import {chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type Handler, httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'
import {hookEnvironment, wentDown} from '../../src/lib/probe/notify.js'
import type {ProbeRound} from '../../src/lib/probe/run.js'

describe(`mb probe --fail-on-down and probe.on_change (${backend})`, function () {
  this.timeout(300_000)
  let tdb: TestDatabase
  let dir: string
  let log: string
  const servers: TestServer[] = []
  let flakyUp = true

  /** A config file with `probe:` settings (one failure is enough to go down). */
  function config(name: string, probe: string): string {
    const file = join(dir, name)
    writeFileSync(file, `probe:\n  fail_threshold: 1\n  ok_threshold: 1\n  timeout: 5\n${probe}`)
    return file
  }

  function script(name: string, body: string): string {
    const file = join(dir, name)
    writeFileSync(file, `#!/bin/sh\n${body}\n`)
    chmodSync(file, 0o755)
    return file
  }

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-probe-notify-'))
    log = join(dir, 'hook.log')
    const files = {'pub/small.txt': 'hello'}
    const good = await httpServer(staticHandler(files))
    const serveFiles = staticHandler(files)
    const flaky: Handler = (req, res) => (flakyUp ? serveFiles(req, res) : res.writeHead(503).end('down'))
    servers.push(good, await httpServer(flaky))
    const database = await tdb.open()
    try {
      const ids: number[] = []
      for (const [identifier, server] of [
        ['good.test', servers[0]],
        ['flaky.test', servers[1]],
      ] as const) {
        ids.push(
          (
            await database.db
              .insertInto('mirror')
              .values({identifier, http_url: `http://127.0.0.1:${server.port}/`})
              .returning('id')
              .executeTakeFirstOrThrow()
          ).id,
        )
      }
      await database.db.insertInto('file').values({path: 'pub/small.txt', size: 5, mtime: 1700000000, mirrors: ids}).execute()
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await Promise.all(servers.map((s) => s.close()))
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('says nothing and exits 0 while every mirror is up; exits 1 naming the mirror that went down, even with --quiet; the hook sees each transition', async () => {
    const hook = script('record.sh', `echo "$MB_MIRROR $MB_SCOPE $MB_PROTOCOL $MB_FAMILY $MB_OLD_STATE $MB_NEW_STATE $MB_REASON" >> ${log}`)
    const file = config('record.yaml', `  on_change: ${hook}\n`)
    const quiet = await mb(['probe', '--all', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
    expect({code: quiet.code, stdout: quiet.stdout, stderr: quiet.stderr}).to.deep.equal({code: 0, stdout: '', stderr: ''})
    // The first probe of each protocol/family: unknown -> up.
    expect(readFileSync(log, 'utf8').trim().split('\n').sort()).to.deep.equal(['flaky.test http/ipv4 http ipv4 unknown up ok', 'good.test http/ipv4 http ipv4 unknown up ok'])
    rmSync(log)

    const again = await mb(['probe', '--all', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
    expect({code: again.code, stdout: again.stdout, stderr: again.stderr}).to.deep.equal({code: 0, stdout: '', stderr: ''})
    expect(existsSync(log), 'no transition, no hook run').to.equal(false)

    flakyUp = false
    const down = await mb(['probe', '--all', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
    expect(down.code).to.equal(1)
    expect(down.stdout).to.equal('')
    expect(down.stderr).to.equal('mb probe: mirror flaky.test went down (http_503)\n')
    expect(readFileSync(log, 'utf8').trim().split('\n')).to.have.members(['flaky.test http/ipv4 http ipv4 up down http_503', 'flaky.test mirror   up down http_503'])

    // Still down: no transition, exit 0. Without --fail-on-down a transition exits 0 too.
    const still = await mb(['probe', '--all', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
    expect(still.code, still.stderr).to.equal(0)
    flakyUp = true
    const back = await mb(['probe', '--all', '--json', '--config', file], {env: tdb.env})
    expect(back.code, back.stderr).to.equal(0)
    expect(back.json().up).to.equal(2)
  })

  it('alerts on the first failed round under the default fail_threshold (2), then on the round that takes the mirror out, then no more', async () => {
    const file = join(dir, 'threshold.yaml')
    writeFileSync(file, 'probe:\n  fail_threshold: 2\n  ok_threshold: 1\n  timeout: 5\n')
    flakyUp = true
    try {
      expect((await mb(['probe', 'flaky.test', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})).code).to.equal(0)
      flakyUp = false
      const first = await mb(['probe', 'flaky.test', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
      expect({code: first.code, stdout: first.stdout, stderr: first.stderr}).to.deep.equal({
        code: 1,
        stdout: '',
        stderr: 'mb probe: mirror flaky.test failed this round (http_503); it goes down after probe.fail_threshold failed rounds in a row\n',
      })
      const second = await mb(['probe', 'flaky.test', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
      expect([second.code, second.stderr]).to.deep.equal([1, 'mb probe: mirror flaky.test went down (http_503)\n'])
      const third = await mb(['probe', 'flaky.test', '--quiet', '--fail-on-down', '--config', file], {env: tdb.env})
      expect([third.code, third.stderr]).to.deep.equal([0, ''])
    } finally {
      flakyUp = true
      await mb(['probe', 'flaky.test', '--quiet', '--config', file], {env: tdb.env})
    }
  })

  it('with --json still prints the round, and exits 1 when a mirror went down', async () => {
    flakyUp = false
    try {
      const r = await mb(['probe', 'flaky.test', '--json', '--fail-on-down', '--config', config('plain.yaml', '')], {env: tdb.env})
      expect(r.code).to.equal(1)
      expect(r.json()).to.include({probed: 1, down: 1})
      expect(r.stderr).to.contain('mirror flaky.test went down')
    } finally {
      flakyUp = true
    }
  })

  it('reports a hook that fails or overruns probe.on_change_timeout, and the round stands', async () => {
    const failing = script('fail.sh', 'echo "hook says no" >&2; exit 3')
    flakyUp = true
    expect((await mb(['probe', 'flaky.test', '--config', config('up.yaml', '')], {env: tdb.env})).code).to.equal(0)
    flakyUp = false
    const failed = await mb(['probe', 'flaky.test', '--quiet', '--config', config('fail.yaml', `  on_change: ${failing}\n`)], {env: tdb.env})
    expect(failed.code, failed.stderr).to.equal(0)
    expect(failed.stderr).to.contain('hook says no')
    expect(failed.stderr).to.match(new RegExp(`mb probe: probe\\.on_change ${failing} failed for flaky\\.test \\((mirror|http/ipv4) up->down\\): exit status 3`))

    flakyUp = true // the next round brings it back up: one more transition
    const slow = script('slow.sh', 'sleep 30')
    const started = Date.now()
    const overran = await mb(['probe', 'flaky.test', '--quiet', '--config', config('slow.yaml', `  on_change: ${slow}\n  on_change_timeout: 1\n`)], {env: tdb.env})
    expect(overran.code, overran.stderr).to.equal(0)
    expect(overran.stderr).to.contain('killed after 1 s (probe.on_change_timeout)')
    expect(Date.now() - started).to.be.below(20_000)

    const missing = await mb(['probe', 'good.test', '--config', config('missing.yaml', '  on_change: relative/script\n')], {env: tdb.env})
    expect(missing.code).to.equal(2)
    expect(missing.stderr).to.contain('probe.on_change')
    expect(missing.stderr).to.contain('expected the absolute path of an executable')
  })

  it('--fail-on-down and --format nagios exclude each other', async () => {
    const r = await mb(['probe', '--format', 'nagios', '--fail-on-down', '--config', config('n.yaml', '')], {env: tdb.env})
    expect(r.code).to.equal(3)
    expect(r.stdout).to.contain('exclude each other')
  })
})

describe('probe state changes (unit)', () => {
  const round = {
    mirrors: [
      {identifier: 'a', transitions: [{scope: 'https/ipv6', from: 'up', to: 'down', reason: 'timeout', at: '2026-01-02T03:04:05.000Z'}]},
      {
        identifier: 'b',
        transitions: [
          {scope: 'http/ipv4', from: 'up', to: 'down', reason: 'refused', at: 'T'},
          {scope: 'mirror', from: 'up', to: 'down', reason: 'refused', at: 'T'},
        ],
      },
      {identifier: 'c', transitions: [{scope: 'mirror', from: 'down', to: 'up', reason: 'ok', at: 'T'}]},
    ],
  } as unknown as ProbeRound

  it('a mirror went down when its mirror scope went from up to down', () => {
    expect(wentDown(round).map((c) => c.mirror)).to.deep.equal(['b'])
  })

  it('gives the hook the transition, protocol and family in its environment', () => {
    const env = hookEnvironment({mirror: 'a', scope: 'https/ipv6', from: 'up', to: 'down', reason: 'timeout', at: '2026-01-02T03:04:05.000Z'}, {PATH: '/bin'})
    expect(env).to.deep.equal({
      PATH: '/bin',
      MB_MIRROR: 'a',
      MB_SCOPE: 'https/ipv6',
      MB_PROTOCOL: 'https',
      MB_FAMILY: 'ipv6',
      MB_OLD_STATE: 'up',
      MB_NEW_STATE: 'down',
      MB_REASON: 'timeout',
      MB_AT: '2026-01-02T03:04:05.000Z',
    })
    expect(hookEnvironment({mirror: 'b', scope: 'mirror', from: 'up', to: 'down', reason: 'x', at: 'T'}, {})).to.include({MB_PROTOCOL: '', MB_FAMILY: ''})
  })
})
