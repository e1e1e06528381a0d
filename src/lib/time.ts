/**
 * Timestamps as mb prints and stores them: UTC, ISO 8601 / RFC 3339.
 */

/**
 * RFC 3339 UTC timestamp with whole seconds, e.g. `2026-11-29T16:00:00Z` (fractional seconds
 * are dropped). `time` is a Date or milliseconds since the Unix epoch.
 */
export function isoSeconds(time: Date | number): string {
  return (time instanceof Date ? time : new Date(time)).toISOString().replace(/\.\d{3}Z$/, 'Z')
}

/** {@link isoSeconds} of a Unix time in seconds (the unit of `file.mtime`). */
export function unixIso(seconds: number): string {
  return isoSeconds(seconds * 1000)
}

/** The UTC day `YYYY-MM-DD` of `time` (a Date or milliseconds since the Unix epoch). */
export function isoDay(time: Date | number): string {
  return (time instanceof Date ? time : new Date(time)).toISOString().slice(0, 10)
}
