/**
 * Listen addresses of `mb serve` (`--listen`, `--metrics-listen`): parsing `HOST:PORT`, binding
 * a `node:http` server, and the URL it is reached at.
 */
import type http from 'node:http'
import type {AddressInfo} from 'node:net'
import {UsageError} from '../../errors.js'

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

/** Starts `server` listening on `host`:`port`; rejects with the bind error (EADDRINUSE, …). */
export async function listenOn(server: http.Server, host: string, port: number): Promise<AddressInfo> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return server.address() as AddressInfo
}

/** The `http://` URL of a bound address, IPv6 hosts in brackets (RFC 3986 §3.2.2). */
export function httpUrl(address: AddressInfo): string {
  return `http://${address.family === 'IPv6' ? `[${address.address}]` : address.address}:${address.port}`
}
