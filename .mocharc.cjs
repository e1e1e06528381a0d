// Mocha's settings for every pass. With MB_TEST_SCOPE=store (`npm run test:store`) the spec is
// the store-dependent test files only: those without a `// @store-independent: why` line
// (test/helpers/scope.cjs). See README.md, "Development".
const {testFiles} = require('./test/helpers/scope.cjs')

const scope = process.env.MB_TEST_SCOPE

module.exports = {
  'node-option': ['import=tsx', 'no-warnings'],
  timeout: 120000,
  recursive: true,
  // The tests are TypeScript: `npx mocha test/unit` (a directory) finds *.test.ts, not only *.js.
  extension: ['ts'],
  exit: true,
  reporter: './test/helpers/file-times.cjs',
  ...(scope ? {spec: testFiles(scope)} : {}),
}
