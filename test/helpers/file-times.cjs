/**
 * Mocha reporter: the spec reporter, then each test file's wall time, slowest first (the
 * `MB_TEST_SLOWEST` slowest, 15 by default; `0` prints none). `.mocharc.cjs` names it, so
 * every pass (`npm test`, `npm run test:store`, CI) shows where its time went.
 *
 * A file's time runs from its first top-level suite starting to its last one ending, hooks
 * included (a `before` that starts nginx counts); a pass stopped by SIGTERM or SIGINT prints the
 * table so far. In parallel mode the workers time their files (./file-times-hooks.cjs) and write
 * the figures to a temporary file this reporter names in `MB_TEST_FILE_TIMES`. Plain CommonJS:
 * mocha `require()`s reporters.
 */
const {mkdtempSync, readFileSync, rmSync} = require('node:fs')
const {tmpdir} = require('node:os')
const {join} = require('node:path')
const Mocha = require('mocha')

const {EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_RUN_END} = Mocha.Runner.constants

/** Reads the workers' lines of `{file, ms, tests}` into `files` (a missing file reads as none). */
function readWorkerTimes(path, files) {
  let text = ''
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return
  }
  for (const line of text.split('\n')) {
    if (!line) continue
    const {file, ms, tests} = JSON.parse(line)
    files.set(file, {ms, tests})
  }
}

class FileTimes extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options)
    /** file -> {start, ms, tests} */
    const files = new Map()
    const started = Date.now()
    const parallel = runner.isParallelMode?.() === true
    let dir
    if (parallel) {
      dir = mkdtempSync(join(tmpdir(), 'mb-test-times-'))
      process.env.MB_TEST_FILE_TIMES = join(dir, 'times.jsonl')
    }
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (parallel || !suite.file || !suite.parent?.root) return
      const entry = files.get(suite.file) ?? {ms: 0, tests: 0}
      entry.start = Date.now()
      files.set(suite.file, entry)
    })
    runner.on(EVENT_SUITE_END, (suite) => {
      if (parallel || !suite.file || !suite.parent?.root) return
      const entry = files.get(suite.file)
      if (entry?.start === undefined) return
      entry.ms += Date.now() - entry.start
      entry.tests += suite.total()
      entry.start = undefined
    })
    const print = (how) => {
      if (parallel) {
        readWorkerTimes(process.env.MB_TEST_FILE_TIMES, files)
        rmSync(dir, {recursive: true, force: true})
      }
      const most = Number(process.env.MB_TEST_SLOWEST ?? 15)
      if (!(most > 0) || files.size === 0) return
      const now = Date.now()
      const cwd = `${process.cwd()}/`
      const time = ({ms, start}) => ms + (start === undefined ? 0 : now - start)
      const rows = [...files].sort((a, b) => time(b[1]) - time(a[1])).slice(0, most)
      const total = ((now - started) / 1000).toFixed(0)
      console.log(`  wall time per test file, slowest ${rows.length} of ${files.size} (${how} after ${total} s):`)
      for (const [file, entry] of rows) {
        const running = entry.start === undefined ? '' : '  (still running)'
        console.log(`  ${(time(entry) / 1000).toFixed(1).padStart(7)} s  ${String(entry.tests).padStart(4)} tests  ${file.replace(cwd, '')}${running}`)
      }
      console.log()
    }
    runner.once(EVENT_RUN_END, () => print('run ended'))
    // A pass stopped from outside (`timeout`, Ctrl-C) still says where its time went.
    for (const signal of ['SIGTERM', 'SIGINT']) {
      process.once(signal, () => {
        print(`stopped by ${signal}`)
        process.exit(signal === 'SIGTERM' ? 143 : 130)
      })
    }
  }
}

module.exports = FileTimes
