/**
 * A process that tries to take the embedded store's lock (src/lib/db/owner-lock.ts) for tests:
 * `node --import tsx lock-holder.ts DATA_DIR HOLD_MS WAIT_SECONDS LOG`. On success it appends
 * `acquire PID MS` to LOG, prints `OWNER`, holds the lock for HOLD_MS (0: until SIGTERM, which
 * releases it, or SIGKILL, which leaves its claim behind), appends `release PID MS` and releases
 * it; when the lock is held it prints `BUSY OWNERPID`.
 */
import {appendFileSync} from 'node:fs'
import {lockDataDir} from '../../src/lib/db/owner-lock.js'

const [dataDir, holdMs, waitSeconds, log] = process.argv.slice(2)
try {
  const lock = await lockDataDir<never>(dataDir, Number(waitSeconds), () => undefined)
  appendFileSync(log, `acquire ${process.pid} ${performance.timeOrigin + performance.now()}\n`)
  process.stdout.write('OWNER\n')
  await new Promise<void>((resolve) => {
    setTimeout(resolve, Number(holdMs) || 2 ** 31 - 1)
    process.once('SIGTERM', () => resolve())
  })
  appendFileSync(log, `release ${process.pid} ${performance.timeOrigin + performance.now()}\n`)
  lock()
  process.exit(0)
} catch (error) {
  process.stdout.write(`BUSY ${(error as Error).message}\n`)
}
