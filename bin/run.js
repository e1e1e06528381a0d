#!/usr/bin/env node
import {existsSync} from 'node:fs'
import {execute} from '@oclif/core'

// A clone installed without its dev dependencies has no compiled code: say what to do
// instead of oclif's "command not found".
if (!existsSync(new URL('../dist/src/commands', import.meta.url))) {
  process.stderr.write('Error: mb is not built (no dist/). In a clone run `npm ci && npm run build`; on a server install a packed release (docs/operations.md).\n')
  process.exit(1)
}

await execute({dir: import.meta.url})
