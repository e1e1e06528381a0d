/**
 * A test clock for a child process (`NODE_OPTIONS=--import=THIS`, see {@link fastClockEnv}
 * in ./serve-process.ts): `Date.now()` runs `MB_TEST_CLOCK_SPEED` times as fast as the real
 * clock from the moment the process starts, so that minutes of a retry window pass in seconds.
 * Timers and `performance.now()` keep real time.
 */
const speed = Number(process.env.MB_TEST_CLOCK_SPEED ?? '1')
if (Number.isFinite(speed) && speed > 0 && speed !== 1) {
  const realNow = Date.now
  const start = realNow()
  Date.now = () => Math.floor(start + (realNow() - start) * speed)
}
