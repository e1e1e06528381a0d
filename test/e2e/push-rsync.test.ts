// @store-independent: mb push against rsync daemons
/**
 * End to end: `mb push` against real `rsync --daemon`s on loopback with writable modules,
 * and `mb serve` redirecting from the same store.
 * - a tree of 10,000+ files of mixed sizes goes over in three passes, and between passes the
 *   server already redirects the files of the finished passes to the mirror, and not the rest;
 * - a push whose daemon is killed halfway leaves exactly the confirmed files served there;
 * - a daemon that refuses uploads (read only = yes) is recorded with its reason;
 * - a mirror with --push-include receives only its part;
 * - `mb serve --watch --push-after` starts one push after the quiet time, none during a burst;
 * - a push_url with a shell metacharacter is refused and changes nothing;
 * - the password of an rsync push URL is never printed.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, relative} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import type {MirrorInput} from '../../src/lib/mirrors/fields.js'
import {addMirror, setEnabled} from '../../src/lib/mirrors/registry.js'
import {BIN, hermeticEnv, mb, requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase, withDatabase} from '../helpers/db.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'
import {freePort, waitForPort} from '../helpers/servers.js'

const T = 1_700_000_000
const SMALL_DIRS = 100
const SMALL_FILES = 100 // per dir: 10,000 small files
const MEDIUM = 20
const LARGE = 4
const SMALL_MAX = 1024
const LARGE_MAX = 64 * 1024

function write(root: string, rel: string, bytes: number, fill = 'x', mtime = T): void {
  const full = join(root, rel)
  mkdirSync(join(full, '..'), {recursive: true})
  writeFileSync(full, fill.repeat(bytes))
  utimesSync(full, mtime, mtime)
}

/** Every regular file under `dir`, relative, sorted. */
function tree(dir: string): string[] {
  const out: string[] = []
  const walk = (d: string) => {
    for (const e of readdirSync(d, {withFileTypes: true})) {
      const full = join(d, e.name)
      if (e.isDirectory()) walk(full)
      else out.push(relative(dir, full))
    }
  }
  walk(dir)
  return out.sort()
}

/** SIGKILLs `pid` and every process descended from it (found through /proc), by pid. */
function killTree(pid: number): void {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)])
    } catch {
      // gone meanwhile
    }
  }
  const all: number[] = []
  const visit = (p: number) => {
    all.push(p)
    for (const c of children.get(p) ?? []) visit(c)
  }
  visit(pid)
  for (const p of all) {
    try {
      process.kill(p, 'SIGKILL')
    } catch {
      // already gone
    }
  }
}

/** Polls `fn` every `everyMs` ms until it returns true (up to `seconds`). */
async function eventually(what: string, seconds: number, fn: () => Promise<boolean>, everyMs = 250): Promise<void> {
  const end = Date.now() + seconds * 1000
  while (Date.now() < end) {
    if (await fn()) return
    await new Promise((r) => setTimeout(r, everyMs))
  }
  throw new Error(`timed out waiting for: ${what}`)
}

const smallPath = (d: number, f: number) => `small/d${d}/f${f}.txt`
const mediumPath = (i: number) => `medium/m${i}.bin`
const largePath = (i: number) => `large/l${i}.iso`

describe('mb push to real rsync daemons (e2e)', function () {
  this.timeout(600_000)
  let dir: string
  let origin: string
  let tdb: TestDatabase
  let env: Record<string, string>
  let port: number
  let victimPort: number
  let cutPort: number
  let cut: ChildProcess | undefined
  let daemon: ChildProcess | undefined
  let victim: ChildProcess | undefined
  let serve: ServeProcess | undefined
  const ORIGIN_FILES = SMALL_DIRS * SMALL_FILES + MEDIUM + LARGE

  const daemonConf = (name: string, modules: Record<string, {path: string; readOnly: boolean; auth?: boolean}>) => {
    const lines = ['use chroot = no', 'uid = root', 'gid = root', 'transfer logging = yes', `pid file = ${join(dir, `${name}.pid`)}`, `log file = ${join(dir, `${name}.log`)}`]
    for (const [module, m] of Object.entries(modules)) {
      mkdirSync(m.path, {recursive: true})
      lines.push(`[${module}]`, `path = ${m.path}`, `read only = ${m.readOnly ? 'yes' : 'no'}`)
      if (m.auth) lines.push('auth users = alice', `secrets file = ${join(dir, 'secrets')}`, 'strict modes = no')
    }
    writeFileSync(join(dir, `${name}.conf`), `${lines.join('\n')}\n`)
    return join(dir, `${name}.conf`)
  }
  const startDaemon = async (conf: string, p: number) => {
    const child = spawn('rsync', ['--daemon', '--no-detach', `--config=${conf}`, `--port=${p}`, '--address=127.0.0.1'], {stdio: 'ignore'})
    await waitForPort(p)
    return child
  }

  before(async function () {
    requireBinary(this, 'rsync', 'rsync')
    dir = mkdtempSync(join(tmpdir(), 'mb-e2e-push-'))
    origin = join(dir, 'origin')
    for (let d = 0; d < SMALL_DIRS; d++) for (let f = 0; f < SMALL_FILES; f++) write(origin, smallPath(d, f), 10 + ((d * SMALL_FILES + f) % 900))
    for (let i = 0; i < MEDIUM; i++) write(origin, mediumPath(i), 2000 + i * 1000)
    for (let i = 0; i < LARGE; i++) write(origin, largePath(i), 100_000 + i)
    writeFileSync(join(dir, 'secrets'), 'alice:s3cr3t-pw\n')
    chmodSync(join(dir, 'secrets'), 0o600)
    port = await freePort()
    victimPort = await freePort()
    cutPort = await freePort()
    daemon = await startDaemon(
      daemonConf('main', {
        full: {path: join(dir, 'm-full'), readOnly: false},
        part: {path: join(dir, 'm-part'), readOnly: false},
        ro: {path: join(dir, 'm-ro'), readOnly: true},
        auto: {path: join(dir, 'm-auto'), readOnly: false},
        secure: {path: join(dir, 'm-secure'), readOnly: false, auth: true},
      }),
      port,
    )
    victim = await startDaemon(daemonConf('victim', {victim: {path: join(dir, 'm-victim'), readOnly: false}}), victimPort)
    cut = await startDaemon(daemonConf('cut', {cut: {path: join(dir, 'm-cut'), readOnly: false}}), cutPort)

    tdb = await createTestDatabase()
    writeFileSync(join(dir, 'mb.yaml'), `push:\n  small_max: ${SMALL_MAX}\n  large_max: ${LARGE_MAX}\n  connect_timeout: 3\n  io_timeout: 10\nselect:\n  min_size: 0\n`)
    env = {...tdb.env, MB_CONFIG: join(dir, 'mb.yaml'), MB_ROOT: origin}
    // Registered in-process, as `mb mirror add --no-probe --no-locate` would (the last test
    // adds one through the CLI).
    await withDatabase(tdb, async (database) => {
      const add = (name: string, pushUrl: string, extra: MirrorInput = {}) => addMirror(database.db, {identifier: name, http_url: `http://${name}.example/`, push_url: pushUrl, ...extra})
      await add('full', `rsync://127.0.0.1:${port}/full/`)
      await add('part', `rsync://127.0.0.1:${port}/part`, {push_include: ['large/**', 'small/d7/**']})
      await add('ro', `rsync://127.0.0.1:${port}/ro/`)
      await add('victim', `rsync://127.0.0.1:${victimPort}/victim/`)
      await add('cut', `rsync://127.0.0.1:${cutPort}/cut/`)
      await add('secure', `rsync://alice:s3cr3t-pw@127.0.0.1:${port}/secure/`)
      await add('auto', `rsync://127.0.0.1:${port}/auto/`, {enabled: false})
    })
    const index = await mb(['index', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    expect(index.json()).to.deep.include({files: ORIGIN_FILES, added: ORIGIN_FILES})
    serve = await startServe(['--root', origin, '--config', join(dir, 'mb.yaml')], tdb.env)
  })

  after(async () => {
    await serve?.stop()
    // A daemon writes its log as it exits: wait for each before removing the directory.
    for (const d of [daemon, victim, cut]) {
      if (!d?.pid || d.exitCode !== null || d.signalCode !== null) continue
      const exited = new Promise((r) => d.once('exit', r))
      d.kill('SIGTERM')
      await exited
    }
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true, maxRetries: 5})
  })

  async function holders(name: string): Promise<string[]> {
    return withDatabase(tdb, async (database) => {
      const rows = await sql<{path: string}>`SELECT f.path FROM file f JOIN mirror m ON m.id = ANY(f.mirrors) WHERE m.identifier = ${name} ORDER BY f.path COLLATE "C"`.execute(database.db)
      return rows.rows.map((r) => r.path)
    })
  }

  async function show(name: string): Promise<Record<string, any>> {
    const r = await mb(['mirror', 'show', name, '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    return r.json()
  }

  /** Where `mb serve` sends a client for `path` right now: the mirror's URL, or 'origin'. */
  async function servedBy(path: string): Promise<string> {
    const res = await request(serve!.port, `/${path}`)
    if (res.status === 302) return String(res.headers.location)
    expect(res.status).to.equal(200)
    return 'origin'
  }

  /** Starts `mb push ARGS` and collects its stdout lines; resolves with the exit code. */
  function startPush(args: string[]): {child: ChildProcess; lines: () => string[]; exited: Promise<number>; stderr: () => string} {
    const child = spawn(process.execPath, [BIN, 'push', ...args], {env: hermeticEnv(env), stdio: ['ignore', 'pipe', 'pipe']})
    let out = ''
    let err = ''
    child.stdout!.on('data', (d) => (out += d))
    child.stderr!.on('data', (d) => (err += d))
    const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)))
    return {child, lines: () => out.split('\n').filter(Boolean), exited, stderr: () => err}
  }

  it('pushes 10,000+ files in three passes, redirecting the files of each finished pass before the next starts', async () => {
    const push = startPush(['full', '--pause-between', '600'])
    const smallFile = smallPath(3, 4)
    const mediumFile = mediumPath(5)
    const largeFile = largePath(1)
    await eventually('pass 1 to end', 300, async () => push.lines().some((l) => l.startsWith('full: pausing')))
    expect(push.lines()[0]).to.match(
      new RegExp(
        `^full: pass 1 \\(0-${SMALL_MAX} bytes\\) ok, ${SMALL_DIRS * SMALL_FILES} files \\(\\d+ bytes\\) sent, ${SMALL_DIRS * SMALL_FILES} matched, 0 stale, ${MEDIUM + LARGE} missing, [\\d.]+ s$`,
      ),
    )
    await eventually('small files to redirect', 60, async () => (await servedBy(smallFile)) === `http://full.example/${smallFile}`)
    expect(await servedBy(mediumFile)).to.equal('origin')
    expect(await servedBy(largeFile)).to.equal('origin')
    push.child.kill('SIGUSR1')
    await eventually('pass 2 to end', 300, async () => push.lines().filter((l) => l.startsWith('full: pausing')).length === 2)
    expect(push.lines()[2]).to.match(
      new RegExp(`^full: pass 2 \\(${SMALL_MAX + 1}-${LARGE_MAX} bytes\\) ok, ${MEDIUM} files \\(\\d+ bytes\\) sent, ${ORIGIN_FILES - LARGE} matched, 0 stale, ${LARGE} missing`),
    )
    await eventually('medium files to redirect', 60, async () => (await servedBy(mediumFile)) === `http://full.example/${mediumFile}`)
    expect(await servedBy(largeFile)).to.equal('origin')
    push.child.kill('SIGUSR1')
    expect(await push.exited, push.stderr()).to.equal(0)
    expect(push.lines()[4]).to.match(new RegExp(`^full: pass 3 \\(> ${LARGE_MAX} bytes\\) ok, ${LARGE} files \\(\\d+ bytes\\) sent, ${ORIGIN_FILES} matched, 0 stale, 0 missing`))
    expect(push.lines()[5]).to.match(new RegExp(`^full: push ok, ${ORIGIN_FILES} files, ${ORIGIN_FILES} matched, [\\d.]+ s$`))
    await eventually('large files to redirect', 60, async () => (await servedBy(largeFile)) === `http://full.example/${largeFile}`)
    expect(tree(join(dir, 'm-full'))).to.have.length(ORIGIN_FILES)
    expect(await holders('full')).to.have.length(ORIGIN_FILES)
    const row = await show('full')
    expect(row).to.deep.include({last_push_error: null, last_scan_protocol: 'push', last_scan_matched: ORIGIN_FILES, last_scan_files: ORIGIN_FILES})
    expect(row.last_push_ok_at).to.equal(row.last_push_at)
  })

  it('sends a mirror with --push-include only its part', async () => {
    const r = await mb(['push', 'part', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    const part = [...Array.from({length: SMALL_FILES}, (_, f) => smallPath(7, f)), ...Array.from({length: LARGE}, (_, i) => largePath(i))].sort()
    const out = r.json()
    expect(out.mirrors[0]).to.deep.include({mirror: 'part', ok: true, files: part.length, matched: part.length})
    // No medium file matches, so that pass does not run.
    expect(out.mirrors[0].passes.map((p: any) => [p.pass, p.files, p.matched])).to.deep.equal([
      [1, SMALL_FILES, SMALL_FILES],
      [3, LARGE, part.length],
    ])
    expect(tree(join(dir, 'm-part'))).to.deep.equal(part)
    expect(await holders('part')).to.deep.equal([...part].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)))
  })

  it('records why a daemon refused the upload, and exits 1', async () => {
    const r = await mb(['push', 'ro'], {env})
    expect(r.code).to.equal(1)
    expect(r.stderr).to.include('1 of 1 push(es) failed: ro')
    const row = await show('ro')
    expect(row.last_push_error).to.match(/^pass 1: push to rsync:\/\/127\.0\.0\.1:\d+\/ro\/ failed \(exit \d+: [^)]*\): ERROR: module is read only/)
    expect(row.last_push_ok_at).to.equal(null)
    expect(await holders('ro')).to.deep.equal([])
    const list = await mb(['mirror', 'list'], {env})
    const line = list.stdout.split('\n').find((l) => l.startsWith('ro\t'))!
    expect(line.split('\t')[9]).to.match(/^failed: pass 1: push to rsync:\/\/127\.0\.0\.1:\d+\/ro\/ failed .*module is read only/)
  })

  it('leaves exactly the confirmed files served when the daemon is killed halfway', async () => {
    const first = await mb(['push', 'victim', '--json'], {env})
    expect(first.code, first.stderr).to.equal(0)
    expect(await holders('victim')).to.have.length(ORIGIN_FILES)
    // New versions: one small and one medium file; the index takes the mirror off them.
    write(origin, smallPath(0, 0), 20, 'n', T + 100)
    write(origin, mediumPath(0), 3000, 'n', T + 100)
    const index = await mb(['index', '--json'], {env})
    expect(index.json()).to.deep.include({changed: 2})
    const push = startPush(['victim', '--pause-between', '600'])
    await eventually('pass 1 to end', 300, async () => push.lines().some((l) => l.startsWith('victim: pausing')))
    victim!.kill('SIGKILL')
    await new Promise((r) => victim!.once('exit', r))
    push.child.kill('SIGUSR1')
    expect(await push.exited).to.equal(1)
    const held = await holders('victim')
    // Everything but the new medium version: pass 1 confirmed the new small one.
    expect(held).to.have.length(ORIGIN_FILES - 1)
    expect(held).to.include(smallPath(0, 0))
    expect(held).to.not.include(mediumPath(0))
    expect(held).to.include(mediumPath(1))
    const row = await show('victim')
    expect(row.last_push_error).to.match(
      /^pass 2: push to rsync:\/\/127\.0\.0\.1:\d+\/victim\/ failed \(exit 10: error in socket I\/O.*; the listing after it failed too, so the mirror keeps the files confirmed before: /,
    )
    // Only the victim confirmed the new small version (the index took every mirror off it).
    await eventually('the new small version to redirect', 60, async () => (await servedBy(smallPath(0, 0))) === `http://victim.example/${smallPath(0, 0)}`)
    // The medium file's new version is on no mirror that confirmed it: the full mirror holds the old one.
    expect(await servedBy(mediumPath(0))).to.equal('origin')
  })

  it('serves nothing from a mirror whose daemon is killed in the middle of a transfer, until a later push confirms it', async () => {
    const push = startPush(['cut'])
    // The daemon logs each file it has received: kill it, and its per-connection children, after 300 of pass 1's 10,000.
    // Looked at every 5 ms: on a quiet machine the whole pass takes well under a second.
    await eventually('300 files to arrive', 300, async () => (readFileSync(join(dir, 'cut.log'), 'utf8').match(/ recv /g) ?? []).length >= 300, 5)
    killTree(cut!.pid!)
    await new Promise((r) => cut!.once('exit', r))
    expect(await push.exited).to.equal(1)
    const arrived = tree(join(dir, 'm-cut')).length
    expect(arrived)
      .to.be.above(0)
      .and.below(SMALL_DIRS * SMALL_FILES)
    expect(await holders('cut')).to.deep.equal([])
    const row = await show('cut')
    expect(row.last_push_error).to.match(
      /^pass 1: push to rsync:\/\/127\.0\.0\.1:\d+\/cut\/ failed \(.*; the listing after it failed too, so the mirror keeps the files confirmed before: rsync listing of .* failed/,
    )
    const onDisk = tree(join(dir, 'm-cut'))[0]
    expect(await servedBy(onDisk)).to.not.equal(`http://cut.example/${onDisk}`)
    cut = await startDaemon(join(dir, 'cut.conf'), cutPort)
    const again = await mb(['push', 'cut', '--json'], {env})
    expect(again.code, again.stderr).to.equal(0)
    expect(again.json().mirrors[0]).to.deep.include({ok: true, error: null, files: ORIGIN_FILES, matched: ORIGIN_FILES})
    expect(await holders('cut')).to.have.length(ORIGIN_FILES)
    expect((await show('cut')).last_push_error).to.equal(null)
  })

  it('refuses a push_url with a shell metacharacter and changes nothing', async () => {
    for (const bad of ['user@host:/srv/$(reboot)/', 'rsync://127.0.0.1/mod/a;b/', 'host:pub dir/', 'user@host:`id`/']) {
      const add = await mb(['mirror', 'add', 'evil', '--http-url', 'http://evil.example/', '--push-url', bad, '--no-probe', '--no-locate'], {env})
      expect(add.code, bad).to.equal(2)
      expect(add.stderr).to.match(/Invalid --push-url .*is a shell metacharacter or whitespace, which a push target may not hold/)
      const edit = await mb(['mirror', 'edit', 'full', '--push-url', bad], {env})
      expect(edit.code, bad).to.equal(2)
    }
    expect((await mb(['mirror', 'show', 'evil'], {env})).code).to.equal(1)
    expect((await show('full')).push_url).to.equal(`rsync://127.0.0.1:${port}/full/`)
  })

  it('never prints the password of a push URL', async () => {
    const r = await mb(['push', 'secure', '--json'], {env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().mirrors[0]).to.deep.include({ok: true, matched: ORIGIN_FILES})
    const row = await mb(['mirror', 'show', 'secure'], {env})
    expect(row.stdout).to.include(`rsync://alice:***@127.0.0.1:${port}/secure/`)
    for (const text of [r.stdout, r.stderr, row.stdout]) expect(text).to.not.include('s3cr3t')
  })

  it('pushes over a remote shell to user@host:path (a stand-in ssh on PATH runs the remote side locally)', async () => {
    const bin = join(dir, 'fake-ssh')
    mkdirSync(bin, {recursive: true})
    // ssh OPTIONS [-l user] host command…: drop the options and the host, run the command as a remote shell would.
    writeFileSync(
      join(bin, 'ssh'),
      ['#!/bin/sh', `echo "$@" >> ${join(dir, 'ssh-calls')}`, 'while [ $# -gt 0 ]; do case "$1" in -o|-l|-p) shift 2;; -*) shift;; *) break;; esac; done', 'shift', 'exec sh -c "$*"', ''].join('\n'),
      {mode: 0o755},
    )
    mkdirSync(join(dir, 'm-ssh'))
    const add = await mb(['mirror', 'add', 'viassh', '--http-url', 'http://viassh.example/', '--push-url', `pusher@localhost:${join(dir, 'm-ssh')}`, '--no-probe', '--no-locate', '--json'], {env})
    expect(add.code, add.stderr).to.equal(0)
    expect(add.json().push_url).to.equal(`pusher@localhost:${join(dir, 'm-ssh')}/`)
    const r = await mb(['push', 'viassh', '--json'], {env: {...env, PATH: `${bin}:${process.env.PATH}`}})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().mirrors[0]).to.deep.include({ok: true, error: null, files: ORIGIN_FILES, matched: ORIGIN_FILES})
    expect(tree(join(dir, 'm-ssh'))).to.have.length(ORIGIN_FILES)
    expect(await holders('viassh')).to.have.length(ORIGIN_FILES)
    // Every ssh call ran without a password prompt and with the connect timeout.
    const calls = readFileSync(join(dir, 'ssh-calls'), 'utf8').trim().split('\n')
    expect(calls.length).to.be.above(2)
    for (const call of calls) expect(call).to.match(/^-o BatchMode=yes -o ConnectTimeout=3 -l pusher localhost rsync --server /)
  })

  it('serve --push-after starts one push after the quiet time, and none during a burst of changes', async () => {
    // Only `auto` enabled, set in-process as `mb mirror disable` / `enable --no-probe` would.
    await withDatabase(tdb, async (database) => {
      for (const name of ['full', 'part', 'ro', 'victim', 'cut', 'secure', 'viassh']) expect((await setEnabled(database.db, name, false)).changed, name).to.equal(true)
      expect((await setEnabled(database.db, 'auto', true)).changed).to.equal(true)
    })
    await serve!.stop()
    serve = await startServe(['--root', origin, '--config', join(dir, 'mb.yaml'), '--watch', '--push-after', '5'], tdb.env)
    const started = () =>
      serve!
        .output()
        .split('\n')
        .filter((l) => l.includes('"msg":"push-after: push started"')).length
    // A burst: a new file every 0.5 s for 6 s, each well inside the quiet time.
    for (let i = 0; i < 12; i++) {
      write(origin, `burst/b${i}.txt`, 50 + i)
      await new Promise((r) => setTimeout(r, 500))
      expect(started(), `push started during the burst (after file ${i})`).to.equal(0)
    }
    await eventually('the push to finish', 300, async () => serve!.output().includes('"msg":"push done"'))
    expect(started()).to.equal(1)
    const done = serve!
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"push done"'))
      .map((l) => JSON.parse(l))
    expect(done.map((d) => [d.mirror, d.files, d.matched])).to.deep.equal([['auto', ORIGIN_FILES + 12, ORIGIN_FILES + 12]])
    expect(statSync(join(dir, 'm-auto', 'burst', 'b11.txt')).size).to.equal(61)
    await eventually('burst files to redirect', 60, async () => (await servedBy('burst/b11.txt')) === 'http://auto.example/burst/b11.txt')
    // Quiet since: no second push.
    await new Promise((r) => setTimeout(r, 8000))
    expect(started()).to.equal(1)
  })
})
