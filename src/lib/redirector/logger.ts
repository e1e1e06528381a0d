/** The JSON event and request log of `mb serve` (pino on stdout). */
import {pino, type Logger} from 'pino'

/** Creates the JSON request/event logger (pino) writing asynchronously to stdout. */
export function createLogger(level: string): Logger {
  return pino({level, base: {pid: process.pid}, timestamp: isoTimeCached, formatters: {level: (label) => ({level: label})}}, pino.destination({dest: 1, sync: false}))
}

let lastTimeMs = -1
let lastTimeText = ''

/** pino's `isoTime` (`,"time":"2026-01-02T03:04:05.678Z"`, UTC), formatted once per millisecond. */
function isoTimeCached(): string {
  const now = Date.now()
  if (now !== lastTimeMs) {
    lastTimeMs = now
    lastTimeText = `,"time":"${new Date(now).toISOString()}"`
  }
  return lastTimeText
}
