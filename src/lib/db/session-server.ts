/**
 * The Unix socket through which every `mb` process (the serving one included) uses an
 * embedded store that one process owns: PostgreSQL's frontend/backend protocol (protocol 3.0,
 * https://www.postgresql.org/docs/current/protocol-flow.html) in front of PGlite's single
 * session.
 *
 * Why our own and not `@electric-sql/pglite-socket`'s server: that server runs each message
 * on its own, and keeps only an open transaction (`isInTransaction()`) with one client. The
 * Parse/Bind/Execute/Sync messages of two clients therefore interleave outside transactions
 * (`bind message supplies 6 parameters…`), and it offers no way to keep the owner's own
 * queries out of a client's transaction. Here a client *holds the session* from its first
 * message until a ReadyForQuery that says idle (`Z` with status `I`): that covers a whole
 * extended-protocol group up to Sync and a whole transaction up to COMMIT/ROLLBACK. Nothing
 * else runs meanwhile; the other clients' messages wait, in arrival order. The owner makes no
 * queries of its own beside this server (it runs on a worker thread that only serves it).
 *
 * Also:
 * - Startup: every client gets the startup answer PGlite gave once at start (its startup
 *   parameters would otherwise change the one session for everybody), and Terminate closes
 *   the connection. SSL and GSS encryption requests are declined; cancel requests ignored.
 * - A client that disconnects while holding the session is cleaned up with Sync and, when
 *   a transaction is still open, ROLLBACK. A holder that sends nothing for
 *   {@link HOLD_IDLE_SECONDS} is disconnected (PostgreSQL's
 *   idle_in_transaction_session_timeout), so one stuck process cannot stop the store.
 * - LISTEN/NOTIFY: the session hears every NOTIFY, but PGlite writes the NotificationResponse
 *   into the output of whichever client committed. The server copies each one to every other
 *   client that ran `LISTEN` on that channel. UNLISTEN is answered here, without touching the
 *   session, since the session's LISTEN serves every client.
 */
import {chmodSync, rmSync} from 'node:fs'
import {createServer, type Server, type Socket} from 'node:net'
import type {PGlite} from '@electric-sql/pglite'

/** How long a client may hold the session without sending anything, in seconds: long enough for `mb index` walking a slow tree inside its transaction. */
const HOLD_IDLE_SECONDS = 600

const PROTOCOL_3 = 196_608
const SSL_REQUEST = 80_877_103
const GSSENC_REQUEST = 80_877_104
const CANCEL_REQUEST = 80_877_102
const EMPTY = Buffer.alloc(0)
const SYNC = Buffer.from([0x53, 0, 0, 0, 4])

/** A frontend message for PGlite, or one the server answers itself. */
type Message = {kind: 'run'; bytes: Buffer; listen?: string} | {kind: 'unlisten'; channel?: string}

/** One client connection. */
class Connection {
  buffer: Buffer = EMPTY
  started = false
  closed = false
  /** Complete messages not run yet, in order. */
  pending: Message[] = []
  /** Channels this client ran LISTEN on (PostgreSQL's identifier folding applied). */
  readonly channels = new Set<string>()

  constructor(readonly socket: Socket) {}

  write(bytes: Buffer): void {
    if (!this.closed && this.socket.writable) this.socket.write(bytes)
  }
}

/**
 * Scans PGlite's output (backend messages, split across chunks anywhere) for the last
 * ReadyForQuery status and for NotificationResponse messages.
 */
export class BackendScanner {
  /** The status byte of the last ReadyForQuery seen (`I`, `T`, `E`), or undefined. */
  ready?: string
  /** Complete NotificationResponse messages seen. */
  readonly notifications: Buffer[] = []
  private carry: Buffer = EMPTY
  private skip = 0

  feed(chunk: Buffer): void {
    const data = this.carry.length > 0 ? Buffer.concat([this.carry, chunk]) : chunk
    this.carry = EMPTY
    let i = 0
    while (i < data.length) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, data.length - i)
        i += n
        this.skip -= n
        continue
      }
      if (data.length - i < 5) {
        this.carry = Buffer.from(data.subarray(i))
        break
      }
      const type = data[i]
      const length = data.readInt32BE(i + 1)
      if (type !== 0x5a && type !== 0x41) {
        i += 5
        this.skip = length - 4
        continue
      }
      if (data.length - i < 1 + length) {
        this.carry = Buffer.from(data.subarray(i))
        break
      }
      if (type === 0x5a) this.ready = String.fromCharCode(data[i + 5])
      else this.notifications.push(Buffer.from(data.subarray(i, i + 1 + length)))
      i += 1 + length
    }
  }
}

/** The channel of a NotificationResponse (`A`, int32 length, int32 pid, channel\0, payload\0). */
function notificationChannel(message: Buffer): string {
  return message.toString('utf8', 9, message.indexOf(0, 9))
}

/** A channel name as PostgreSQL folds it: quoted as written, unquoted in lower case. */
function foldIdentifier(text: string): string {
  return text.startsWith('"') ? text.slice(1, -1).replace(/""/g, '"') : text.toLowerCase()
}

const LISTEN_RE = /^\s*(UN)?LISTEN\s+("(?:[^"]|"")+"|[A-Za-z_][\w$]*|\*)\s*;?\s*$/i

/** Classifies one complete frontend message (type byte + length + body). */
function classify(bytes: Buffer): Message {
  if (bytes[0] === 0x51) {
    const m = LISTEN_RE.exec(bytes.toString('utf8', 5, bytes.length - 1))
    if (m?.[1]) return {kind: 'unlisten', channel: m[2] === '*' ? undefined : foldIdentifier(m[2])}
    if (m && m[2] !== '*') return {kind: 'run', bytes, listen: foldIdentifier(m[2])}
  }
  return {kind: 'run', bytes}
}

/** An ErrorResponse with severity FATAL, SQLSTATE `code` and `text`. */
function fatal(code: string, text: string): Buffer {
  const body = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${text}\0\0`, 'utf8')
  const head = Buffer.alloc(5)
  head[0] = 0x45
  head.writeInt32BE(4 + body.length, 1)
  return Buffer.concat([head, body])
}

/** CommandComplete `tag` followed by ReadyForQuery `status`. */
function completeAndReady(tag: string, status: string): Buffer {
  const body = Buffer.from(`${tag}\0`, 'utf8')
  const out = Buffer.alloc(5 + body.length + 6)
  out[0] = 0x43
  out.writeInt32BE(4 + body.length, 1)
  body.copy(out, 5)
  const z = 5 + body.length
  out[z] = 0x5a
  out.writeInt32BE(5, z + 1)
  out[z + 5] = status.charCodeAt(0)
  return out
}

/** A protocol-3.0 StartupMessage for user and database `postgres`. */
function startupPacket(): Buffer {
  const params = Buffer.from('user\0postgres\0database\0postgres\0\0', 'utf8')
  const out = Buffer.alloc(8 + params.length)
  out.writeInt32BE(out.length, 0)
  out.writeInt32BE(PROTOCOL_3, 4)
  params.copy(out, 8)
  return out
}

export interface SessionServerOptions {
  /** Called with an error PGlite threw; the client concerned is disconnected. */
  onError?: (error: Error) => void
  /** Mode of the socket file (default 0600: the store's owner only). */
  mode?: number
}

/**
 * Serves `pglite` on the Unix socket `path` (see the module doc). `start()` listens,
 * `stop()` disconnects every client (rolling back what they held) and removes the socket.
 */
export class SessionServer {
  private server?: Server
  private readonly connections = new Set<Connection>()
  /** The client holding the session. */
  private holder?: Connection
  /** Clients with pending messages waiting for the session, in arrival order. */
  private waiting: Connection[] = []
  private pumping = false
  /** The transaction status after the last ReadyForQuery. */
  private status = 'I'
  private startupAnswer: Buffer = EMPTY
  private holdTimer?: NodeJS.Timeout

  constructor(
    private readonly pglite: PGlite,
    private readonly path: string,
    private readonly options: SessionServerOptions = {},
  ) {}

  /** Listens on the socket. @throws when the socket cannot be created */
  async start(): Promise<void> {
    const chunks: Buffer[] = []
    await this.exec(new Uint8Array(startupPacket()), (data) => chunks.push(data))
    this.startupAnswer = Buffer.concat(chunks)
    rmSync(this.path, {force: true})
    const server = createServer((socket) => this.accept(socket))
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(this.path, () => {
        server.off('error', reject)
        resolve()
      })
    })
    chmodSync(this.path, this.options.mode ?? 0o600)
    this.server = server
  }

  /** Closes the socket and every connection; waits for the session to be released. */
  async stop(): Promise<void> {
    const server = this.server
    this.server = undefined
    for (const c of this.connections) c.socket.destroy()
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()))
    for (let i = 0; i < 200 && (this.pumping || this.holder); i++) await new Promise((r) => setTimeout(r, 25))
    clearTimeout(this.holdTimer)
    rmSync(this.path, {force: true})
  }

  /** Runs `bytes` (whole frontend messages) on the session; `onData` gets copies of the output. */
  private exec(bytes: Uint8Array, onData: (data: Buffer) => void): Promise<void> {
    return this.pglite.runExclusive(() => this.pglite.execProtocolRawStream(bytes, {onRawData: (d) => onData(Buffer.from(d))}))
  }

  private accept(socket: Socket): void {
    const c = new Connection(socket)
    this.connections.add(c)
    socket.setNoDelay(true)
    socket.on('data', (data) => this.receive(c, data))
    socket.on('error', () => socket.destroy())
    socket.on('close', () => this.drop(c))
  }

  /** Frames `data` into messages; answers startup-phase requests; queues the rest. */
  private receive(c: Connection, data: Buffer): void {
    c.buffer = c.buffer.length > 0 ? Buffer.concat([c.buffer, data]) : data
    let queued = false
    while (!c.closed) {
      if (!c.started) {
        if (c.buffer.length < 8) break
        const length = c.buffer.readInt32BE(0)
        if (c.buffer.length < length) break
        const code = c.buffer.readInt32BE(4)
        c.buffer = c.buffer.subarray(length)
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) c.write(Buffer.from('N'))
        else if (code === CANCEL_REQUEST) c.socket.end()
        else if (code === PROTOCOL_3) {
          c.started = true
          c.write(this.startupAnswer)
        } else {
          c.write(fatal('0A000', `unsupported frontend protocol ${code >> 16}.${code & 0xffff}`))
          c.socket.end()
        }
        continue
      }
      if (c.buffer.length < 5) break
      const length = 1 + c.buffer.readInt32BE(1)
      if (c.buffer.length < length) break
      const bytes = Buffer.from(c.buffer.subarray(0, length))
      c.buffer = c.buffer.subarray(length)
      if (bytes[0] === 0x58) {
        c.socket.end() // Terminate
        break
      }
      c.pending.push(classify(bytes))
      queued = true
    }
    if (!queued) return
    if (c === this.holder) clearTimeout(this.holdTimer)
    else if (!this.waiting.includes(c)) this.waiting.push(c)
    void this.pump()
  }

  private drop(c: Connection): void {
    if (c.closed) return
    c.closed = true
    c.pending = []
    this.connections.delete(c)
    this.waiting = this.waiting.filter((w) => w !== c)
    if (c === this.holder) void this.pump()
  }

  /** Runs the holder's messages, then hands the session to the next waiting client. */
  private async pump(): Promise<void> {
    if (this.pumping) return
    this.pumping = true
    try {
      for (;;) {
        if (!this.holder) {
          const next = this.waiting.shift()
          if (!next) break
          this.holder = next
        }
        const c = this.holder
        if (c.closed) {
          await this.cleanUp()
          this.holder = undefined
          continue
        }
        const message = c.pending.shift()
        if (!message) {
          this.armHoldTimer(c)
          break
        }
        const ready = await this.runOne(c, message)
        if (ready === 'I') {
          this.holder = undefined
          if (c.pending.length > 0) this.waiting.push(c)
        }
      }
    } finally {
      this.pumping = false
    }
  }

  /** Runs (or answers) one message of the holder `c`; @returns the ReadyForQuery status it produced, if any. */
  private async runOne(c: Connection, message: Message): Promise<string | undefined> {
    if (message.kind === 'unlisten') {
      if (message.channel === undefined) c.channels.clear()
      else c.channels.delete(message.channel)
      c.write(completeAndReady('UNLISTEN', this.status))
      return this.status
    }
    const scanner = new BackendScanner()
    try {
      const bytes = new Uint8Array(message.bytes.buffer, message.bytes.byteOffset, message.bytes.length)
      await this.exec(bytes, (data) => {
        scanner.feed(data)
        c.write(data)
      })
    } catch (error) {
      this.options.onError?.(error as Error)
      this.drop(c) // the loop then cleans up after it, as after any departed holder
      c.socket.destroy()
      return undefined
    }
    if (message.listen) c.channels.add(message.listen)
    this.forward(c, scanner.notifications)
    if (scanner.ready) this.status = scanner.ready
    return scanner.ready
  }

  /** Copies NotificationResponse messages to the clients listening on their channel, except `from`, which has them. */
  private forward(from: Connection | undefined, notifications: Buffer[]): void {
    for (const message of notifications) {
      const channel = notificationChannel(message)
      for (const c of this.connections) if (c !== from && c.channels.has(channel)) c.write(message)
    }
  }

  /** Ends what a departed holder left open: an unfinished message group, then its transaction. */
  private async cleanUp(): Promise<void> {
    const run = async (bytes: Buffer) => {
      const scanner = new BackendScanner()
      await this.exec(new Uint8Array(bytes), (data) => scanner.feed(data))
      this.forward(undefined, scanner.notifications)
      if (scanner.ready) this.status = scanner.ready
    }
    try {
      await run(SYNC)
      if (this.status !== 'I') await run(simpleQuery('ROLLBACK'))
    } catch (error) {
      this.options.onError?.(error as Error)
    }
  }

  /** Disconnects holder `c` when it sends nothing for {@link HOLD_IDLE_SECONDS}. */
  private armHoldTimer(c: Connection): void {
    clearTimeout(this.holdTimer)
    this.holdTimer = setTimeout(() => {
      if (this.holder !== c || c.pending.length > 0 || c.closed) return
      c.write(fatal('25P03', `terminating connection: it held the embedded store's session idle for ${HOLD_IDLE_SECONDS} s`))
      c.socket.destroy()
    }, HOLD_IDLE_SECONDS * 1000)
    this.holdTimer.unref()
  }
}

/** A simple Query message for `text`. */
function simpleQuery(text: string): Buffer {
  const body = Buffer.from(`${text}\0`, 'utf8')
  const out = Buffer.alloc(5 + body.length)
  out[0] = 0x51
  out.writeInt32BE(4 + body.length, 1)
  body.copy(out, 5)
  return out
}
