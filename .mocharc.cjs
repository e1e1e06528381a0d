// Mocha's settings for every pass. With MB_TEST_SCOPE=store (`npm run test:store`) the spec is
// the store-dependent test files only: those without a `// @store-independent: why` line
// (test/helpers/scope.cjs). See README.md, "Development".
//
// Files run in parallel, MB_TEST_JOBS at a time (default: cores + 1, as most files spend part
// of their time waiting on the processes they start); each test file is its own world (own
// ports, temporary directories and databases), so files never share state. Temporary files go
// to a fresh directory on /dev/shm when it is there (MB_TEST_TMPDIR names another): the
// embedded store each test copies is 40 MB, and a copy in memory costs a third of one on disk.
const {mkdirSync} = require('node:fs')
const {availableParallelism, tmpdir} = require('node:os')
const {join} = require('node:path')
const {testFiles} = require('./test/helpers/scope.cjs')

const scope = process.env.MB_TEST_SCOPE

/** The directory the run's temporary files go to (TMPDIR for the tests and what they start). */
function testTmpdir() {
  if (process.env.MB_TEST_TMPDIR) return process.env.MB_TEST_TMPDIR
  const base = process.env.TMPDIR === undefined ? '/dev/shm' : tmpdir()
  try {
    mkdirSync(join(base, 'mb-test'), {recursive: true})
    return join(base, 'mb-test')
  } catch {
    return tmpdir()
  }
}
process.env.TMPDIR = testTmpdir()

const jobs = Number(process.env.MB_TEST_JOBS ?? availableParallelism() + 1)

module.exports = {
  'node-option': ['import=tsx', 'no-warnings'],
  timeout: 120000,
  recursive: true,
  // The tests are TypeScript: `npx mocha test/unit` (a directory) finds *.test.ts, not only *.js.
  extension: ['ts'],
  exit: true,
  parallel: jobs > 1,
  jobs,
  require: ['./test/helpers/file-times-hooks.cjs'],
  reporter: './test/helpers/file-times.cjs',
  ...(scope ? {spec: testFiles(scope)} : {}),
}
