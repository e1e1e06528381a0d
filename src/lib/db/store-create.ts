/**
 * A child process that creates a new embedded store for `store-host.ts`: opens (creates) the
 * store in `dataDir`, brings its schema up to date, closes it and exits. PGlite's creation of a
 * store (initdb) takes about 500 MB of WebAssembly heap and leaves some 40 MB in the C heap of
 * the process that ran it, which glibc keeps (freed, fragmented, never returned to the
 * system): in a process of its own, all of it goes back at its exit, and the serving process
 * starts as small as one started on an existing store (`npm run bench -- embedded`).
 *
 * Input: the {@link StoreCreateData} as JSON in `argv[2]`. Output over the IPC channel, one
 * message: `{type: 'created'}`, `{type: 'shared', owner}` (another live process shares the
 * store; nothing was done), or `{type: 'failed', message, code}`.
 */
import type {SchemaMode} from './migrate.js'
import {prepareSchema} from './migrate.js'
import {ownPglite, type PgliteOpenOptions} from './pglite.js'

/** What the host passes in `argv[2]`, as JSON. */
export interface StoreCreateData {
  dataDir: string
  options: PgliteOpenOptions
  schema: SchemaMode
}

const {dataDir, options, schema} = JSON.parse(process.argv[2] ?? '{}') as StoreCreateData

/** Sends `message` to the host and waits until it is written. */
function tell(message: object): Promise<void> {
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()))
}

try {
  const opened = await ownPglite(dataDir, options)
  if ('sharedBy' in opened) {
    await tell({type: 'shared', owner: opened.sharedBy})
  } else {
    try {
      await prepareSchema(opened.database, schema)
    } finally {
      await opened.database.close()
    }
    await tell({type: 'created'})
  }
} catch (error) {
  await tell({type: 'failed', message: (error as Error).message, code: (error as {code?: string}).code})
}
process.disconnect()
