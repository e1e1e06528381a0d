/**
 * Parsing of FTP directory listings: MLSD (RFC 3659 section 7), Unix `ls -l` style LIST and
 * DOS/IIS style LIST. Line parsing is basic-ftp's (`parseList`); this module adds what it leaves
 * raw: the modification time as UTC Unix seconds with its precision.
 */
import {FileType, parseList, type FileInfo} from 'basic-ftp'

/** One parsed listing line. */
export interface FtpListItem {
  name: string
  type: 'file' | 'dir' | 'symlink' | 'unknown'
  /** Bytes as listed (for a Unix symlink line: the length of the link text, not the target's size). */
  size: number
  /** Link target text from a Unix `name -> target` line or an MLSD `OS.unix=slink:` fact. */
  link?: string
  /** Unix seconds (UTC), when the line carries a time basic-ftp or we can read. */
  mtime?: number
  /** Precision of `mtime` in seconds: 1 (MLSD), 60 (a time of day), 86400 (a date only). */
  mtimePrecision?: number
}

const MONTHS: Record<string, number> = {jan: 0, feb: 1, mar: 2, apr: 3, may: 4, jun: 5, jul: 6, aug: 7, sep: 8, oct: 9, nov: 10, dec: 11}

/**
 * Reads a LIST date as basic-ftp leaves it in `rawModifiedAt`.
 *
 * - Unix: `Nov 29 16:23` (last six months, no year: the year is the one that puts the time in
 *   the past, allowing one day of clock skew; precision 60) or `Jan 02 2026` (precision 86400).
 * - DOS/IIS: `04-27-00 09:09PM`, `11-29-2026 16:23` (MM-DD-YY[YY], 12 or 24 hour; precision 60).
 * - An ISO string (what basic-ftp stores for MLSD): precision 1.
 *
 * LIST carries no time zone: the time is taken as UTC (vsftpd's default `use_localtime=NO`
 * shows UTC; servers in local time are off by their offset, which the reconciler must allow for
 * by comparing sizes first and mtimes within the precision plus a tolerance).
 *
 * @param now the scan's clock, used to pick the year of year-less Unix dates.
 * @returns undefined when the text is not a date we recognise.
 */
export function parseFtpDate(raw: string, now: Date = new Date()): {mtime: number; precision: number} | undefined {
  const text = raw.trim().replace(/\s+/g, ' ')
  let m = /^([A-Za-z]{3}) (\d{1,2}) (\d{1,2}):(\d{2})$/.exec(text)
  if (m) {
    const month = MONTHS[m[1].toLowerCase()]
    if (month === undefined) return undefined
    let year = now.getUTCFullYear()
    let t = Date.UTC(year, month, Number(m[2]), Number(m[3]), Number(m[4]))
    if (t > now.getTime() + 86_400_000) t = Date.UTC(--year, month, Number(m[2]), Number(m[3]), Number(m[4]))
    return {mtime: t / 1000, precision: 60}
  }
  m = /^([A-Za-z]{3}) (\d{1,2}) (\d{4})$/.exec(text)
  if (m) {
    const month = MONTHS[m[1].toLowerCase()]
    if (month === undefined) return undefined
    return {mtime: Date.UTC(Number(m[3]), month, Number(m[2])) / 1000, precision: 86_400}
  }
  m = /^(\d{2})-(\d{2})-(\d{2}|\d{4}) (\d{1,2}):(\d{2})(?::(\d{2}))? ?([AaPp][Mm])?$/.exec(text)
  if (m) {
    let year = Number(m[3])
    // Two-digit years: POSIX strptime's %y pivot (69-99 -> 19xx, 00-68 -> 20xx).
    if (m[3].length === 2) year += year >= 69 ? 1900 : 2000
    let hour = Number(m[4])
    const ampm = m[7]?.toLowerCase()
    if (ampm === 'pm' && hour < 12) hour += 12
    if (ampm === 'am' && hour === 12) hour = 0
    const seconds = m[6] === undefined ? 0 : Number(m[6])
    return {mtime: Date.UTC(year, Number(m[1]) - 1, Number(m[2]), hour, Number(m[5]), seconds) / 1000, precision: m[6] === undefined ? 60 : 1}
  }
  m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?Z?$/.exec(text)
  if (m) {
    const seconds = m[6] === undefined ? 0 : Number(m[6])
    return {mtime: Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), seconds) / 1000, precision: m[6] === undefined ? 60 : 1}
  }
  return undefined
}

/** Converts one basic-ftp FileInfo to an {@link FtpListItem} (see {@link parseFtpDate} for times). */
export function toFtpListItem(info: FileInfo, now: Date = new Date()): FtpListItem {
  const type = info.type === FileType.Directory ? 'dir' : info.type === FileType.File ? 'file' : info.type === FileType.SymbolicLink ? 'symlink' : 'unknown'
  const item: FtpListItem = {name: info.name, type, size: Number.isFinite(info.size) && info.size >= 0 ? info.size : 0}
  if (info.link) item.link = info.link
  if (info.modifiedAt && !Number.isNaN(info.modifiedAt.getTime())) {
    // MLSD "modify" facts are UTC with second (or finer) precision (RFC 3659 section 2.3).
    item.mtime = Math.floor(info.modifiedAt.getTime() / 1000)
    item.mtimePrecision = 1
  } else if (info.rawModifiedAt) {
    const date = parseFtpDate(info.rawModifiedAt, now)
    if (date) {
      item.mtime = date.mtime
      item.mtimePrecision = date.precision
    }
  }
  return item
}

/**
 * Parses a whole LIST or MLSD response body (lines of Unix, DOS/IIS or MLSD format; basic-ftp
 * detects which). Drops `.` and `..`. Throws basic-ftp's error when the format is unknown.
 */
export function parseFtpListing(text: string, now: Date = new Date()): FtpListItem[] {
  return parseList(text)
    .filter((info) => info.name !== '.' && info.name !== '..')
    .map((info) => toFtpListItem(info, now))
}
