/**
 * An upgrade of a running `mb serve` in the default layout (one process, mb-serve.socket)
 * refuses no connection and loses no count, on either store (issue 36, item 3). Under a
 * request loop it runs the steps of docs/operations.md ("Upgrade"):
 * 1. the new release: a copy of the install whose package.json says a new version is put in
 *    place of the old one (the `current` link is replaced, as `npm install -g` replaces the
 *    package under /usr/lib/node_modules);
 * 2. `mb --version` and `mb db status` of the new release;
 * 3. `mb db migrate`;
 * 4. `systemctl restart mb-serve.service`, played as systemd does it with mb-serve.socket:
 *    `systemd-socket-activate` holds the listening socket and starts the service's command with
 *    it (fd 3, LISTEN_FDS, LISTEN_PID); the restart is a SIGTERM to the old process
 *    (KillSignal=), and the command is started again, on the same socket, once it has exited.
 * The test first checks that the page's block holds these four steps. Then no request failed,
 * every answer was a redirect, answers came from both versions, and `mb stats` holds every
 * download the clients were answered. On PostgreSQL the same runs for a `--workers 2` primary
 * on the socket (issue 46, items 1 and 2): the restart replaces the primary and its workers.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {cpSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {hermeticEnv, mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, seedOneMirror, type TestDatabase} from '../helpers/db.js'
import {startLoad} from '../helpers/load.js'
import {request} from '../helpers/serve-process.js'
import {freePort} from '../helpers/servers.js'
import {copyInstall, documentedCommands, gapMs, installedVersion, listeningPids, primaryPids} from '../helpers/upgrade.js'

/**
 * systemd's part: start the service's command on the socket held by `systemd-socket-activate`
 * (this shell), each generation as its own process with LISTEN_PID set to its pid, the next
 * one once the previous has exited; two generations, the old release and the new.
 */
const SERVICE = `for generation in 1 2; do sh -c 'LISTEN_PID=$$ exec "$@"' mb-serve "$NODE" "$CURRENT/bin/run.js" serve --root "$ROOT" --retry-window 0 --workers "$WORKERS"; done`

describe(`upgrade of mb serve on mb-serve.socket under load (${backend})`, function () {
  this.timeout(300_000)
  let tdb: TestDatabase
  let dir: string
  let holder: ChildProcess | undefined
  let output = ''

  before(async () => {
    tdb = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-upgrade-'))
    await seedOneMirror(tdb, {path: 'a.iso', size: 8000, mtime: 0})
  })

  after(async () => {
    // The holder and every generation it started are one process group.
    if (holder?.pid)
      try {
        process.kill(-holder.pid, 'SIGKILL')
      } catch {
        // None is left.
      }
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  async function waitFor(what: string, predicate: () => boolean): Promise<void> {
    for (let waited = 0; !predicate(); waited += 50) {
      if (waited > 120_000 || holder?.exitCode !== null) throw new Error(`timed out or exited waiting for ${what}:\n${output}`)
      await sleep(50)
    }
  }

  /**
   * Plays the upgrade with `workers` processes behind the socket: 1 (one process), or a
   * `--workers` primary with its workers, which the restart replaces all together.
   */
  async function upgradeUnderLoad(ctx: Mocha.Context, workers: number): Promise<void> {
    requireBinary(ctx, 'systemd-socket-activate', 'systemd')
    const run = join(dir, `workers-${workers}`)
    mkdirSync(run)
    output = ''
    const countedBefore = (await mb(['stats', '--json'], {env: tdb.env})).json().total.downloads as number
    expect(documentedCommands('### Upgrade')).to.deep.equal([
      'npm install -g --prefix /usr ./mb-NEW.tgz --omit=dev',
      'mb --version && runuser -u mb -- mb db status',
      'runuser -u mb -- mb db migrate',
      'systemctl restart mb-serve.service',
    ])
    const oldVersion = installedVersion()
    const newVersion = '99.0.0-test'
    copyInstall(join(run, 'install-old'))
    copyInstall(join(run, 'install-new'), newVersion)
    const current = join(run, 'current')
    symlinkSync(join(run, 'install-old'), current)
    const root = join(run, 'root')
    cpSync(join(run, 'install-old', 'migrations'), root, {recursive: true}) // any directory: the file is only redirected
    const port = await freePort()
    const env = hermeticEnv({...tdb.env, NODE: process.execPath, CURRENT: current, ROOT: root, WORKERS: String(workers)})
    // Like systemd, systemd-socket-activate passes the service only the variables it is given (Environment=).
    const passed = ['PATH', 'HOME', 'MB_CONFIG', 'XDG_CONFIG_HOME', 'NODE', 'CURRENT', 'ROOT', 'WORKERS', ...Object.keys(tdb.env)].flatMap((name) => ['-E', name])
    holder = spawn('systemd-socket-activate', ['-l', `127.0.0.1:${port}`, ...passed, 'sh', '-c', SERVICE], {env, stdio: ['ignore', 'pipe', 'pipe'], detached: true})
    holder.stdout!.on('data', (d) => (output += d))
    holder.stderr!.on('data', (d) => (output += d))
    const exited = new Promise<void>((resolve) => holder!.once('exit', () => resolve()))

    await waitFor('the socket', () => output.includes(`Listening on 127.0.0.1:${port}`))
    // The first connection starts the service (socket activation); it waits in the queue meanwhile.
    const first = await request(port, '/a.iso').catch((error) => {
      throw new Error(`${error.message}:\n${output}`)
    })
    expect(first.status, output).to.equal(302)
    expect(first.headers.server).to.equal(`mb/${oldVersion}`)
    await waitFor('the listening lines', () => listeningPids(output).length >= workers)
    expect(output).to.match(/"socket":"systemd"/)
    const load = startLoad(port, '/a.iso', {concurrency: 4})
    await sleep(300)

    // 1. The new release in place of the old one.
    symlinkSync(join(run, 'install-new'), `${current}.new`)
    renameSync(`${current}.new`, current)
    const bin = join(current, 'bin', 'run.js')
    // 2. What it expects, and what the store has (through the running server on the embedded store).
    const version = await mb(['--version'], {bin})
    expect(version.stdout).to.include(`mb ${newVersion}`)
    const status = await mb(['db', 'status'], {bin, env: tdb.env})
    expect(status.code, status.stderr).to.equal(0)
    // 3. The new migrations (none here: the same schema).
    const migrate = await mb(['db', 'migrate'], {bin, env: tdb.env})
    expect(migrate.code, migrate.stderr).to.equal(0)
    // 4. `systemctl restart mb-serve.service`: SIGTERM to the old process (the primary); the next starts on the same socket.
    const [oldPid] = workers > 1 ? primaryPids(output) : listeningPids(output)
    process.kill(oldPid, 'SIGTERM')
    await waitFor('the new processes listening', () => listeningPids(output).length >= 2 * workers)
    const answeredBefore = load.result.total
    await waitFor('answers from the new process', () => load.result.total > answeredBefore + 100)
    const result = await load.stop()
    console.log(`      ${result.total} requests under load during the upgrade: ${JSON.stringify(result.servers)}`)

    expect(result.errors, result.errors.slice(0, 5).join('; ')).to.deep.equal([])
    expect(Object.keys(result.statuses)).to.deep.equal(['302'])
    expect(result.servers[`mb/${oldVersion}`]).to.be.greaterThan(0)
    expect(result.servers[`mb/${newVersion}`]).to.be.greaterThan(0)
    console.log(`      the port had no process accepting for ${gapMs(output, workers)} ms (the old ones' \`stopped\` to the new ones' \`listening\`); the kernel queued those connections`)
    const [, newPid] = workers > 1 ? primaryPids(output) : [0, listeningPids(output)[workers]]
    expect(newPid).to.not.equal(oldPid)
    process.kill(newPid, 'SIGTERM')
    await exited
    expect(output).to.not.match(/these counts are lost|shutdown step failed/)
    const stats = await mb(['stats', '--json'], {env: tdb.env})
    expect(stats.code, stats.stderr).to.equal(0)
    expect(stats.json().total.downloads - countedBefore).to.equal(result.statuses[302] + 1)
  }

  it('runs the documented steps: no connection refused, no request failed, no count lost', async function () {
    await upgradeUnderLoad(this, 1)
  })

  // --workers needs PostgreSQL.
  if (backend === 'postgres')
    it('runs them for a --workers 2 primary on the socket: the restart replaces the primary too, and still refuses nothing and loses no count', async function () {
      await upgradeUnderLoad(this, 2)
    })
})
