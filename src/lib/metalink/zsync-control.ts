/**
 * zsync control files (`PATH.zsync`, `application/x-zsync`), in the layout zsyncmake 0.6.2
 * writes (`c/make.c`), for an uncompressed file (no `Z-Map2`, like `zsyncmake -Z`):
 *
 * ```
 * zsync: 0.6.2
 * Filename: NAME
 * MTime: Wed, 02 Dec 2026 02:00:00 +0000
 * Blocksize: 2048
 * Length: BYTES
 * Hash-Lengths: 2,RSUM_BYTES,CHECKSUM_BYTES
 * URL: https://mirror.example.org/pub/NAME      (one line per URL, best first)
 * SHA-1: HEX
 *
 * <block sums: per block the trailing rsum bytes, then the leading MD4 bytes>
 * ```
 *
 * The block sums are the same for every client and come from the store (`mb index --hashes`,
 * origin/zsync.ts); only the header with the client's URLs is written per request.
 */

export const ZSYNC_MEDIA_TYPE = 'application/x-zsync'

/** The zsync format version written. */
const ZSYNC_VERSION = '0.6.2'

/** One file version's zsync data. */
export interface ZsyncControl {
  /** The file's name (basename), without CR or LF. */
  name: string
  /** Bytes. */
  size: number
  /** Unix seconds (UTC). */
  mtime: number
  /** SHA-1 of the whole file, hex. */
  sha1: string
  blockSize: number
  /** `seq_matches,rsum_bytes,checksum_bytes`. */
  hashLengths: string
  /** The block sums, as zsyncmake writes them after the header. */
  sums: Uint8Array
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat']
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']

/** `strftime("%a, %d %b %Y %H:%M:%S %z")` of Unix seconds in UTC, as zsyncmake writes `MTime`. */
export function zsyncMtime(seconds: number): string {
  const d = new Date(seconds * 1000)
  const two = (n: number) => String(n).padStart(2, '0')
  return `${DAYS[d.getUTCDay()]}, ${two(d.getUTCDate())} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()} ${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())} +0000`
}

/** True when `name` can be a `Filename:` header value (no CR, LF or NUL). */
export function zsyncNameOk(name: string): boolean {
  return !/[\r\n\0]/.test(name)
}

/**
 * The control file for `control` with a `URL:` line per entry of `urls` (absolute,
 * percent-encoded URLs, best first).
 */
export function renderZsync(control: ZsyncControl, urls: readonly string[]): Buffer {
  return Buffer.concat(zsyncParts(control, urls))
}

/** {@link renderZsync} as its two parts, the header and the block sums (not copied), for writing without a copy. */
export function zsyncParts(control: ZsyncControl, urls: readonly string[]): [Buffer, Uint8Array] {
  let header = `zsync: ${ZSYNC_VERSION}\nFilename: ${control.name}\nMTime: ${zsyncMtime(control.mtime)}\nBlocksize: ${control.blockSize}\nLength: ${control.size}\nHash-Lengths: ${control.hashLengths}\n`
  for (const url of urls) header += `URL: ${url}\n`
  header += `SHA-1: ${control.sha1}\n\n`
  return [Buffer.from(header, 'utf8'), control.sums]
}
