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

// The embedded store's WebAssembly (PostgreSQL compiled by PGlite) runs on V8's baseline
// compiler alone, in every command: its optimizing tier costs a short command about 0.5 s of
// CPU and 60 MB, and `mb serve` about 45 MB resident for the life of the process, for store
// queries that a small site's server runs rarely (its redirects are answered from the
// snapshot in JavaScript, which this flag leaves alone). Measured under load: `mb mirror list`
// 1.7 -> 1.0 s of CPU, a new store created a fifth faster, `mb index` of 200,000 files as
// fast, `mb serve` 45 MB less (docs/operations.md, "Memory").
setFlagsFromString('--liftoff-only')

await execute({dir: import.meta.url})
