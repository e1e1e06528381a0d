/**
 * The scanners' contract: every lister (rsync, FTP, HTTP) yields the same entry stream, and one
 * reconciler consumes it.
 */

/** One listed entry. Paths are relative to the mirror's base URL, '/'-separated, no leading '/'. */
export interface ListingEntry {
  path: string
  type: 'file' | 'dir' | 'symlink'
  /** Bytes. */
  size: number
  /** Unix seconds (UTC), when the listing shows a time. */
  mtime?: number
  /** Precision of `mtime` in seconds (1 for rsync, 60 for most HTTP/FTP listings, 86400 for a date only). */
  mtimePrecision?: number
  /**
   * True when `size` is only an estimate: the index showed a rounded figure (Apache "1.2K",
   * lighttpd "3.4M") or no size at all (then size is 0 and the range is 0..MAX_SAFE_INTEGER).
   * The exact size lies in [sizeMin, sizeMax]. The reconciler should count the mirror's copy
   * as matching when the origin's size lies in that range (and the mtime agrees within its
   * precision), and never call it a size mismatch by `size` alone. Absent for exact sizes.
   */
  sizeApproximate?: boolean
  /** Smallest exact size in bytes consistent with the listing (set with sizeApproximate). */
  sizeMin?: number
  /** Largest exact size in bytes consistent with the listing (set with sizeApproximate). */
  sizeMax?: number
}

export interface ListOptions {
  /** List only this subtree (relative path, no leading '/'). */
  subdir?: string
  /** False: only the entries directly in the listed directory, no subdirectory entered (default true). */
  recursive?: boolean
  /** Abort the listing (time budget, Ctrl-C). */
  signal?: AbortSignal
  /** Connect timeout, seconds. */
  connectTimeoutSeconds?: number
  /** I/O (idle) timeout, seconds. */
  ioTimeoutSeconds?: number
  /** Largest directory index page read, bytes (HTTP only; default 64 MiB). */
  maxIndexBytes?: number
  /** HTTP only: signs each URL requested, for a mirror behind signed URLs (../sign.ts). */
  sign?: (url: string) => string
}

/** A protocol lister. Errors are thrown as MbError with a reason an operator can act on. */
export interface Lister {
  protocol: 'rsync' | 'ftp' | 'http'
  list(baseUrl: string, options: ListOptions): AsyncIterable<ListingEntry>
}
