/**
 * Which test files a pass runs. test/unit/ opens no store, so all of it is store-independent.
 * Elsewhere, a file whose behaviour does not depend on the store (a client,
 * a daemon, a format, HTTP, the CLI's own checks) says so with a line
 *
 *   // @store-independent: what it tests instead
 *
 * and runs once, on the store the pass names (`npm test`: PGlite unless MB_TEST_DATABASE_URL
 * is set). Every other file is store-dependent and runs on both stores: `.ci/run` runs
 * `npm test` on PGlite, then `npm run test:store` (MB_TEST_SCOPE=store) on PostgreSQL.
 * Without the line a file runs on both, so a new test is never left out.
 */
const {readdirSync, readFileSync} = require('node:fs')
const {join, relative} = require('node:path')

const ROOT = join(__dirname, '..')
const MARK = /^\/\/ @store-independent: \S/m

function walk(dir) {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.test.ts') ? [join(dir, e.name)] : []))
}

/** Whether `file` (a path) declares itself store-independent. */
function storeIndependent(file) {
  return relative(ROOT, file).startsWith('unit/') || MARK.test(readFileSync(file, 'utf8'))
}

/**
 * The spec for MB_TEST_SCOPE: `all` every test file, `store` only the store-dependent ones
 * (paths relative to the working directory, sorted).
 */
function testFiles(scope) {
  if (scope === 'all') return ['test/**/*.test.ts']
  if (scope !== 'store') throw new Error(`MB_TEST_SCOPE=${scope}: expected store or all`)
  return walk(ROOT)
    .filter((f) => !storeIndependent(f))
    .map((f) => relative(process.cwd(), f))
    .sort()
}

module.exports = {testFiles}
