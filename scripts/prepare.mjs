/**
 * npm's `prepare` in a clone: `npm install` / `npm ci` with the dev dependencies compiles mb
 * (`npm run build`), so `./bin/run.js` works right after it. Plain JavaScript, since it runs
 * before anything is compiled and without tsx.
 *
 * It builds nothing when:
 * - npm is packing or publishing (`npm_command` pack/publish): `prepack` builds then;
 * - the dev dependencies are absent (`npm ci --omit=dev`): TypeScript is not there to build
 *   with, so it says how to get a runnable copy and exits 0 (an install must not fail).
 * A tarball installed with `npm install -g ./mb-X.tgz` never runs `prepare`: it ships `dist/`.
 */
import {spawnSync} from 'node:child_process'
import {existsSync} from 'node:fs'
import {createRequire} from 'node:module'

const command = process.env.npm_command
if (command === 'pack' || command === 'publish') process.exit(0)

let hasTypescript = true
try {
  createRequire(import.meta.url).resolve('typescript')
} catch {
  hasTypescript = false
}

if (!hasTypescript) {
  const built = existsSync(new URL('../dist/src/commands', import.meta.url))
  process.stderr.write(
    built
      ? 'mb: dev dependencies not installed; keeping the existing build in dist/.\n'
      : 'mb: dev dependencies not installed, so mb is not built. Install a packed release (npm install -g ./mb-X.tgz), or run `npm ci && npm run build && npm prune --omit=dev` (docs/operations.md).\n',
  )
  process.exit(0)
}

const result = spawnSync('npm', ['run', 'build'], {stdio: 'inherit'})
process.exit(result.status ?? 1)
