// @store-independent: the embedded store's lock file (no database)
/**
 * The embedded store's lock (src/lib/db/owner-lock.ts) across real processes: a lock left by a
 * SIGKILLed holder is taken over by exactly one of many concurrent openers, a live lock is never
 * taken, and a claim whose pid now belongs to another process (pid reuse) counts as stale.
 * These need no database, so they run on both test backends.
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {lockDataDir, processStartTime} from '../../src/lib/db/owner-lock.js'

const HOLDER = fileURLToPath(new URL('../helpers/lock-holder.ts', import.meta.url))

interface Holder {
  child: ChildProcess
  /** Resolves with the first line the holder prints (`OWNER` or `BUSY …`). */
  verdict: Promise<string>
  exited: Promise<void>
}

function spawnHolder(dataDir: string, holdMs: number, waitSeconds: number, log: string): Holder {
  const child = spawn(process.execPath, ['--import', 'tsx', HOLDER, dataDir, String(holdMs), String(waitSeconds), log], {stdio: ['ignore', 'pipe', 'inherit']})
  let out = ''
  const verdict = new Promise<string>((resolve) => {
    child.stdout!.on('data', (d) => {
      out += d
      if (out.includes('\n')) resolve(out.split('\n')[0])
    })
    child.once('exit', () => resolve(out.split('\n')[0] || 'EXITED'))
  })
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {child, verdict, exited}
}

/** The [acquire, release] intervals in `log` must not overlap (a holder without release was killed at `killedAt`). */
function expectNoOverlap(log: string, killedAt = new Map<number, number>()): number {
  const acquired = new Map<number, number>()
  const intervals: Array<[number, number]> = []
  for (const line of readFileSync(log, 'utf8').trim().split('\n')) {
    const [what, pid, ms] = line.split(' ')
    if (what === 'acquire') acquired.set(Number(pid), Number(ms))
    else intervals.push([acquired.get(Number(pid))!, Number(ms)])
  }
  for (const [pid, at] of killedAt) if (acquired.has(pid)) intervals.push([acquired.get(pid)!, at])
  intervals.sort((a, b) => a[0] - b[0])
  for (let i = 1; i < intervals.length; i++) expect(intervals[i][0], 'two owners at once').to.be.greaterThan(intervals[i - 1][1])
  return intervals.length
}

describe('embedded store lock across processes (no database needed: runs on both backends)', function () {
  this.timeout(180_000)
  let dir: string
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-lock-'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  it('a live lock is never taken: of 12 concurrent openers exactly one owns the store', async () => {
    const log = join(dir, 'log')
    writeFileSync(log, '')
    // The owner holds until every opener has tried (a slow start of one must not find the
    // lock released), then is told to release it.
    const holders = Array.from({length: 12}, () => spawnHolder(dir, 0, 0, log))
    const verdicts = await Promise.all(holders.map((h) => h.verdict))
    for (const [i, h] of holders.entries()) if (verdicts[i] === 'OWNER') h.child.kill('SIGTERM')
    await Promise.all(holders.map((h) => h.exited))
    expect(verdicts.filter((v) => v === 'OWNER')).to.have.length(1)
    expect(verdicts.filter((v) => v.startsWith('BUSY')).length).to.equal(11)
    expect(verdicts.find((v) => v.startsWith('BUSY'))).to.match(/is in use by process \d+/)
    expect(expectNoOverlap(log)).to.equal(1)
    expect(readdirSync(join(dir, 'mb.lock'))).to.deep.equal([]) // every claim withdrawn or released
  })

  it('a stale lock from a SIGKILLed holder is taken over by exactly one of 8 concurrent openers, 5 rounds in a row', async () => {
    const log = join(dir, 'log')
    writeFileSync(log, '')
    const killedAt = new Map<number, number>()
    let owners = 0
    let holder = spawnHolder(dir, 0, 0, log)
    expect(await holder.verdict).to.equal('OWNER')
    for (let round = 0; round < 5; round++) {
      holder.child.kill('SIGKILL')
      await holder.exited
      killedAt.set(holder.child.pid!, performance.timeOrigin + performance.now())
      expect(readdirSync(join(dir, 'mb.lock'))).to.have.length(1) // the dead holder's claim stays behind
      const openers = Array.from({length: 8}, () => spawnHolder(dir, 0, 1, log))
      // Each opener waits up to 1 s: the winner holds until killed, so the others end BUSY.
      const verdicts = await Promise.all(openers.map((o) => o.verdict))
      const winners = openers.filter((_, i) => verdicts[i] === 'OWNER')
      expect(winners, `round ${round}: ${verdicts.join(', ')}`).to.have.length(1)
      owners++
      await Promise.all(openers.filter((o) => o !== winners[0]).map((o) => o.exited))
      holder = winners[0]
    }
    holder.child.kill('SIGKILL')
    await holder.exited
    killedAt.set(holder.child.pid!, performance.timeOrigin + performance.now())
    expect(expectNoOverlap(log, killedAt)).to.equal(owners + 1)
  })

  it('takes over a claim whose pid lives on as another process (start time differs) and a legacy pid file of a dead process', async () => {
    mkdirSync(join(dir, 'mb.lock'))
    const reused = `${process.ppid}-1-abcdef` // a live pid, but not the process that made the claim
    writeFileSync(join(dir, 'mb.lock', reused), '')
    const release = await lockDataDir(dir, 0, () => undefined)
    expect(typeof release).to.equal('function')
    const names = readdirSync(join(dir, 'mb.lock'))
    expect(names).to.have.length(1)
    expect(names[0]).to.match(new RegExp(`^${process.pid}-${processStartTime(process.pid)}-[0-9a-f]+$`))
    ;(release as () => void)()
    expect(readdirSync(join(dir, 'mb.lock'))).to.deep.equal([])

    const legacy = mkdtempSync(join(tmpdir(), 'mb-lock-legacy-'))
    try {
      writeFileSync(join(legacy, 'mb.lock'), '999999999')
      const r = await lockDataDir(legacy, 0, () => undefined)
      expect(readdirSync(join(legacy, 'mb.lock'))).to.have.length(1)
      ;(r as () => void)()
    } finally {
      rmSync(legacy, {recursive: true, force: true})
    }
  })

  it('a second opener in the same process is refused, not handed the lock', async () => {
    const release = await lockDataDir(dir, 0, () => undefined)
    try {
      const second = await lockDataDir(dir, 0, (owner) => ({owner}))
      expect(second).to.deep.equal({owner: process.pid})
    } finally {
      ;(release as () => void)()
    }
  })
})
