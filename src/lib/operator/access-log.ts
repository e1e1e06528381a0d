/**
 * The access log of `mb serve`: one line per answered request in the Apache/NCSA combined
 * format (`%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"`, as httpd's mod_log_config
 * defines it) with two extra quoted fields, the chosen mirror and the realm
 * (`"ftp.example.de" "country"`, `"-"` when none), so awstats, goaccess and friends read it
 * as combined format and ignore the tail (or parse it with a custom format).
 *
 * Writes are buffered and asynchronous: the observer appends the line to an in-memory buffer
 * that is written out every 250 ms or at 64 KiB, never a synchronous write per request.
 * A file target is reopened on SIGHUP (for logrotate's `postrotate kill -HUP`), and by itself
 * when its path no longer names the file it has open (renamed or removed by a rotation): the
 * path is compared with the open file every {@link ROTATION_CHECK_MS}, so a rotation whose
 * reload failed loses no line and does not go on writing into the rotated file.
 */
import {createWriteStream, existsSync, fchmodSync, fstatSync, openSync, statSync, type WriteStream} from 'node:fs'
import type {Writable} from 'node:stream'
import type {RequestObserver, RequestOutcome} from '../serve/delivery/outcome.js'

/** How often the log's path is compared with the file it has open (ms): one stat a second. */
const ROTATION_CHECK_MS = 1000

/** Mode of a new access log file: owner read-write, group read (client addresses are personal data). */
const LOG_FILE_MODE = 0o640

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']

let cachedSecond = -1
let cachedTime = ''

/** `%t`: `[10/Oct/2000:13:55:36 +0000]` (UTC); the text is cached per second. */
export function apacheTime(ms: number): string {
  const second = Math.floor(ms / 1000)
  if (second === cachedSecond) return cachedTime
  const d = new Date(ms)
  const p = (n: number) => (n < 10 ? `0${n}` : String(n))
  cachedTime = `[${p(d.getUTCDate())}/${MONTHS[d.getUTCMonth()]}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000]`
  cachedSecond = second
  return cachedTime
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control bytes are what this escapes
const NEEDS_ESCAPE = /["\\\x00-\x1f\x7f-\uffff]/

/** One byte of a quoted log field: `"` and `\` backslash-escaped, control and non-ASCII bytes as `\xhh`. */
function escapeByte(byte: number): string {
  if (byte === 0x22) return '\\"'
  if (byte === 0x5c) return '\\\\'
  if (byte < 0x20 || byte >= 0x7f) return `\\x${byte.toString(16).padStart(2, '0')}`
  return String.fromCharCode(byte)
}

/**
 * Escapes a text field (stored data such as a mirror name) the way httpd does for quoted log
 * fields: `"` and `\` are backslash-escaped, control and non-ASCII bytes of its UTF-8 form
 * become `\xhh` (a lone surrogate as U+FFFD's bytes), so a line can never be broken or forged.
 */
export function escapeLogField(value: string): string {
  if (!NEEDS_ESCAPE.test(value)) return value
  let out = ''
  for (const byte of Buffer.from(value, 'utf8')) out += escapeByte(byte)
  return out
}

/**
 * Escapes a field that came off the wire (the request line, a header value) like
 * {@link escapeLogField}, byte for byte as the client sent it: node hands those over as
 * latin1, one character per byte, so `\xhh` shows the byte received (UTF-8 `ü` is
 * `\xc3\xbc`, a lone 0xfc byte is `\xfc`). A character beyond U+00FF cannot come from the
 * wire; one is written as its UTF-8 bytes.
 */
export function escapeWireField(value: string): string {
  if (!NEEDS_ESCAPE.test(value)) return value
  let out = ''
  for (const char of value) {
    const code = char.charCodeAt(0)
    if (code <= 0xff) out += escapeByte(code)
    else for (const byte of Buffer.from(char, 'utf8')) out += escapeByte(byte)
  }
  return out
}

/** One combined-format line (without the newline) for a request. */
export function formatAccessLine(o: RequestOutcome): string {
  const host = o.clientIp || '-'
  const request = `${o.method} ${o.target} HTTP/${o.httpVersion}`
  const bytes = o.bytesSent > 0 ? String(o.bytesSent) : '-'
  const referer = o.referer ? escapeWireField(o.referer) : '-'
  const agent = o.userAgent ? escapeWireField(o.userAgent) : '-'
  const mirror = o.mirrorIdentifier ? escapeLogField(o.mirrorIdentifier) : '-'
  const realm = o.realm ?? '-'
  return `${host} - - ${apacheTime(o.time)} "${escapeWireField(request)}" ${o.status} ${bytes} "${referer}" "${agent}" "${mirror}" "${realm}"`
}

export interface AccessLogOptions {
  /** Flush the buffer at least this often, in ms (default 250). */
  flushMs?: number
  /** Flush as soon as this many bytes are buffered (default 64 KiB). */
  highWaterBytes?: number
  /** Drop lines beyond this many buffered bytes while the target is blocked (default 16 MiB). */
  maxBufferBytes?: number
  /** Reopen the file on SIGHUP (default true for files). */
  reopenOnSighup?: boolean
  /** Told about write/open errors (the log keeps going). */
  onError?: (error: Error) => void
}

/** A running access log. */
export interface AccessLog {
  /** The observer to register with `mb serve`. */
  observer: RequestObserver
  /** Reopens the file (what SIGHUP does); no-op for stdout. */
  reopen(): void
  /** Writes what is buffered now. */
  flush(): Promise<void>
  /** Lines dropped because the target could not keep up. */
  readonly dropped: number
  /** Flushes and closes the file (stdout stays open). */
  close(): Promise<void>
}

/**
 * Opens an access log at `target`: a file path (appended to; created {@link LOG_FILE_MODE}
 * whatever the umask, an existing file keeps its mode) or `-` for
 * stdout. See the module doc for the format and buffering.
 */
export function openAccessLog(target: string, options: AccessLogOptions = {}): AccessLog {
  return new BufferedAccessLog(target, options)
}

/** The access log of {@link openAccessLog}: lines buffered in memory, written out on a timer or at the high-water mark. */
class BufferedAccessLog implements AccessLog {
  private readonly isStdout: boolean
  private readonly highWater: number
  private readonly maxBuffer: number
  private readonly onError: (error: Error) => void
  private readonly timer: NodeJS.Timeout
  private readonly onHup = () => this.reopen()
  private stream: Writable
  private lines: string[] = []
  private buffered = 0
  private droppedLines = 0
  private blocked = false
  private closed = false
  /** Device and inode of the open file (undefined for stdout, or when the open failed), and when the path was last compared with them. */
  private opened: {dev: number; ino: number} | undefined
  private checkedAt = 0

  constructor(
    private readonly target: string,
    options: AccessLogOptions,
  ) {
    this.isStdout = target === '-'
    this.highWater = options.highWaterBytes ?? 65_536
    this.maxBuffer = options.maxBufferBytes ?? 16 * 1024 * 1024
    this.onError = options.onError ?? (() => {})
    this.stream = this.open()
    this.timer = setInterval(() => this.tick(), options.flushMs ?? 250)
    this.timer.unref()
    if (!this.isStdout && options.reopenOnSighup !== false) process.on('SIGHUP', this.onHup)
  }

  readonly observer: RequestObserver = (o) => {
    if (this.closed) return
    const line = formatAccessLine(o) + '\n'
    if (this.buffered + line.length > this.maxBuffer) {
      this.droppedLines += 1
      return
    }
    this.lines.push(line)
    this.buffered += line.length
    if (this.buffered >= this.highWater) this.writeOut()
  }

  get dropped(): number {
    return this.droppedLines
  }

  reopen(): void {
    if (this.isStdout || this.closed) return
    this.writeOut()
    const old = this.stream
    this.stream = this.open()
    this.blocked = false
    void endStream(old)
  }

  async flush(): Promise<void> {
    const chunk = this.takeLines()
    await new Promise<void>((resolve) => this.stream.write(chunk, () => resolve()))
  }

  async close(): Promise<void> {
    if (this.closed) return
    this.blocked = false
    this.writeOut()
    this.closed = true
    clearInterval(this.timer)
    process.off('SIGHUP', this.onHup)
    await endStream(this.stream)
  }

  private open(): Writable {
    if (this.isStdout) return process.stdout
    const fd = openLogFile(this.target)
    this.opened = undefined
    if (fd !== undefined) {
      try {
        const st = fstatSync(fd)
        this.opened = {dev: st.dev, ino: st.ino}
      } catch {
        // Not comparable: the file is reopened on SIGHUP only.
      }
    }
    const s: WriteStream = createWriteStream(this.target, {flags: 'a', mode: LOG_FILE_MODE, fd})
    s.on('error', this.onError)
    return s
  }

  /** The timer: writes the buffer out, and reopens the file once its path names another file or none. */
  private tick(): void {
    const now = Date.now()
    if (this.opened !== undefined && now - this.checkedAt >= ROTATION_CHECK_MS) {
      this.checkedAt = now
      let st: {dev: number; ino: number} | undefined
      try {
        st = statSync(this.target, {throwIfNoEntry: false})
      } catch {
        st = this.opened // unreadable path (a directory's mode changed): keep the file open
      }
      if (st === undefined || st.ino !== this.opened.ino || st.dev !== this.opened.dev) {
        this.reopen()
        return
      }
    }
    this.writeOut()
  }

  /** Empties the buffer into one chunk. */
  private takeLines(): string {
    const chunk = this.lines.join('')
    this.lines = []
    this.buffered = 0
    return chunk
  }

  /** Writes the buffer out, unless the stream is blocked (then it waits for 'drain'). */
  private writeOut(): void {
    if (this.lines.length === 0 || this.blocked) return
    const ok = this.stream.write(this.takeLines())
    if (!ok) {
      this.blocked = true
      const current = this.stream
      current.once('drain', () => {
        if (current === this.stream) this.blocked = false
      })
    }
  }
}

/**
 * Opens the log file at `path` for appending, creating it with exactly {@link LOG_FILE_MODE}
 * (the umask may take bits off the mode open(2) is given, so it is set again). Synchronous:
 * it runs at start and on SIGHUP only. Undefined when the file cannot be opened; the write
 * stream then opens it by path and reports the error.
 */
function openLogFile(path: string): number | undefined {
  let fd: number
  try {
    const created = !existsSync(path)
    fd = openSync(path, 'a', LOG_FILE_MODE)
    if (!created) return fd
  } catch {
    return undefined
  }
  try {
    fchmodSync(fd, LOG_FILE_MODE)
  } catch {
    // A file system without modes (a FUSE mount, say): the file is still usable.
  }
  return fd
}

/** Ends a file stream (stdout stays open); resolves when it is flushed and closed. */
function endStream(s: Writable): Promise<void> {
  return new Promise((resolve) => {
    if (s === process.stdout) return resolve()
    s.end(() => resolve())
  })
}
