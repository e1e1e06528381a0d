#!/usr/bin/env node
import {existsSync} from 'node:fs'
import {setFlagsFromString} from 'node:v8'
import {execute} from '@oclif/core'

// A clone installed without its dev dependencies has no compiled code: say what to do
// instead of oclif's "command not found".
if (!existsSync(new URL('../dist/src/commands', import.meta.url))) {
  process.stderr.write('Error: mb is not built (no dist/). In a clone run `npm ci && npm run build`; on a server install a packed release (docs/operations.md).\n')
  process.exit(1)
}

// Every command but `mb serve` runs for seconds or minutes: the embedded store's WebAssembly
// (PostgreSQL compiled by PGlite) then runs on V8's baseline compiler alone. Its optimizing
// tier costs about 0.5 s of CPU and 60 MB per process and pays off only over a long run: an
// `mb mirror list` takes a third less CPU, a new store is created a fifth faster, and
// `mb index` of 200,000 files is as fast (docs/operations.md, "Memory").
if (process.argv[2] !== 'serve') setFlagsFromString('--liftoff-only')

await execute({dir: import.meta.url})
