/**
 * A mirror as `mb mirror show/list --json` prints it ({@link PublicMirror}): the registry row
 * with its timestamps as text and its passwords redacted.
 */
import type {MirrorRow} from '../db/schema.js'
import {textArray} from '../db/sql.js'
import {redact} from '../redact.js'
import {syncLagSeconds} from '../sync/trace.js'

/**
 * A mirror as printed by `mb mirror show/list --json`: snake_case keys in a fixed order,
 * timestamps as ISO 8601 UTC strings, sizes in bytes, and rsync/ftp URLs with any password
 * replaced by `***`. New keys may be added; existing keys keep their names and meaning. The
 * keys are the registry row's columns (db/schema.ts), so a new column fails to compile until
 * {@link publicMirror} prints it or it is named internal; the keys come in the order
 * {@link publicMirror} writes them.
 */
export type PublicMirror = Omit<MirrorRow, TimestampColumn | InternalColumn> & {[K in TimestampColumn]: string | null} & {
  /** The URL redirects start from: `https_url`, else `http_url`. */
  base_url: string | null
  /** Seconds the mirror is behind the origin by their sync traces (src/lib/sync/trace.ts `syncLagSeconds`); null = no trace read. */
  sync_lag_seconds: number | null
}

/** The columns printed as ISO 8601 UTC text (`maintenance_until`: the end of the window; `scan_refused_at`, `url_changed_at`: out of selection since). */
type TimestampColumn =
  | 'status_changed_at'
  | 'maintenance_until'
  | 'scan_refused_at'
  | 'url_changed_at'
  | 'bad_copies_suspect_at'
  | 'synced_at'
  | 'last_scan_at'
  | 'last_scan_ok_at'
  | 'last_push_at'
  | 'last_push_ok_at'
  | 'created_at'
  | 'updated_at'

/** Columns left out: the per-scheme probe summaries (`status` holds the checks), the change-tracking stamp, the trace's validator and the signing secret. */
type InternalColumn = 'http_up' | 'https_up' | 'txid' | 'sync_validator' | 'sign_secret'

function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null
  const date = value instanceof Date ? value : new Date(value)
  return Number.isNaN(date.getTime()) ? String(value) : date.toISOString()
}

/** `value` with any password replaced by `***` (null stays null). */
export function redacted(value: string | null): string | null {
  return value === null ? null : redact(value)
}

/**
 * The public, password-free shape of a mirror row (see {@link PublicMirror}).
 * @param originTrace  the origin's own trace time, the reference of `sync_lag_seconds` (null: now)
 */
export function publicMirror(row: MirrorRow, originTrace: Date | null = null): PublicMirror {
  return {
    id: row.id,
    identifier: row.identifier,
    enabled: row.enabled,
    base_url: row.https_url ?? row.http_url,
    http_url: row.http_url,
    https_url: row.https_url,
    rsync_url: redacted(row.rsync_url),
    ftp_url: redacted(row.ftp_url),
    country: row.country,
    continent: row.continent,
    latitude: row.latitude,
    longitude: row.longitude,
    asn: row.asn === null ? null : Number(row.asn),
    prefixes: textArray(row.prefixes),
    score: row.score,
    country_only: row.country_only,
    region_only: row.region_only,
    as_only: row.as_only,
    prefix_only: row.prefix_only,
    fallback: row.fallback,
    other_countries: row.other_countries,
    exclude_countries: row.exclude_countries,
    client_prefixes: textArray(row.client_prefixes),
    file_maxsize: row.file_maxsize === null ? null : Number(row.file_maxsize),
    base_path: row.base_path,
    sign_scheme: row.sign_scheme ?? null,
    sign_ttl_seconds: Number(row.sign_ttl_seconds ?? 21600),
    include_patterns: row.include_patterns,
    exclude_patterns: row.exclude_patterns,
    push_url: redacted(row.push_url),
    push_include: row.push_include ?? [],
    admin: row.admin,
    admin_email: row.admin_email,
    comment: row.comment,
    up: row.up,
    ipv6: row.ipv6,
    range_ok: row.range_ok ?? null,
    status: row.status ?? {},
    status_reason: redacted(row.status_reason),
    status_changed_at: iso(row.status_changed_at),
    needs_rescan: row.needs_rescan,
    maintenance_until: iso(row.maintenance_until),
    scan_refused_at: iso(row.scan_refused_at),
    bad_copies_suspect_at: iso(row.bad_copies_suspect_at ?? null),
    url_changed_at: iso(row.url_changed_at),
    synced_at: iso(row.synced_at),
    sync_lag_seconds: syncLagSeconds(row.synced_at ? new Date(row.synced_at) : null, originTrace),
    sync_error: row.sync_error ?? null,
    last_scan_at: iso(row.last_scan_at),
    last_scan_ok_at: iso(row.last_scan_ok_at),
    last_scan_error: redacted(row.last_scan_error),
    last_scan_protocol: row.last_scan_protocol,
    last_scan_files: row.last_scan_files,
    last_scan_matched: row.last_scan_matched,
    last_scan_seconds: row.last_scan_seconds,
    last_push_at: iso(row.last_push_at),
    last_push_ok_at: iso(row.last_push_ok_at),
    last_push_error: redacted(row.last_push_error),
    created_at: iso(row.created_at),
    updated_at: iso(row.updated_at),
  }
}
