/**
 * Root hooks that time each test file in mocha's parallel mode, for the reporter
 * (./file-times.cjs). There each worker runs one file per mocha run, with these hooks around
 * it, and the reporter only sees the file's events replayed when it ends: so the worker writes
 * `{file, ms, tests}` as one JSON line to the file `MB_TEST_FILE_TIMES` that the reporter set up
 * and reads at the end. In a serial run (no `MOCHA_WORKER_ID`) they do nothing: the reporter
 * times files itself. `.mocharc.cjs` requires this file.
 */
const {appendFileSync} = require('node:fs')

let started = 0

const parallel = process.env.MOCHA_WORKER_ID !== undefined && process.env.MB_TEST_FILE_TIMES

exports.mochaHooks = parallel
  ? {
      beforeAll() {
        started = Date.now()
      },
      afterAll() {
        const root = this.test.parent
        const file = root.suites.find((s) => s.file)?.file
        if (!file) return
        appendFileSync(process.env.MB_TEST_FILE_TIMES, `${JSON.stringify({file, ms: Date.now() - started, tests: root.total()})}\n`)
      },
    }
  : {}
