/**
 * Listen addresses of `mb serve` (`--listen`, `--metrics-listen`): parsing `HOST:PORT`, binding
 * a `node:http` server, or taking the listening socket systemd passed (socket activation), and
 * the URL it is reached at.
 */
import {fstatSync} from 'node:fs'
import type http from 'node:http'
import type {AddressInfo} from 'node:net'
import {MbError, UsageError} from '../../errors.js'

/** Where a server listens: an address to bind, or an inherited listening socket's descriptor. */
export type ListenTarget = {host: string; port: number} | {fd: number}

/** The first descriptor of sockets passed by systemd (SD_LISTEN_FDS_START, sd_listen_fds(3)). */
const LISTEN_FDS_START = 3

/**
 * The listening socket systemd passed to this process (socket activation, sd_listen_fds(3):
 * `LISTEN_PID` is this process and `LISTEN_FDS` counts the sockets from fd 3), or undefined
 * when none was passed to it. Like `sd_listen_fds(1)` it removes `LISTEN_PID`, `LISTEN_FDS`
 * and `LISTEN_FDNAMES` from `env`, so that no process it starts takes them for its own. The
 * protocol is two variables and a descriptor number; npm's packages for it (`systemd`,
 * `systemd-socket`) are unmaintained.
 * @throws UsageError INVALID_LISTEN when more than one socket is passed (mb serves one) or
 *         fd 3 is not a socket
 */
export function inheritedSocket(env: NodeJS.ProcessEnv = process.env): {fd: number} | undefined {
  const pid = env.LISTEN_PID
  const count = env.LISTEN_FDS
  delete env.LISTEN_PID
  delete env.LISTEN_FDS
  delete env.LISTEN_FDNAMES
  if (pid === undefined || count === undefined || Number(pid) !== process.pid) return undefined
  if (count !== '1') throw new UsageError(`systemd passed ${count} sockets (LISTEN_FDS); mb serve listens on one. Give the socket unit one ListenStream= line.`, 'INVALID_LISTEN')
  let socket = false
  try {
    socket = fstatSync(LISTEN_FDS_START).isSocket()
  } catch {
    // A closed descriptor is no socket either.
  }
  if (!socket) throw new UsageError(`LISTEN_FDS says systemd passed a socket, but fd ${LISTEN_FDS_START} is not one.`, 'INVALID_LISTEN')
  return {fd: LISTEN_FDS_START}
}

/** The variable by which the `--workers` primary tells its workers to accept on the socket systemd passed it. */
const PRIMARY_SOCKET_VARIABLE = 'MB_LISTEN_FD'

/**
 * For the `--workers` primary that took a socket from systemd ({@link inheritedSocket}): the
 * variables its workers get, so that each listens on that descriptor ({@link primarySocket}).
 */
export function primarySocketEnv(socket: {fd: number}): Record<string, string> {
  return {[PRIMARY_SOCKET_VARIABLE]: String(socket.fd)}
}

/**
 * In a `--workers` worker: the descriptor of the listening socket its primary took from
 * systemd, or undefined. node:cluster then listens on that descriptor in the primary (which
 * holds it) and hands the connections to the workers in turn, as it does for a bound port;
 * the variable is removed, so that no process the worker starts takes it.
 */
export function primarySocket(env: NodeJS.ProcessEnv = process.env): {fd: number} | undefined {
  const fd = env[PRIMARY_SOCKET_VARIABLE]
  delete env[PRIMARY_SOCKET_VARIABLE]
  return fd !== undefined && /^\d+$/.test(fd) ? {fd: Number(fd)} : undefined
}

/**
 * Splits `HOST:PORT` / `[V6]:PORT` / `:PORT` (host 0.0.0.0); port 0 asks for a free one.
 * @param flag the option that gave `text`, for the message
 * @param examplePort the port the message's examples show
 * @throws UsageError `INVALID_LISTEN`
 */
export function parseListen(text: string, flag = '--listen', examplePort = 8080): {host: string; port: number} {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text.trim())
  const port = m ? Number(m[3]) : Number.NaN
  if (!m || port > 65_535) throw new UsageError(`Invalid ${flag} address "${text}": expected HOST:PORT such as 127.0.0.1:${examplePort} or [::1]:${examplePort}.`, 'INVALID_LISTEN')
  return {host: m[1] ?? (m[2] || '0.0.0.0'), port}
}

/**
 * Starts `server` listening on `target`: binds `host`:`port`, or accepts on the inherited
 * listening socket `fd` (a TCP one: its address names the server).
 * @throws the bind error (EADDRINUSE, …); MbError LISTEN_FAILED for an inherited socket that is
 *         not TCP (a Unix socket, say)
 */
export async function listenOn(server: http.Server, target: ListenTarget): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    const listening = () => {
      server.off('error', reject)
      resolve()
    }
    if ('fd' in target) server.listen({fd: target.fd}, listening)
    else server.listen(target.port, target.host, listening)
  })
  const address = server.address()
  if (address === null || typeof address === 'string') {
    server.close()
    throw new MbError(`The inherited socket is not a TCP socket (${address ?? 'no address'}); give the socket unit a ListenStream= of HOST:PORT.`, {code: 'LISTEN_FAILED'})
  }
  return address
}

/** The `http://` URL of a bound address, IPv6 hosts in brackets (RFC 3986 §3.2.2). */
export function httpUrl(address: AddressInfo): string {
  return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
}
