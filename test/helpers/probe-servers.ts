/**
 * Fault-injecting HTTP(S) servers on loopback for probe tests: a tiny static file server
 * honouring `Range: bytes=a-b`, plus servers that refuse, hang, redirect, or use a
 * self-signed certificate (made with `openssl req -x509` in a temp dir).
 */
import {execFileSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync} from 'node:fs'
import http from 'node:http'
import https from 'node:https'
import net from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

export interface TestServer {
  port: number
  /** Requests seen: method, url, headers. */
  requests: Array<{method: string; url: string; headers: http.IncomingHttpHeaders; remotePort?: number}>
  close(): Promise<void>
}

export type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void

/** Serves `files` (path without leading slash -> content) with Range support; 404 otherwise; 200 on '/'. */
export function staticHandler(files: Record<string, string | Buffer>): Handler {
  return (req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname).replace(/^\/+/, '')
    if (path === '') {
      res.writeHead(200, {'content-type': 'text/html'}).end('<html>index</html>')
      return
    }
    const content = files[path]
    if (content === undefined) {
      res.writeHead(404).end('not found')
      return
    }
    const body = Buffer.from(content)
    const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '')
    if (range && body.length > 0) {
      const start = Number(range[1])
      const end = Math.min(range[2] ? Number(range[2]) : body.length - 1, body.length - 1)
      res.writeHead(206, {'content-range': `bytes ${start}-${end}/${body.length}`, 'content-length': end - start + 1})
      res.end(body.subarray(start, end + 1))
      return
    }
    res.writeHead(200, {'content-length': body.length}).end(req.method === 'HEAD' ? undefined : body)
  }
}

function track(server: http.Server | https.Server | net.Server, requests: TestServer['requests']): () => Promise<void> {
  const sockets = new Set<net.Socket>()
  server.on('connection', (s: net.Socket) => {
    sockets.add(s)
    s.on('close', () => sockets.delete(s))
  })
  if (server instanceof http.Server || server instanceof https.Server) {
    server.on('request', (req: http.IncomingMessage) => requests.push({method: req.method ?? '', url: req.url ?? '', headers: req.headers, remotePort: req.socket.remotePort}))
  }
  return () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    })
}

async function listen(server: net.Server, host: string, port = 0): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  return (server.address() as net.AddressInfo).port
}

/** An HTTP server on `host` (default 127.0.0.1) with `handler`. */
export async function httpServer(handler: Handler, host = '127.0.0.1', port = 0): Promise<TestServer> {
  const requests: TestServer['requests'] = []
  const server = http.createServer(handler)
  const close = track(server, requests)
  return {port: await listen(server, host, port), requests, close}
}

/** A TCP server that accepts connections and never answers. */
export async function hangingServer(): Promise<TestServer> {
  const server = net.createServer(() => {})
  const close = track(server, [])
  return {port: await listen(server, '127.0.0.1'), requests: [], close}
}

/** A loopback port on which nothing listens (connections are refused). */
export async function closedPort(): Promise<number> {
  const server = net.createServer()
  const port = await listen(server, '127.0.0.1')
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}

/** An HTTPS server with a fresh self-signed certificate for CN=localhost / 127.0.0.1. */
export async function selfSignedServer(handler: Handler): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'mb-probe-tls-'))
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        join(dir, 'key.pem'),
        '-out',
        join(dir, 'cert.pem'),
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=DNS:localhost,IP:127.0.0.1',
      ],
      {stdio: 'ignore'},
    )
    const requests: TestServer['requests'] = []
    const server = https.createServer({key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem'))}, handler)
    const close = track(server, requests)
    return {port: await listen(server, '127.0.0.1'), requests, close}
  } finally {
    rmSync(dir, {recursive: true, force: true})
  }
}
