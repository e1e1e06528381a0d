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
}

export interface ListOptions {
  /** List only this subtree (relative path, no leading '/'). */
  subdir?: string
  /** Abort the listing (time budget, Ctrl-C). */
  signal?: AbortSignal
  /** Connect timeout, seconds. */
  connectTimeoutSeconds?: number
  /** I/O (idle) timeout, seconds. */
  ioTimeoutSeconds?: number
}

/** A protocol lister. Errors are thrown as MbError with a reason an operator can act on. */
export interface Lister {
  protocol: 'rsync' | 'ftp' | 'http'
  list(baseUrl: string, options: ListOptions): AsyncIterable<ListingEntry>
}
