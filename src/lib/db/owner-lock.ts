/**
 * The embedded store's single-owner lock: the directory `DATA_DIR/mb.lock` holding one claim
 * file per process that wants the store, named `PID-STARTTIME-RANDOM`. STARTTIME is field 22 of
 * `/proc/PID/stat` (clock ticks since boot, proc(5)), so a claim whose pid was reused by an
 * unrelated process reads as dead; where /proc is missing it is `0` and only the pid counts.
 *
 * Why a directory of claims and not one lock file: taking over a stale lock file needs a
 * compare-and-swap that POSIX file names do not offer. With one file, two openers that both
 * find it stale both unlink and recreate it, and the second unlinks the first one's fresh
 * lock (the "1 in 20" double open after a crash). Here nobody ever removes a name that a live
 * process may own. An opener creates its own claim, then lists the directory: when no other
 * live claim is there it owns the store; otherwise it withdraws its claim and retries.
 * Of two openers the later one to create its claim always sees the earlier one's claim, so at
 * most one of them can find none: a live owner is never stolen. Claims of dead processes are
 * deleted by whoever sees them; their names are unique, so that races with nobody.
 */
import {mkdirSync, readdirSync, readFileSync, rmSync, statSync, unlinkSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {randomBytes} from 'node:crypto'
import {MbError} from '../errors.js'

/** The lock's name inside the data directory. */
const LOCK_NAME = 'mb.lock'

/** A process identity that survives pid reuse: its pid and start time (0 when unknown). */
interface Claimant {
  pid: number
  start: string
}

/**
 * The start time of process `pid` in clock ticks since boot (field 22 of /proc/PID/stat);
 * `undefined` when the process does not exist, `'0'` when /proc cannot tell.
 */
export function processStartTime(pid: number): string | undefined {
  let stat: string
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ESRCH') return pidAlive(pid) ? '0' : undefined
    return '0'
  }
  // Field 2 (comm) is parenthesised and may hold spaces or ')': fields 3.. follow the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return fields[22 - 3] ?? '0'
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Whether `claimant` is still the process that made the claim. */
function alive(claimant: Claimant): boolean {
  const start = processStartTime(claimant.pid)
  if (start === undefined) return false
  return claimant.start === '0' || start === '0' || start === claimant.start
}

/** The claimant named by a claim file name, or undefined for a foreign file. */
function parseClaim(name: string): Claimant | undefined {
  const m = /^(\d+)-(\d+)-[0-9a-f]+$/.exec(name)
  return m ? {pid: Number(m[1]), start: m[2]} : undefined
}

const self: Claimant = {pid: process.pid, start: processStartTime(process.pid) ?? '0'}

/**
 * A legacy lock (a plain `mb.lock` file holding a pid, written by mb before the claim
 * directory): its live owner's pid, or undefined after removing it when its owner is gone.
 * Unlinking a name can never remove a claim directory (unlink fails on directories).
 */
function legacyOwner(lockPath: string): number | undefined {
  let owner: number
  try {
    if (!statSync(lockPath).isFile()) return undefined
    owner = Number.parseInt(readFileSync(lockPath, 'utf8'), 10)
  } catch {
    return undefined
  }
  if (Number.isFinite(owner) && owner !== process.pid && pidAlive(owner)) return owner
  try {
    unlinkSync(lockPath)
  } catch {
    /* someone else removed it */
  }
  return undefined
}

/** The live claimants other than `mine`, deleting the claims of dead processes on the way. */
function otherLiveClaims(lockPath: string, mine: string): Claimant[] {
  const live: Claimant[] = []
  for (const name of readdirSync(lockPath)) {
    if (name === mine) continue
    const claimant = parseClaim(name)
    if (!claimant) continue
    if (alive(claimant)) live.push(claimant)
    else rmSync(join(lockPath, name), {force: true})
  }
  return live
}

/**
 * One attempt to own the store: creates this process's claim and keeps it when no other live
 * claim exists. @returns the release function, or the pid of a live owner (claim withdrawn)
 */
function tryClaim(lockPath: string): (() => void) | {owner: number} {
  const legacy = legacyOwner(lockPath)
  if (legacy !== undefined) return {owner: legacy}
  mkdirSync(lockPath, {recursive: true, mode: 0o700})
  const mine = `${self.pid}-${self.start}-${randomBytes(6).toString('hex')}`
  const claimPath = join(lockPath, mine)
  writeFileSync(claimPath, `${JSON.stringify({pid: self.pid, start: self.start, at: new Date().toISOString()})}\n`, {flag: 'wx', mode: 0o600})
  const others = otherLiveClaims(lockPath, mine)
  if (others.length === 0) {
    let released = false
    return () => {
      if (released) return
      released = true
      rmSync(claimPath, {force: true})
    }
  }
  rmSync(claimPath, {force: true})
  return {owner: others[0].pid}
}

/**
 * Takes the embedded store's lock in `dataDir` (created when missing). PGlite allows one
 * process per data directory; while another live process holds it, `onHeld(ownerPid)` decides:
 * return a value to stop waiting (the lock is then not taken), or `undefined` to keep waiting,
 * up to `waitSeconds`.
 * @returns the release function (idempotent), or what `onHeld` returned
 * @throws MbError DB_LOCK when the lock directory cannot be used, DB_BUSY after `waitSeconds`
 */
export async function lockDataDir<T>(dataDir: string, waitSeconds: number, onHeld: (owner: number) => T | undefined): Promise<(() => void) | T> {
  mkdirSync(dataDir, {recursive: true})
  const lockPath = join(dataDir, LOCK_NAME)
  const deadline = Date.now() + waitSeconds * 1000
  for (;;) {
    let attempt: (() => void) | {owner: number}
    try {
      attempt = tryClaim(lockPath)
    } catch (error) {
      // ENOENT: the directory went away between mkdir and the claim; try again while time is left.
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && Date.now() <= deadline) {
        await sleep(10)
        continue
      }
      throw new MbError(`Cannot lock the embedded store at ${dataDir}: ${(error as Error).message}`, {code: 'DB_LOCK', cause: error})
    }
    if (typeof attempt === 'function') return attempt
    const stop = onHeld(attempt.owner)
    if (stop !== undefined) return stop
    if (Date.now() > deadline) {
      throw new MbError(
        `The embedded store at ${dataDir} is in use by process ${attempt.owner} (for example a running \`mb serve\`). Wait for it to finish or stop it, or use PostgreSQL (MB_DATABASE_URL) to run several mb processes at once.`,
        {code: 'DB_BUSY'},
      )
    }
    // Random back-off: two openers that saw each other's claims both withdrew.
    await sleep(50 + Math.random() * 100)
  }
}
