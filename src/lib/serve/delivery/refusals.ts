/**
 * Answers to what node:http refuses before a request reaches the server's handler: malformed
 * requests, oversized headers or targets, and CONNECT.
 */
import http from 'node:http'
import type {Duplex} from 'node:stream'

/**
 * Statuses for requests node's parser refuses before they reach a handler, by error code:
 * 431 for oversized headers (RFC 6585 §5), 408 for a request that took too long
 * (RFC 9110 §15.5.9), 501 for a method node does not know (RFC 9110 §15.6.2); 400 otherwise.
 */
const CLIENT_ERROR_STATUS: Record<string, number> = {HPE_HEADER_OVERFLOW: 431, ERR_HTTP_REQUEST_TIMEOUT: 408, HPE_INVALID_METHOD: 501}

/** Writes a bodiless `status` answer (plus `extra` header lines, each ending in CRLF) on a raw socket and closes it. */
function answerRaw(socket: Duplex, status: number, extra = ''): void {
  socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n${extra}Connection: close\r\nContent-Length: 0\r\n\r\n`)
}

/** Answers, on `server`, the requests its parser refuses and the CONNECT requests it hands to no handler. */
export function answerRefusals(server: http.Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    // Malformed requests and oversized headers/targets never reach handle(); answer cleanly.
    if (!socket.writable) return socket.destroy()
    answerRaw(socket, CLIENT_ERROR_STATUS[error.code ?? ''] ?? 400)
  })
  // node hands CONNECT to this event, not to handle(), and drops the socket when nobody
  // listens: answer it like any other method mb does not serve.
  server.on('connect', (_req: http.IncomingMessage, socket: Duplex) => {
    if (!socket.writable) return socket.destroy()
    answerRaw(socket, 405, 'Allow: GET, HEAD\r\n')
  })
}
