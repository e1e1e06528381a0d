/**
 * Compiles `src/` into `dist/src/` as bundles: each command, the `init` hook, the embedded
 * store's worker thread and its store-creating child process are entries, and the code they share (mb's own and its pure-JavaScript
 * dependencies) goes into chunks beside the worker, in `dist/src/lib/db/` (the store's host
 * finds `./store-worker.js` and `./store-create.js` next to itself). An `mb` command then loads a few
 * files instead of about 800: about 0.3 s less CPU per run (docs/architecture.md, "Build").
 *
 * Left outside the bundles: oclif (it loads the commands, which must share its classes),
 * PGlite and the GeoIP database packages (they read their own files next to their modules),
 * hash-wasm (hashing threads load it by path) and pg's optional native binding.
 * Type checking is `npm run typecheck` (part of `npm run lint`); esbuild only strips types.
 *
 * Usage: `node scripts/build.mjs` (the `build` script runs it before `oclif manifest`).
 */
import {readdirSync, rmSync} from 'node:fs'
import {join, resolve} from 'node:path'
import {build} from 'esbuild'

/** Every file under `dir` whose name ends with `suffix`, recursively. */
function files(dir, suffix) {
  return readdirSync(dir, {withFileTypes: true}).flatMap((e) => (e.isDirectory() ? files(join(dir, e.name), suffix) : e.name.endsWith(suffix) ? [join(dir, e.name)] : []))
}

// The new files are written over the old ones, and only then are the files of an earlier
// build that this one did not write removed: an `mb` that runs during a build (a test run
// beside it) finds every file it loads. Chunk names carry a hash of their content.
const result = await build({
  entryPoints: [...files('src/commands', '.ts'), 'src/hooks/init/version.ts', 'src/lib/db/store-worker.ts', 'src/lib/db/store-create.ts'],
  outdir: 'dist/src',
  outbase: 'src',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  chunkNames: 'lib/db/chunk-[hash]',
  external: ['@oclif/core', '@oclif/plugin-help', '@electric-sql/pglite', '@electric-sql/pglite/*', '@ip-location-db/*', 'hash-wasm', 'pg-native'],
  // The CommonJS dependencies bundled (pg, among others) call require() for Node's modules.
  banner: {js: "import {createRequire as mbCreateRequire} from 'node:module'; const require = mbCreateRequire(import.meta.url);"},
  logLevel: 'warning',
  metafile: true,
})
const written = new Set(Object.keys(result.metafile.outputs).map((file) => resolve(file)))
for (const file of files('dist', '')) if (!written.has(resolve(file))) rmSync(file)
removeEmptyFolders('dist')

/** Removes the folders under `dir` (and `dir`) that hold no file once their own empty folders are gone. */
function removeEmptyFolders(dir) {
  for (const e of readdirSync(dir, {withFileTypes: true})) if (e.isDirectory()) removeEmptyFolders(join(dir, e.name))
  if (readdirSync(dir).length === 0) rmSync(dir, {recursive: true})
}
