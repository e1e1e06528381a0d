/**
 * What `mb serve` reports about each answered request, to observers (stats counting, the
 * access log, metrics). Observers run synchronously on the hot path: they must only record
 * in memory (never wait on I/O per request).
 */
import type {Realm} from '../../select/types.js'

/** How a request was answered. `download` kinds are `redirect` and `local` on GET. */
export type Outcome =
  | 'redirect' // 302 to a mirror
  | 'rule_redirect' // 301/302/307 to a redirect rule's URL
  | 'local' // the origin delivered the file itself (200/206)
  | 'not_modified' // 304: the client's copy is current (a file the origin delivers, or an indexed version that mirrors serve)
  | 'directory' // an autoindex page or a slash redirect
  | 'meta4' // a Metalink 4 document
  | 'metalink' // a Metalink 3 document
  | 'hash' // a .sha256/.sha1/.md5 body
  | 'mirrorlist' // the mirror list page or JSON
  | 'torrent' // a .torrent metainfo file
  | 'magnet' // a magnet link
  | 'btih' // a BitTorrent info hash
  | 'zsync' // a .zsync control file
  | 'not_found' // 404
  | 'bad_request' // 4xx for bad input
  | 'error' // 5xx
  | 'other' // health, metrics, ...

export interface RequestOutcome {
  /** Request start, ms since the epoch (UTC). */
  time: number
  method: string
  /** The raw request target as received (for the access log). */
  target: string
  /** Decoded origin-relative path, no leading '/', when it resolved to one. */
  path?: string
  httpVersion: string
  status: number
  outcome: Outcome
  /** Chosen mirror for a redirect. */
  mirrorId?: number
  mirrorIdentifier?: string
  realm?: Realm | null
  /** The redirect rule that decided the answer (src/lib/rules), when one matched. */
  rule?: string
  /** Client address after trusted-proxy resolution, and its GeoIP country when known (never a `?country=` override). */
  clientIp: string
  country?: string
  /** Response body bytes sent by the origin itself (0 for redirects). */
  bytesSent: number
  /** Why the origin delivered a file itself (`X-MB-Origin-Reason`; src/lib/stats/origin.ts maps it onto the meter's reasons), for `local` and its `not_modified`. */
  originReason?: string
  /** File size in bytes, when the request was for a known file. */
  fileSize?: number
  /** First byte of a Range request, when there was one. */
  rangeStart?: number
  userAgent?: string
  referer?: string
  /** The retry attempt of a download (1 = the sticky choice; src/lib/serve/delivery/retry.ts), when retries are on. */
  attempt?: number
  /** The mirror (identifier) a retry moved away from: the client had been sent there for this file. */
  retriedFrom?: string
  /** The mirror that redirected this client straight back to mb (a redirect loop). */
  bouncedFrom?: string
  /** Time to produce the response, in seconds. */
  durationSeconds: number
  /** dnf's `countme` bucket (1..4) of a `/metalink` or `/mirrorlist` request, with its repo and arch (src/lib/yum/routes.ts). */
  countme?: {repo: string; arch: string; bucket: number}
}

/** A function told about every answered request. */
export type RequestObserver = (outcome: RequestOutcome) => void
