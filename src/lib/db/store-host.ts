/**
 * Shares an embedded store from this process without running it on this thread: a worker
 * thread (`store-worker.ts`) owns PGlite and serves the socket, and this process connects to
 * that socket like every other `mb` process (the `pglite-shared` backend). PGlite's work for
 * a scan or an index then never holds up this thread (the one answering requests in
 * `mb serve`), and this process's own queries queue with everybody else's, each transaction
 * whole (`session-server.ts`).
 */
import {fork} from 'node:child_process'
import {createRequire} from 'node:module'
import {fileURLToPath, pathToFileURL} from 'node:url'
import {Worker} from 'node:worker_threads'
import {ERRORS, type ErrorCode, MbError} from '../errors.js'
import {groupId, storeExists} from './data-dir.js'
import type {PgliteOpenOptions} from './pglite.js'
import {openSharedPglite} from './postgres.js'
import type {Database} from './store.js'
import type {StoreCreateData} from './store-create.js'
import type {StoreWorkerData} from './store-worker.js'

type CreateMessage = {type: 'created'} | {type: 'shared'; owner: number} | {type: 'failed'; message: string; code?: string}

type WorkerMessage = {type: 'ready'} | {type: 'shared'; owner: number} | {type: 'failed'; message: string; code?: string} | {type: 'error'; message: string} | {type: 'stopped'}

/** Connections this process keeps to its own store: a probe round holds one as its session. */
const OWN_POOL_SIZE = 4

/**
 * V8 limits of the store's thread. The thread only passes protocol messages between the socket
 * and PGlite, whose rows are buffers outside the JavaScript heap, so a small young generation
 * (V8's default is 16 MB per semi-space, most of it touched) costs no speed and saves about
 * 25 MB of resident memory (`npm run bench -- embedded`).
 */
const STORE_THREAD_LIMITS = {maxYoungGenerationSizeMb: 4}

/**
 * Starts the worker on its module: the compiled `.js` beside this one, or, when run from source
 * (the tests, `bin/dev.js`), the `.ts` through tsx's loader.
 */
function startWorker(workerData: StoreWorkerData): Worker {
  if (!import.meta.url.endsWith('.ts')) return new Worker(new URL('./store-worker.js', import.meta.url), {workerData, resourceLimits: STORE_THREAD_LIMITS})
  const tsx = JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href)
  const url = JSON.stringify(new URL('./store-worker.ts', import.meta.url).href)
  return new Worker(`import(${tsx}).then((tsx) => { tsx.register(); return import(${url}) })`, {eval: true, workerData, resourceLimits: STORE_THREAD_LIMITS})
}

/**
 * The error a thread or child process reported, as this process's MbError. A system error's
 * code (`ENOTDIR`, `EACCES`) is no code of mb's catalogue: it becomes a plain failure (exit 1)
 * whose message keeps it.
 */
function reported(message: string, code: string | undefined): MbError {
  return new MbError(message, {code: code !== undefined && code in ERRORS ? (code as ErrorCode) : undefined})
}

/** The worker's first message; a worker that dies first rejects. */
function firstMessage(worker: Worker): Promise<WorkerMessage> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number) => reject(new MbError(`The embedded store's thread stopped while opening the store (exit code ${code}).`, {code: 'DB_OPEN_FAILED'}))
    worker.once('error', reject)
    worker.once('exit', onExit)
    worker.once('message', (message: WorkerMessage) => {
      worker.off('error', reject)
      worker.off('exit', onExit)
      resolve(message)
    })
  })
}

/** Asks the worker to close the store and waits (up to 30 s, then ends it) until it has. */
async function stopWorker(worker: Worker): Promise<void> {
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()))
  worker.postMessage({type: 'stop'})
  const timer = setTimeout(() => void worker.terminate(), 30_000)
  await exited
  clearTimeout(timer)
}

/**
 * Why a second host is refused: a process that borrowed another one's store would lose its
 * own state (download counts above all) when that process stops and takes the socket along,
 * and would never open the store itself.
 */
function servedBy(dataDir: string, owner: number): MbError {
  return new MbError(
    `The embedded store at ${dataDir} is already served by process ${owner} (a running \`mb serve\`). One store has one server: stop process ${owner} first (\`kill ${owner}\`; \`mb serve stop --pid-file FILE\` if it was started with --pid-file; \`systemctl stop mb-serve.socket mb-serve\` under systemd), give this server its own --data-dir, or use PostgreSQL (MB_DATABASE_URL) to run several servers on one store.`,
    {code: 'STORE_SERVED'},
  )
}

/**
 * Creates and migrates a new store in a child process that then exits (`store-create.ts`), so
 * that the memory PGlite's creation of a store takes (about 500 MB of WebAssembly heap, and
 * about 40 MB of C heap that a thread's end would not give back) never stays in a serving
 * process (`npm run bench -- embedded`). The child runs the WebAssembly on V8's baseline
 * compiler, as `bin/run.js` does for every command.
 * @throws MbError as the child reports it (DB_LOCK, DB_OPEN_FAILED, migration errors), and
 *         DB_OPEN_FAILED when the child ends without a word
 */
async function createInChildProcess(data: StoreCreateData): Promise<void> {
  const fromSource = import.meta.url.endsWith('.ts')
  const module = new URL(fromSource ? './store-create.ts' : './store-create.js', import.meta.url)
  const execArgv = ['--liftoff-only', ...(fromSource ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm')).href] : [])]
  const child = fork(fileURLToPath(module), [JSON.stringify(data)], {execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc']})
  let answer: CreateMessage | undefined
  child.on('message', (message: CreateMessage) => {
    answer ??= message
  })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (exitCode) => resolve(exitCode))
  })
  if (answer === undefined) throw new MbError(`The process creating the embedded store at ${data.dataDir} stopped without creating it (exit code ${code}).`, {code: 'DB_OPEN_FAILED'})
  if (answer.type === 'failed') throw reported(answer.message, answer.code)
}

/**
 * Opens the embedded store in `dataDir` on a worker thread and shares it through the socket
 * `DATA_DIR/.s.PGSQL.5432`. Only one process hosts a store: while another live process
 * shares it already, this one is refused.
 * `close()` closes this process's connections, then the store, and releases its lock.
 * @param schema  what the worker does with pending migrations before it shares the store
 * @throws MbError STORE_SERVED when another live process shares the store (DB_BUSY when its
 *         socket does not answer); as `openPglite` (DB_UNCONFIGURED, DB_BUSY, DB_LOCK,
 *         DB_OPEN_FAILED), and the migration errors
 */
export async function hostPglite(dataDir: string, options: PgliteOpenOptions, schema: StoreWorkerData['schema']): Promise<Database> {
  // Resolved here too, so that an unknown group is this thread's usage error (exit 2).
  const gid = options.socketGroup === undefined ? undefined : groupId(options.socketGroup)
  if (options.create && !storeExists(dataDir)) await createInChildProcess({dataDir, options, schema})
  const worker = startWorker({dataDir, options, schema})
  const first = await firstMessage(worker)
  if (first.type === 'failed') throw reported(first.message, first.code)
  if (first.type === 'shared') {
    await worker.terminate()
    // A socket file left by a server that died, beside a live holder that shares nothing,
    // answers nobody: that is DB_BUSY (the holder is named), not a second server.
    const other = await openSharedPglite(dataDir, first.owner, {gid})
    await other.close()
    throw servedBy(dataDir, first.owner)
  }
  worker.on('message', (message: WorkerMessage) => {
    if (message.type === 'error') process.stderr.write(`mb: the embedded store disconnected a client after an internal error: ${message.message}\n`)
  })
  let stopping = false
  worker.on('exit', (code) => {
    if (!stopping) process.stderr.write(`mb: the embedded store's thread stopped unexpectedly (exit code ${code}); the store is unavailable until this process restarts.\n`)
  })
  let client: Database
  try {
    client = await openSharedPglite(dataDir, process.pid, {max: OWN_POOL_SIZE, gid})
  } catch (error) {
    stopping = true
    await stopWorker(worker)
    throw error
  }
  return {
    ...client,
    async close() {
      try {
        await client.close()
      } finally {
        stopping = true
        await stopWorker(worker)
      }
    },
  }
}
