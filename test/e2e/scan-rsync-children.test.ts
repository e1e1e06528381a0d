// @store-independent: rsync children and signals
/**
 * End to end: `mb scan` of an rsync mirror whose daemon accepts and never answers, so the
 * `rsync --list-only` child hangs; mb is then ended by SIGTERM, SIGINT, SIGHUP or SIGKILL,
 * and the child (and its watchdog shell) must be gone within a few seconds.
 */
import {spawn} from 'node:child_process'
import {mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {BIN, hermeticEnv, requireBinary} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {startSilentServer} from '../helpers/servers.js'

/** Pids of live (not zombie) processes whose command line holds `needle`. */
function processesWith(needle: string): number[] {
  const out: number[] = []
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${name}/cmdline`, 'utf8')
      const state = readFileSync(`/proc/${name}/stat`, 'utf8').replace(/^.*\) /, '')[0]
      if (cmdline.includes(needle) && state !== 'Z') out.push(Number(name))
    } catch {
      // The process ended while being read.
    }
  }
  return out
}

async function waitFor<T>(what: string, check: () => T | undefined, ms: number): Promise<T> {
  const deadline = Date.now() + ms
  for (;;) {
    const value = check()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

describe('e2e: a killed `mb scan` leaves no rsync child behind', function () {
  this.timeout(60_000)
  let tdb: TestDatabase
  let dir: string
  let env: Record<string, string>
  let silent: Awaited<ReturnType<typeof startSilentServer>>

  before(async function () {
    requireBinary(this, 'rsync', 'rsync')
    silent = await startSilentServer()
    dir = mkdtempSync(join(tmpdir(), 'mb-rsync-kill-'))
    writeFileSync(join(dir, 'mb.yaml'), 'scan:\n  connect_timeout: 300\n  io_timeout: 600\n')
    tdb = await createTestDatabase()
    env = {...tdb.env, MB_CONFIG: join(dir, 'mb.yaml'), MB_ROOT: dir}
    const database = await tdb.open()
    try {
      await database.db
        .insertInto('mirror')
        .values({identifier: 'hanging', http_url: 'http://hanging.example/', rsync_url: `rsync://127.0.0.1:${silent.port}/pub/`} as any)
        .execute()
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await silent?.stop()
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGKILL'] as const) {
    it(`${signal} to mb ends the rsync child within a few seconds`, async () => {
      const needle = `127.0.0.1:${silent.port}/pub/`
      const mb = spawn(process.execPath, [BIN, 'scan', 'hanging', '--protocol', 'rsync'], {env: hermeticEnv(env), stdio: 'ignore'})
      const exited = new Promise<void>((resolve) => mb.on('close', () => resolve()))
      try {
        const children = await waitFor(
          'the rsync child',
          () => {
            const pids = processesWith(needle).filter((pid) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'rsync')
            return pids.length > 0 ? pids : undefined
          },
          20_000,
        )
        const all = processesWith(needle) // rsync and its watchdog shell
        mb.kill(signal)
        await exited
        const started = Date.now()
        await waitFor('the children to end', () => (all.every((pid) => !processesWith(needle).includes(pid)) ? true : undefined), 5_000)
        expect(children.length).to.be.greaterThan(0)
        expect(Date.now() - started).to.be.below(5_000)
      } finally {
        mb.kill('SIGKILL')
        for (const pid of processesWith(needle)) process.kill(pid, 'SIGKILL')
      }
    })
  }
})
