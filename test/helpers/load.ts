/**
 * A small HTTP load generator for tests that change a running `mb serve` (signals, worker
 * replacement): several loops send requests back to back until stopped, half of them over
 * keep-alive connections (node's Agent), half on a new connection each, and every answer
 * and error is counted.
 */
import {spawn} from 'node:child_process'
import http from 'node:http'
import {fileURLToPath} from 'node:url'

export interface LoadResult {
  /** Answers by status code. */
  statuses: Record<number, number>
  /** Requests that failed (connection refused or reset, timeouts), with the error message. */
  errors: string[]
  /** Values of the `Server` header seen, with counts. */
  servers: Record<string, number>
  total: number
  /** Per loop, in order: the values of the `Server` header it saw, with counts. */
  loops: Record<string, number>[]
  /** The longest a request took, from its start to the end of its answer or its error (ms). */
  slowestMs: number
}

export interface Load {
  /** Stops the loops after their current request; resolves with the counts. */
  stop(): Promise<LoadResult>
  /** The counts so far. */
  readonly result: LoadResult
}

/** What {@link startLoad} sends: `concurrency` loops (4), `headers`, and `timeoutMs` (10,000) of silence, connecting included, before a request fails. */
export interface LoadOptions {
  concurrency?: number
  headers?: Record<string, string>
  timeoutMs?: number
}

/** Starts `concurrency` loops of `GET target` against 127.0.0.1:`port` with `headers`. */
export function startLoad(port: number, target: string, options: LoadOptions = {}): Load {
  const concurrency = options.concurrency ?? 4
  const result: LoadResult = {statuses: {}, errors: [], servers: {}, total: 0, loops: Array.from({length: concurrency}, () => ({})), slowestMs: 0}
  let running = true
  const one = (agent: http.Agent | false, loop: Record<string, number>) =>
    new Promise<void>((resolve) => {
      const started = performance.now()
      const done = () => {
        result.slowestMs = Math.max(result.slowestMs, performance.now() - started)
        resolve()
      }
      const req = http.request({host: '127.0.0.1', port, path: target, headers: options.headers, agent, timeout: options.timeoutMs ?? 10_000}, (res) => {
        res.resume()
        res.on('end', () => {
          result.total += 1
          result.statuses[res.statusCode!] = (result.statuses[res.statusCode!] ?? 0) + 1
          const server = String(res.headers.server)
          result.servers[server] = (result.servers[server] ?? 0) + 1
          loop[server] = (loop[server] ?? 0) + 1
          done()
        })
        res.on('error', (error) => {
          result.errors.push(error.message)
          done()
        })
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', (error) => {
        result.total += 1
        result.errors.push(error.message)
        done()
      })
      req.end()
    })
  const loops = Array.from({length: concurrency}, async (_, i) => {
    const agent = i % 2 === 0 ? new http.Agent({keepAlive: true, maxSockets: 1}) : false
    while (running) await one(agent, result.loops[i])
    if (agent) agent.destroy()
  })
  return {
    result,
    async stop() {
      running = false
      await Promise.all(loops)
      return result
    },
  }
}

/**
 * {@link startLoad} run by `command` (e.g. `['ip', 'netns', 'exec', NAME]`, for a server in a
 * network namespace) in a child process (./load-process.ts): the same counts, a tenth of a
 * second late; `stop()` ends the child (SIGTERM) and resolves with its final counts. The child
 * ends with this process too (its stdin closes), so a failed test leaves no loop running.
 * @throws Error (from `stop()`) when the child exits without printing them
 */
export function startLoadIn(command: string[], port: number, target: string, options: LoadOptions = {}): Load {
  const script = fileURLToPath(new URL('load-process.ts', import.meta.url))
  const [file, ...args] = [...command, process.execPath, '--import', 'tsx', script, String(port), target, JSON.stringify(options)]
  const child = spawn(file, args, {cwd: fileURLToPath(new URL('../..', import.meta.url)), stdio: ['pipe', 'pipe', 'pipe']})
  let result: LoadResult = {statuses: {}, errors: [], servers: {}, total: 0, loops: [], slowestMs: 0}
  let pending = ''
  let stderr = ''
  child.stderr!.on('data', (d) => (stderr += d))
  child.stdout!.on('data', (d) => {
    const lines = (pending + d).split('\n')
    pending = lines.pop()!
    if (lines.length > 0) result = JSON.parse(lines.at(-1)!)
  })
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)))
  return {
    get result() {
      return result
    },
    async stop() {
      child.kill('SIGTERM')
      const code = await exited
      if (code !== 0) throw new Error(`the load process exited with ${code}: ${stderr}`)
      return result
    },
  }
}
