/**
 * What the download statistics count, per answered request of `mb serve`:
 * - a download is a GET answered by a redirect or by local delivery, unless it is a Range
 *   continuation (a Range whose first byte is not 0);
 * - `other_requests` are HEADs, metalinks (meta4/metalink), hashes, mirror lists, 304s and
 *   Range continuations; 404s, bad requests, errors, directories and `other` are not stored
 *   (the metrics count them), so junk paths cannot grow the table;
 * - `bytes`: for local delivery the body bytes the origin sent (continuations included), for
 *   a counted redirect the file size (what the mirror is expected to deliver).
 * Counts are kept per UTC day x path x mirror (0 = the origin) x client country ('--' when
 * unknown). The country is GeoIP's for the client's address, never a `?country=` testing
 * override: a forced request is a download by that client, from where it really is, so the
 * per-country counts stay true and a tester cannot write downloads into another country.
 */

/** The fields of an answered request the statistics read (serve's `RequestOutcome` fits). */
export interface CountedRequest {
  /** Request start, ms since the epoch (UTC). */
  time: number
  method: string
  /** Decoded origin-relative path, when the request resolved to one. */
  path?: string
  /** How it was answered (`redirect`, `local`, `meta4`, …). */
  outcome: string
  /** The mirror a redirect chose. */
  mirrorId?: number
  /** GeoIP's country of the client address (ISO 3166-1 alpha-2), never a `?country=` override. */
  country?: string
  /** Body bytes the origin sent. */
  bytesSent: number
  fileSize?: number
  /** First byte of a Range request. */
  rangeStart?: number
  /** dnf's `countme` bucket (1..4) of a repository metadata request, with its configured repo and arch. */
  countme?: {repo: string; arch: string; bucket: number}
  /** Why the origin delivered the file itself (`X-MB-Origin-Reason`), when it did (./origin.ts). */
  originReason?: string
}

/** Counts for one (day, path, mirror, country) key. */
export interface StatsCounts {
  downloads: number
  bytes: number
  otherRequests: number
}

/** How a request counts. */
export type CountKind = 'download' | 'other'

/**
 * Classifies a request for the statistics: 'download', 'other', or undefined when it is not
 * recorded (404s, errors, directories, requests without a file path).
 */
export function classifyRequest(o: CountedRequest): CountKind | undefined {
  if (!o.path) return undefined
  switch (o.outcome) {
    case 'redirect':
    case 'local': {
      if (o.method !== 'GET') return o.method === 'HEAD' ? 'other' : undefined
      if (o.rangeStart !== undefined && o.rangeStart !== 0) return 'other'
      return 'download'
    }
    case 'not_modified':
    case 'meta4':
    case 'metalink':
    case 'hash':
    case 'mirrorlist':
    case 'torrent':
    case 'magnet':
    case 'btih':
    case 'zsync':
      return 'other'
    default:
      return undefined
  }
}

/** Adds request `o`, classified as `kind`, to `counts` (the bytes rule of the module doc). */
export function countRequest(counts: StatsCounts, o: CountedRequest, kind: CountKind): void {
  if (kind === 'download') {
    counts.downloads += 1
    counts.bytes += o.outcome === 'local' ? o.bytesSent : (o.fileSize ?? 0)
  } else {
    counts.otherRequests += 1
    if (o.outcome === 'local' && o.method === 'GET') counts.bytes += o.bytesSent
  }
}

/** The mirror a request counts for: the one a redirect chose, 0 for the origin. */
export function countedMirror(o: CountedRequest): number {
  return o.outcome === 'redirect' && o.mirrorId ? o.mirrorId : 0
}

/** Normalises a country code to two upper-case letters, or '--' when unknown. */
export function countedCountry(country: string | undefined): string {
  if (!country) return '--'
  if (isUpperPair(country)) return country // what GeoIP gives: no copy, no regex
  const upper = country.toUpperCase()
  return isUpperPair(upper) ? upper : '--'
}

function isUpperPair(text: string): boolean {
  if (text.length !== 2) return false
  const a = text.charCodeAt(0)
  const b = text.charCodeAt(1)
  return a >= 65 && a <= 90 && b >= 65 && b <= 90
}

/** Adds `source`'s counts to `target`. */
export function addCounts(target: StatsCounts, source: StatsCounts): void {
  target.downloads += source.downloads
  target.bytes += source.bytes
  target.otherRequests += source.otherRequests
}
