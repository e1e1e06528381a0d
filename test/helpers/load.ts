/**
 * A small HTTP load generator for tests that change a running `mb serve` (signals, worker
 * replacement): several loops send requests back to back until stopped, half of them over
 * keep-alive connections (node's Agent), half on a new connection each, and every answer
 * and error is counted.
 */
import http from 'node:http'

export interface LoadResult {
  /** Answers by status code. */
  statuses: Record<number, number>
  /** Requests that failed (connection refused or reset, timeouts), with the error message. */
  errors: string[]
  /** Values of the `Server` header seen, with counts. */
  servers: Record<string, number>
  total: number
}

export interface Load {
  /** Stops the loops after their current request; resolves with the counts. */
  stop(): Promise<LoadResult>
  /** The counts so far. */
  readonly result: LoadResult
}

/** Starts `concurrency` loops of `GET target` against 127.0.0.1:`port` with `headers`. */
export function startLoad(port: number, target: string, options: {concurrency?: number; headers?: Record<string, string>} = {}): Load {
  const result: LoadResult = {statuses: {}, errors: [], servers: {}, total: 0}
  let running = true
  const one = (agent: http.Agent | false) =>
    new Promise<void>((resolve) => {
      const req = http.request({host: '127.0.0.1', port, path: target, headers: options.headers, agent, timeout: 10_000}, (res) => {
        res.resume()
        res.on('end', () => {
          result.total += 1
          result.statuses[res.statusCode!] = (result.statuses[res.statusCode!] ?? 0) + 1
          const server = String(res.headers.server)
          result.servers[server] = (result.servers[server] ?? 0) + 1
          resolve()
        })
        res.on('error', (error) => {
          result.errors.push(error.message)
          resolve()
        })
      })
      req.on('timeout', () => req.destroy(new Error('timeout')))
      req.on('error', (error) => {
        result.total += 1
        result.errors.push(error.message)
        resolve()
      })
      req.end()
    })
  const loops = Array.from({length: options.concurrency ?? 4}, async (_, i) => {
    const agent = i % 2 === 0 ? new http.Agent({keepAlive: true, maxSockets: 1}) : false
    while (running) await one(agent)
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
