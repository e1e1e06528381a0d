/**
 * Sync trace files: a small file in the origin tree holding the time the origin was last
 * brought up to date. Mirrors copy it with everything else, so the copy on a mirror tells
 * when that mirror last completed a sync.
 *
 * Formats read (the first that applies):
 * - Unix seconds on the first line: Mirrorbits' `TraceFileLocation`, Arch's `lastsync`, and
 *   what mb writes;
 * - Debian's ftpsync trace (`project/trace/HOST`): a `Date:` line in RFC 5322 form
 *   (`Date: Sat, 05 Dec 2026 21:01:35 +0000`), or else a first line as `date -u` prints it.
 *
 * Sources: Mirrorbits (`TraceFileLocation`), Debian's ftpsync (`ftpsync` writes
 * `project/trace/$(hostname -f)`), Arch's mirror status (`lastsync`).
 */
import {randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {mkdir, readFile, rename, rm, writeFile} from 'node:fs/promises'
import {dirname, join} from 'node:path'
import type {SyncConfig} from './config.js'

/** A trace file larger than this is not a trace (bytes). Debian's traces are about 1 KiB. */
export const TRACE_MAX_BYTES = 64 * 1024

/** Clock skew tolerated before a trace time counts as in the future (seconds). */
const TRACE_FUTURE_SLACK_SECONDS = 300

/** The origin rewrites its trace at most this often (seconds). */
const TRACE_WRITE_INTERVAL_SECONDS = 60

/** Traces before this (2000-01-01T00:00:00Z, Unix seconds) are not times mb believes. */
const EARLIEST = 946_684_800

/** Why a trace could not be read as a time: a message for the operator. */
export class TraceError extends Error {}

/**
 * The time a trace file holds.
 *
 * @param text  the file's content (at most {@link TRACE_MAX_BYTES} bytes; more is an error)
 * @param now   the reader's clock, to refuse future times
 * @returns the trace time (UTC)
 * @throws TraceError when the text is too large, holds no time in a known format, holds a
 *   time before 2000, or one more than {@link TRACE_FUTURE_SLACK_SECONDS} in the future
 */
export function parseTrace(text: string, now: Date = new Date()): Date {
  if (Buffer.byteLength(text) > TRACE_MAX_BYTES) throw new TraceError(`the trace file has more than ${TRACE_MAX_BYTES} bytes: not a trace`)
  const lines = text.split(/\r?\n/).map((l) => l.trim())
  const first = lines.find((l) => l !== '') ?? ''
  let seconds: number | undefined
  if (/^\d{1,12}$/.test(first)) seconds = Number(first)
  else {
    const dateLine = lines.find((l) => /^Date:\s/i.test(l))
    const candidate = dateLine ? dateLine.replace(/^Date:\s*/i, '') : first
    const ms = /\d{4}/.test(candidate) ? Date.parse(candidate) : Number.NaN
    if (!Number.isNaN(ms)) seconds = Math.floor(ms / 1000)
  }
  if (seconds === undefined) throw new TraceError(`the trace holds no time in a known format (Unix seconds, or Debian's "Date:" line): ${JSON.stringify(first.slice(0, 60))}`)
  if (seconds < EARLIEST) throw new TraceError(`the trace's time ${seconds} is before 2000: not a sync time`)
  const ahead = seconds - Math.floor(now.getTime() / 1000)
  if (ahead > TRACE_FUTURE_SLACK_SECONDS) throw new TraceError(`the trace's time ${new Date(seconds * 1000).toISOString()} is ${ahead} s in the future`)
  return new Date(seconds * 1000)
}

/**
 * The origin's own trace time, or null when the file is missing or unreadable as a trace,
 * or when `root` or `tracePath` is not set.
 * @param root       the origin directory
 * @param tracePath  `sync.trace_path`, relative to the root
 */
export async function readOriginTrace(root: string | undefined, tracePath: string | undefined, now: Date = new Date()): Promise<Date | null> {
  if (root === undefined || tracePath === undefined) return null
  try {
    return parseTrace(await readFile(join(root, tracePath), 'utf8'), now)
  } catch {
    return null
  }
}

/**
 * Writes the current time (Unix seconds and a newline) to the origin's trace file, unless the
 * file already holds a time less than {@link TRACE_WRITE_INTERVAL_SECONDS} old. The file is
 * written whole under another name and renamed, so a mirror syncing at that moment copies
 * either the old or the new trace, never half of one.
 *
 * @returns the time written (whole seconds), or null when the file was recent enough
 * @throws the file system's error when the directory cannot be created or written
 */
export async function writeOriginTrace(root: string, tracePath: string, now: Date = new Date()): Promise<Date | null> {
  const previous = await readOriginTrace(root, tracePath, now)
  if (previous && now.getTime() - previous.getTime() < TRACE_WRITE_INTERVAL_SECONDS * 1000 && previous <= now) return null
  const written = new Date(Math.floor(now.getTime() / 1000) * 1000)
  const target = join(root, tracePath)
  await mkdir(dirname(target), {recursive: true})
  const temporary = join(dirname(target), `.${randomBytes(6).toString('hex')}.mb-trace`)
  try {
    await writeFile(temporary, `${written.getTime() / 1000}\n`, {mode: 0o644})
    await rename(temporary, target)
  } catch (error) {
    await rm(temporary, {force: true})
    throw error
  }
  return written
}

/**
 * How far a mirror is behind the origin by their traces (seconds, at least 0): the origin's
 * trace time minus the mirror's, or, when the origin's trace is unknown, `now` minus the
 * mirror's. Null when the mirror's trace is unknown.
 */
export function syncLagSeconds(mirrorTrace: Date | null, originTrace: Date | null, now: Date = new Date()): number | null {
  if (mirrorTrace === null) return null
  const reference = originTrace ?? now
  return Math.max(0, Math.round((reference.getTime() - mirrorTrace.getTime()) / 1000))
}

/**
 * Writes the origin's trace now and then every {@link TRACE_WRITE_INTERVAL_SECONDS} (the
 * timer does not keep the process alive): `mb serve --watch`. Failures go to `onError`.
 * @returns a function that stops the timer
 */
export function startTraceWriter(root: string, tracePath: string, onError: (error: Error) => void): () => void {
  const write = () => void writeOriginTrace(root, tracePath).catch((error: Error) => onError(error))
  write()
  const timer = setInterval(write, TRACE_WRITE_INTERVAL_SECONDS * 1000)
  timer.unref()
  return () => clearInterval(timer)
}

/** Whether `path` (relative to the root) is the trace file or one of its partial writes, which a watch of the origin ignores. */
export function isTraceFile(path: string, tracePath: string): boolean {
  if (path === tracePath) return true
  const slash = tracePath.lastIndexOf('/')
  const dir = slash < 0 ? '' : tracePath.slice(0, slash + 1)
  return path.startsWith(dir) && !path.slice(dir.length).includes('/') && path.endsWith('.mb-trace')
}

/**
 * The origin's trace time as a clock for selection (Unix seconds, or null when unreadable):
 * read once now, then again in the background when the value is older than
 * {@link TRACE_WRITE_INTERVAL_SECONDS}, so that a call costs no I/O.
 */
function originTraceClock(root: string, tracePath: string): () => number | null {
  const read = (): number | null => {
    try {
      return parseTrace(readFileSync(join(root, tracePath), 'utf8')).getTime() / 1000
    } catch {
      return null
    }
  }
  let value = read()
  let readAt = Date.now()
  let reading = false
  return () => {
    if (!reading && Date.now() - readAt > TRACE_WRITE_INTERVAL_SECONDS * 1000) {
      reading = true
      readAt = Date.now()
      void readOriginTrace(root, tracePath)
        .then((t) => {
          value = t === null ? null : t.getTime() / 1000
        })
        .finally(() => {
          reading = false
        })
    }
    return value
  }
}

/**
 * What selection needs of the `sync:` section (the second argument of
 * `compileSelectOptions`): the lag limit, and the origin's trace clock when a limit is set.
 */
export function syncSelectOptions(root: string | undefined, sync: SyncConfig): {maxLagSeconds?: number; originTrace?: () => number | null} {
  if (sync.max_lag_seconds === undefined) return {}
  return {maxLagSeconds: sync.max_lag_seconds, ...(root && sync.trace_path ? {originTrace: originTraceClock(root, sync.trace_path)} : {})}
}

/**
 * What the operator's views need of the `sync:` section: the origin's trace clock and the
 * warning threshold, when traces are on (`sync.trace_path` and a root); empty otherwise.
 */
export function syncViewOptions(root: string | undefined, sync: SyncConfig): {originTrace?: () => number | null; lagWarningSeconds?: number} {
  if (!sync.trace_path) return {}
  return {lagWarningSeconds: sync.lag_warning_seconds, ...(root ? {originTrace: originTraceClock(root, sync.trace_path)} : {})}
}
