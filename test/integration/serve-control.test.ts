/**
 * `mb serve --pid-file` and `mb serve reload|stop|upgrade` (issue 36, item 5): a handle on
 * the daemon without systemd. The pid file is written once the server listens and removed
 * on exit; reload sends SIGHUP (the server logs `reloaded`), stop sends SIGTERM and waits
 * until the process is gone; a stale pid file is reported by the control commands and taken
 * over by a new server; a live one refuses a second server.
 */
import {spawn, spawnSync} from 'node:child_process'
import {existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

/** The pid of a process that has exited (and been reaped). */
function deadPid(): number {
  const child = spawnSync('sh', ['-c', 'echo $$'], {encoding: 'utf8'})
  return Number(child.stdout.trim())
}

async function waitFor(what: string, serve: ServeProcess, predicate: () => boolean, ms = 30_000): Promise<void> {
  for (let waited = 0; !predicate(); waited += 50) {
    if (waited > ms) throw new Error(`timed out waiting for ${what}:\n${serve.output()}`)
    await sleep(50)
  }
}

describe(`mb serve --pid-file, reload, stop (${backend})`, function () {
  this.timeout(180_000)
  let tdb: TestDatabase
  let dir: string
  let root: string
  let pidFile: string
  let serve: ServeProcess | undefined

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-serve-control-'))
    root = join(dir, 'root')
    mkdirSync(root)
    pidFile = join(dir, 'serve.pid')
  })

  afterEach(async () => {
    await serve?.stop()
    serve = undefined
  })

  after(async () => {
    await tdb?.drop()
    rmSync(dir, {recursive: true, force: true})
  })

  it('writes the pid file, reloads on `mb serve reload`, stops on `mb serve stop` and removes the file', async () => {
    serve = await startServe(['--root', root, '--pid-file', pidFile], tdb.env)
    const pid = serve.child.pid!
    await waitFor('the pid file', serve, () => existsSync(pidFile))
    expect(readFileSync(pidFile, 'utf8')).to.equal(`${pid}\n`)
    expect(readFileSync(`/proc/${pid}/cmdline`, 'utf8')).to.match(/^mb serve/)

    const second = await mb(['serve', '--root', root, '--listen', '127.0.0.1:0', '--pid-file', pidFile], {env: tdb.env})
    expect(second.code, second.stderr).to.equal(1)
    expect(second.stderr).to.include(`already running as pid ${pid}`)

    // One process: SIGUSR2 would be ignored, so `mb serve upgrade` sends nothing and says what to do.
    const upgrade = await mb(['serve', 'upgrade', '--pid-file', pidFile, '--json'], {env: tdb.env})
    expect(upgrade.code, upgrade.stderr).to.equal(1)
    expect(upgrade.json().error).to.include({code: 'SERVE_UPGRADE_UNSUPPORTED'})
    expect(upgrade.json().error.message).to.include('nothing was sent').and.to.include('mb-serve.socket')
    await sleep(200)
    expect(serve.output()).to.not.include('SIGUSR2')

    const reload = await mb(['serve', 'reload', '--pid-file', pidFile], {env: tdb.env})
    expect(reload.code, reload.stderr).to.equal(0)
    expect(reload.stdout).to.include(`Sent SIGHUP to mb serve (pid ${pid}`)
    await waitFor('the reload', serve, () => serve!.output().includes('"msg":"reloaded"'))

    const stop = await mb(['serve', 'stop', '--pid-file', pidFile, '--json'], {env: tdb.env})
    expect(stop.code, stop.stderr).to.equal(0)
    expect(stop.json()).to.include({pid, signal: 'SIGTERM', pidFile})
    expect(serve.child.exitCode ?? serve.child.signalCode).to.not.equal(null)
    expect(serve.child.exitCode).to.equal(0)
    expect(existsSync(pidFile)).to.equal(false)
  })

  it('reports a missing or stale pid file with exit 1, and a new server takes a stale one over', async () => {
    const missing = await mb(['serve', 'stop', '--pid-file', pidFile], {env: tdb.env})
    expect(missing.code).to.equal(1)
    expect(missing.stderr).to.include('No mb serve is running')

    const dead = deadPid()
    writeFileSync(pidFile, `${dead}\n`)
    const stale = await mb(['serve', 'reload', '--pid-file', pidFile, '--json'], {env: tdb.env})
    expect(stale.code).to.equal(1)
    expect(stale.json().error).to.include({code: 'SERVE_NOT_RUNNING'})
    expect(stale.json().error.message).to.include(`stale (pid ${dead} is gone)`)

    // A live process that is not mb serve (this test runner) is stale too, and never signalled.
    writeFileSync(pidFile, `${process.pid}\n`)
    const other = await mb(['serve', 'stop', '--pid-file', pidFile], {env: tdb.env})
    expect(other.code).to.equal(1)
    expect(other.stderr).to.include(`pid ${process.pid} is another program`)

    // Only decimal digits name a pid (the attack run's 0x50b7, 1e3, 20663.0 were read as pids).
    for (const text of ['0x50b7\n', '1e3\n', '20663.0\n']) {
      writeFileSync(pidFile, text)
      const malformed = await mb(['serve', 'stop', '--pid-file', pidFile, '--json'], {env: tdb.env})
      expect(malformed.code, text).to.equal(2)
      expect(malformed.json().error).to.include({code: 'PID_FILE_INVALID'})
      expect(malformed.json().error.message).to.include('not a process id')
    }

    // Another program titled like mb serve (`python3 … run.js serve` in the attack run) is never signalled.
    const impostor = spawn('sh', ['-c', 'while :; do sleep 0.2; done', '/opt/mb/bin/run.js', 'serve'], {stdio: 'ignore'})
    try {
      writeFileSync(pidFile, `${impostor.pid}\n`)
      const alike = await mb(['serve', 'stop', '--pid-file', pidFile], {env: tdb.env})
      expect(alike.code).to.equal(1)
      expect(alike.stderr).to.include(`pid ${impostor.pid} is another program`)
      expect(impostor.exitCode ?? impostor.signalCode).to.equal(null)
    } finally {
      impostor.kill('SIGKILL')
    }

    const noDir = await mb(['serve', '--root', root, '--listen', '127.0.0.1:0', '--pid-file', join(dir, 'missing', 'serve.pid')], {env: tdb.env})
    expect(noDir.code).to.equal(2)
    expect(noDir.stderr).to.include('does not exist')

    const noFile = await mb(['serve', 'upgrade'], {env: tdb.env})
    expect(noFile.code).to.equal(2)
    expect(noFile.stderr).to.include('--pid-file')

    serve = await startServe(['--root', root, '--pid-file', pidFile], tdb.env)
    await waitFor('the pid file taken over', serve, () => readFileSync(pidFile, 'utf8') === `${serve!.child.pid}\n`)
  })

  if (backend === 'postgres') {
    it('--workers: the pid file names the primary, the processes carry their role, `mb serve upgrade` replaces the workers', async () => {
      serve = await startServe(['--root', root, '--pid-file', pidFile, '--workers', '2'], tdb.env)
      const primary = serve.child.pid!
      await waitFor('two workers and the pid file', serve, () => (serve!.output().match(/"msg":"listening"/g) ?? []).length >= 2 && existsSync(pidFile))
      expect(readFileSync(pidFile, 'utf8')).to.equal(`${primary}\n`)
      expect(readFileSync(`/proc/${primary}/cmdline`, 'utf8')).to.match(/^mb serve: primary/)
      const workers = [...serve.output().matchAll(/"pid":(\d+)[^\n]*"msg":"listening"/g)].map((m) => Number(m[1]))
      const titles = workers.map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0.*$/s, ''))
      expect(titles.sort()).to.deep.equal(['mb serve: worker 1', 'mb serve: worker 2'])

      const upgrade = await mb(['serve', 'upgrade', '--pid-file', pidFile], {env: tdb.env})
      expect(upgrade.code, upgrade.stderr).to.equal(0)
      expect(upgrade.stdout).to.include('SIGUSR2')
      await waitFor('the replacement', serve, () => serve!.output().includes('"msg":"workers replaced"'), 120_000)

      const stop = await mb(['serve', 'stop', '--pid-file', pidFile], {env: tdb.env})
      expect(stop.code, stop.stderr).to.equal(0)
      expect(serve.child.exitCode).to.equal(0)
      expect(existsSync(pidFile)).to.equal(false)
    })
  }
})
