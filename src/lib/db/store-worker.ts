/**
 * The worker thread that owns a shared embedded store for `store-host.ts`: opens it, brings its
 * schema up to date, and serves its socket (`session-server.ts`) until told to stop. It runs
 * nothing else, so every query on the store goes through the socket's one queue.
 *
 * Messages to the host: `{type: 'ready'}`, `{type: 'shared', owner}` (another live process
 * shares the store already; this thread then ends), `{type: 'failed', message, code}`,
 * `{type: 'error', message}` (a client's query broke PGlite; the client was disconnected).
 * From the host: `{type: 'stop'}`, answered by `{type: 'stopped'}` once the store is closed.
 * A new store is created before this thread starts, in a process of its own (`store-create.ts`).
 */
import {join} from 'node:path'
import {parentPort, workerData} from 'node:worker_threads'
import {type SchemaMode, prepareSchema} from './migrate.js'
import {protectSocket} from './data-dir.js'
import {ownPglite, type PgliteOpenOptions, SHARED_SOCKET_NAME} from './pglite.js'
import {SessionServer} from './session-server.js'

/** What the host passes as `workerData`. */
export interface StoreWorkerData {
  dataDir: string
  options: PgliteOpenOptions
  schema: SchemaMode
}

const port = parentPort!
const {dataDir, options, schema} = workerData as StoreWorkerData

try {
  const opened = await ownPglite(dataDir, options)
  if ('sharedBy' in opened) {
    port.postMessage({type: 'shared', owner: opened.sharedBy})
  } else {
    const {database, pglite} = opened
    const server = new SessionServer(pglite, join(dataDir, SHARED_SOCKET_NAME), {onError: (error) => port.postMessage({type: 'error', message: error.message})})
    try {
      await prepareSchema(database, schema)
      await server.start()
      protectSocket(dataDir, join(dataDir, SHARED_SOCKET_NAME), opened.gid)
    } catch (error) {
      await server.stop().catch(() => {})
      await database.close()
      throw error
    }
    port.on('message', async (message: {type: string}) => {
      if (message.type !== 'stop') return
      try {
        await server.stop()
      } finally {
        await database.close()
        port.postMessage({type: 'stopped'})
        port.close()
      }
    })
    port.postMessage({type: 'ready'})
  }
} catch (error) {
  port.postMessage({type: 'failed', message: (error as Error).message, code: (error as {code?: string}).code})
}
