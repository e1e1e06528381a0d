/**
 * The pid file of `mb serve --pid-file` (src/lib/redirector/pid-file.ts) against the attack
 * run of issue 46 (items 12 and 13): only well-formed files are read, a symlink is neither
 * followed nor written through, the directory must be this user's and writable by nobody
 * else, and a pid is believed only for a process that looks like mb serve and started before
 * the file was written.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {chmodSync, chownSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {checkPidFile, pidFileProcess, readPidFile, writePidFile} from '../../src/lib/redirector/pid-file.js'

describe('the pid file of mb serve', () => {
  let dir: string
  const children: ChildProcess[] = []

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-pid-file-'))
  })

  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    rmSync(dir, {recursive: true, force: true})
  })

  /** Starts `command args…` and returns it once its /proc entry shows the arguments. */
  async function running(command: string, args: string[]): Promise<ChildProcess> {
    const child = spawn(command, args, {stdio: 'ignore'})
    children.push(child)
    for (let i = 0; i < 100; i++) {
      const cmdline = readFileSync(`/proc/${child.pid}/cmdline`, 'utf8')
      if (cmdline.includes('serve')) return child
      await sleep(20)
    }
    throw new Error(`${command} did not start`)
  }

  it('reads only one decimal pid: 0x50b7, 1e3, 20663.0, signs, 0 and huge numbers are refused', () => {
    const path = join(dir, 'serve.pid')
    for (const text of ['0x50b7\n', '1e3\n', '20663.0\n', '+42\n', '-42\n', ' 42\n', '0\n', '00042\n', '99999999\n', '42\n43\n', '', 'mb\n']) {
      writeFileSync(path, text)
      expect(() => readPidFile(path), JSON.stringify(text)).to.throw(/not a process id \(decimal digits only/)
    }
    writeFileSync(path, '20663\n')
    expect(readPidFile(path)?.pid).to.equal(20663)
    writeFileSync(path, '20663')
    expect(readPidFile(path)?.pid).to.equal(20663)
  })

  it('neither reads nor writes through a symlink: a planted link at the path or at the old temporary name leaves its target untouched', () => {
    const victim = join(dir, 'victim')
    writeFileSync(victim, 'precious\n')
    const path = join(dir, 'serve.pid')
    symlinkSync(victim, path)
    expect(() => readPidFile(path)).to.throw(/symbolic link/)
    expect(() => writePidFile(path)).to.throw(/symbolic link/)
    rmSync(path)
    // The temporary name mb once used (PIDFILE.<pid>.tmp): the file is now created by a random name with O_EXCL|O_NOFOLLOW.
    symlinkSync(victim, `${path}.${process.pid}.tmp`)
    writePidFile(path)
    expect(readFileSync(victim, 'utf8')).to.equal('precious\n')
    expect(lstatSync(path).isFile()).to.equal(true)
    expect(readFileSync(path, 'utf8')).to.equal(`${process.pid}\n`)
  })

  it('refuses a directory others may write (unless sticky) or that belongs to another user', () => {
    const open = join(dir, 'open')
    mkdirSync(open)
    chmodSync(open, 0o777)
    expect(() => writePidFile(join(open, 'serve.pid'))).to.throw(/mode 0777\) is writable by other users and not sticky/)
    chmodSync(open, 0o775)
    expect(() => checkPidFile(join(open, 'serve.pid'))).to.throw(/writable by other users/)
    chmodSync(open, 0o1777)
    writePidFile(join(open, 'serve.pid'))
    expect(readPidFile(join(open, 'serve.pid'))?.pid).to.equal(process.pid)
    if (process.geteuid?.() === 0) {
      const foreign = join(dir, 'foreign')
      mkdirSync(foreign)
      chownSync(foreign, 65534, 65534)
      expect(() => writePidFile(join(foreign, 'serve.pid'))).to.throw(/belongs to uid 65534/)
    }
  })

  it('believes a pid only for mb serve started before the file was written', async () => {
    const path = join(dir, 'serve.pid')
    // Another program that names itself like mb (the attack run's `python3 … run.js serve`).
    const impostor = await running('sh', ['-c', 'while :; do sleep 0.2; done', '/opt/mb/bin/run.js', 'serve'])
    writeFileSync(path, `${impostor.pid}\n`)
    expect(pidFileProcess(readPidFile(path)!)).to.equal('other')

    // node running mb's entry with `serve`: believed when it ran before the file was written …
    const serve = await running(process.execPath, ['-e', 'setInterval(() => {}, 1000)', '/opt/mb/bin/run.js', 'serve'])
    writeFileSync(path, `${serve.pid}\n`)
    expect(pidFileProcess(readPidFile(path)!)).to.equal('serve')
    // … and not when the file is older than the process (a pid reused since).
    const hourAgo = new Date(Date.now() - 3_600_000)
    utimesSync(path, hourAgo, hourAgo)
    expect(pidFileProcess(readPidFile(path)!)).to.equal('other')

    serve.kill('SIGKILL')
    await new Promise((resolve) => serve.once('exit', resolve))
    writeFileSync(path, `${serve.pid}\n`)
    expect(pidFileProcess(readPidFile(path)!)).to.equal('gone')
  })
})
