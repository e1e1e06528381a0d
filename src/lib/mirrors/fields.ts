/**
 * The fields of a mirror as the CLI gives them ({@link MirrorInput}) and as they are stored
 * ({@link MirrorValues}), each field's flag for messages, and the error that names a bad
 * value ({@link invalidField}).
 */
import type {Updateable} from 'kysely'
import type {MirrorTable} from '../db/schema.js'
import {UsageError} from '../errors.js'
import {redact} from '../redact.js'

/**
 * Raw input for one mirror as the CLI receives it. Every field is optional: `add` applies
 * defaults, `edit` changes only the fields given. An empty string (or a list holding only
 * an empty string) means "clear this value" (null, empty list, or the column default).
 */
export interface MirrorInput {
  identifier?: string
  http_url?: string
  https_url?: string
  rsync_url?: string
  ftp_url?: string
  country?: string
  continent?: string
  latitude?: string | number
  longitude?: string | number
  asn?: string | number
  prefixes?: string[]
  score?: string | number
  other_countries?: string | string[]
  exclude_countries?: string | string[]
  client_prefixes?: string[]
  file_maxsize?: string | number
  country_only?: boolean
  region_only?: boolean
  as_only?: boolean
  prefix_only?: boolean
  fallback?: boolean
  base_path?: string
  include_patterns?: string[]
  exclude_patterns?: string[]
  push_url?: string
  push_include?: string[]
  admin?: string
  admin_email?: string
  comment?: string
  enabled?: boolean
  /** An ISO 8601 time with a UTC offset, or `none` (or '') to end the window. */
  maintenance_until?: string
  /** How the mirror's URLs are signed (`nginx_secure_link_md5`), or `none` (or '') for unsigned URLs. */
  sign_scheme?: string
  /** The signing secret (the CLI reads it from `--sign-secret-file`). */
  sign_secret?: string
  /** Seconds a signed URL stays valid. */
  sign_ttl_seconds?: string | number
}

/**
 * Validated, normalised column values (null = cleared). Only fields that were given appear.
 * The mirror table's own column types (db/schema.ts), for the fields {@link MirrorInput} has.
 */
export type MirrorValues = Partial<Pick<Updateable<MirrorTable>, keyof MirrorInput>>

/** The CLI flag of each field, used in messages. */
export const FIELD_FLAGS: Record<keyof MirrorInput, string> = {
  identifier: 'NAME',
  http_url: '--http-url',
  https_url: '--https-url',
  rsync_url: '--rsync-url',
  ftp_url: '--ftp-url',
  country: '--country',
  continent: '--continent',
  latitude: '--lat',
  longitude: '--lon',
  asn: '--asn',
  prefixes: '--prefix',
  score: '--score',
  other_countries: '--other-countries',
  exclude_countries: '--exclude-countries',
  client_prefixes: '--client-prefix',
  file_maxsize: '--file-maxsize',
  country_only: '--country-only',
  region_only: '--region-only',
  as_only: '--as-only',
  prefix_only: '--prefix-only',
  fallback: '--fallback',
  base_path: '--base-path',
  include_patterns: '--include',
  exclude_patterns: '--exclude',
  push_url: '--push-url',
  push_include: '--push-include',
  admin: '--admin',
  admin_email: '--admin-email',
  comment: '--comment',
  enabled: '--enabled/--disabled',
  maintenance_until: '--maintenance-until',
  sign_scheme: '--sign',
  sign_secret: '--sign-secret-file',
  sign_ttl_seconds: '--sign-ttl',
}

/** Control characters (C0 and DEL), refused in every text field. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is this pattern's job
export const CONTROL = /[\u0000-\u001f\u007f]/

/** The error for a bad value of `field`: its flag, the value (any password redacted) and what is expected. */
export function invalidField(field: keyof MirrorInput, value: unknown, expected: string): UsageError {
  const shown = typeof value === 'string' ? JSON.stringify(redact(value)) : JSON.stringify(value)
  return new UsageError(`Invalid ${FIELD_FLAGS[field]} ${shown}: ${expected}`, 'INVALID_MIRROR_FIELD')
}

/** A character for an error message: `"€" (U+20AC)`, `U+0009 (whitespace)`, `"/" (a slash)`. */
export function describeChar(char: string): string {
  const code = `U+${(char.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`
  if (/\s/.test(char)) return `${code} (whitespace)`
  if (CONTROL.test(char)) return `${code} (a control character)`
  if (char === '/' || char === '\\') return `${JSON.stringify(char)} (a slash)`
  return `${JSON.stringify(char)} (${code})`
}
