/**
 * Timestamps as mb prints and stores them: UTC, ISO 8601 / RFC 3339.
 */

/** The second {@link isoSeconds} formatted last (Unix seconds), and its text. */
let lastSecond = Number.NaN
let lastSecondText = ''

/**
 * RFC 3339 UTC timestamp with whole seconds, e.g. `2026-11-29T16:00:00Z` (fractional seconds
 * are dropped). `time` is a Date or milliseconds since the Unix epoch.
 */
export function isoSeconds(time: Date | number): string {
  const ms = time instanceof Date ? time.getTime() : time
  const second = Math.floor(ms / 1000)
  // The last second formatted, again: every document and page made within it asks for it.
  if (second === lastSecond) return lastSecondText
  const text = new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')
  lastSecond = second
  lastSecondText = text
  return text
}

/** An ISO 8601 UTC timestamp text (`2026-11-29T16:00:00.123Z`) without its milliseconds, or null for null. */
export function shortIso(value: string | null): string | null {
  return value === null ? null : value.replace(/\.\d{3}Z$/, 'Z')
}

/** {@link isoSeconds} of a Unix time in seconds (the unit of `file.mtime`). */
export function unixIso(seconds: number): string {
  return isoSeconds(seconds * 1000)
}

/** The UTC day `YYYY-MM-DD` of `time` (a Date or milliseconds since the Unix epoch). */
export function isoDay(time: Date | number): string {
  return (time instanceof Date ? time : new Date(time)).toISOString().slice(0, 10)
}

/**
 * RFC 3339 UTC timestamp of a Unix time in seconds, keeping milliseconds when there are any
 * (`2027-01-15T08:00:00.500Z`, but `2027-01-15T09:00:00Z`): for times an admin set to the
 * millisecond, such as a maintenance window's end.
 */
export function unixIsoMillis(seconds: number): string {
  return new Date(seconds * 1000).toISOString().replace('.000Z', 'Z')
}

/**
 * A duration in seconds as an operator reads it at a glance: `45s`, `12m`, `3h12m`, `2d4h`
 * (two units at most, rounded down).
 */
export function shortDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds))
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m`
  if (s < 86_400) return `${Math.floor(s / 3600)}h${s % 3600 >= 60 ? `${Math.floor((s % 3600) / 60)}m` : ''}`
  return `${Math.floor(s / 86_400)}d${s % 86_400 >= 3600 ? `${Math.floor((s % 86_400) / 3600)}h` : ''}`
}
