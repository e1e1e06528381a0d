/**
 * Table types for kysely. The migrations in `migrations/` are the truth; keep these in step.
 * Units: sizes in bytes, mtimes in Unix seconds (UTC), timestamps as `Date` (UTC).
 */
import type {ColumnType, Generated} from 'kysely'

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>

export interface MirrorTable {
  id: Generated<number>
  identifier: string
  http_url: string | null
  https_url: string | null
  rsync_url: string | null
  ftp_url: string | null
  country: string | null
  continent: string | null
  latitude: number | null
  longitude: number | null
  asn: number | null
  /** Network prefixes (CIDR text) served best by this mirror. */
  prefixes: ColumnType<string[], string[] | undefined, string[]>
  score: ColumnType<number, number | undefined, number>
  enabled: ColumnType<boolean, boolean | undefined, boolean>
  country_only: ColumnType<boolean, boolean | undefined, boolean>
  region_only: ColumnType<boolean, boolean | undefined, boolean>
  as_only: ColumnType<boolean, boolean | undefined, boolean>
  prefix_only: ColumnType<boolean, boolean | undefined, boolean>
  fallback: ColumnType<boolean, boolean | undefined, boolean>
  other_countries: ColumnType<string[], string[] | undefined, string[]>
  exclude_countries: ColumnType<string[], string[] | undefined, string[]>
  /** When non-empty, only clients inside these CIDRs may be sent to this mirror. */
  client_prefixes: ColumnType<string[], string[] | undefined, string[]>
  file_maxsize: number | null
  /** Origin subtree this mirror carries at its base URL ('' = the whole tree). */
  base_path: ColumnType<string, string | undefined, string>
  /** How URLs on this mirror are signed (src/lib/sign.ts); null = not signed (migration 0034). */
  sign_scheme: ColumnType<string | null, string | null | undefined, string | null>
  /** The signing secret; never shown by `mb mirror list|show` or the public views. */
  sign_secret: ColumnType<string | null, string | null | undefined, string | null>
  /** Seconds a signed URL stays valid. */
  sign_ttl_seconds: ColumnType<number, number | undefined, number>
  include_patterns: ColumnType<string[], string[] | undefined, string[]>
  exclude_patterns: ColumnType<string[], string[] | undefined, string[]>
  admin: string | null
  admin_email: string | null
  comment: string | null
  up: ColumnType<boolean, boolean | undefined, boolean>
  /** null = unknown (not probed), true/false once probing has recorded it. */
  ipv6: boolean | null
  /** Probe summary of the HTTP checks (as `up` is of all); null = HTTP not probed (migration 0010). */
  http_up: ColumnType<boolean | null, boolean | null | undefined, boolean | null>
  /** Probe summary of the HTTPS checks; null = HTTPS not probed. Both null: never probed. */
  https_up: ColumnType<boolean | null, boolean | null | undefined, boolean | null>
  status: ColumnType<Record<string, unknown>, string | undefined, string>
  status_reason: string | null
  status_changed_at: Timestamp | null
  needs_rescan: ColumnType<boolean, boolean | undefined, boolean>
  last_scan_at: Timestamp | null
  last_scan_ok_at: Timestamp | null
  last_scan_error: string | null
  last_scan_protocol: string | null
  last_scan_files: number | null
  last_scan_matched: number | null
  last_scan_seconds: number | null
  /** The mirror is in maintenance (excluded from selection) until this time; null = not. */
  maintenance_until: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** When the last scan was refused by the safety check (the mirror is suspect, out of selection); null = not suspect (migration 0012). */
  scan_refused_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** The mirror honours `Range` (a probe's `Range: bytes=0-0` got 206; false: 200 with the whole file); null = not known yet (migration 0018). */
  range_ok: ColumnType<boolean | null, boolean | null | undefined, boolean | null>
  /** When `mb mirror edit` changed a base URL; set = out of selection until the next successful scan clears it (migration 0018). */
  url_changed_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** The time in the mirror's copy of the sync trace (`sync.trace_path`): when the origin state it last copied was written; null = not read yet (migration 0022). */
  synced_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** Why the last read of the mirror's trace failed; null when it was read (migration 0022). */
  sync_error: ColumnType<string | null, string | null | undefined, string | null>
  /** The trace answer's validator (`etag:…` or `date:…`), sent back on the next read (migration 0022). */
  sync_validator: ColumnType<string | null, string | null | undefined, string | null>
  /** When content checks had found at least `probe.suspect_bad_copies` corrupt copies: suspect, out of selection until a round finds fewer or `--trust-scan` (migration 0024); null = not. */
  bad_copies_suspect_at: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>
  /** Where `mb push` sends the origin tree: `rsync://host/module/` or `user@host:path` (migration 0016); null = the mirror pulls. */
  push_url: string | null
  /** Globs (picomatch) on origin paths: when non-empty, only matching files are pushed. */
  push_include: ColumnType<string[], string[] | undefined, string[]>
  last_push_at: Timestamp | null
  last_push_ok_at: Timestamp | null
  /** Why the last push failed (credentials redacted); null after a push that succeeded. */
  last_push_error: string | null
  created_at: Generated<Date>
  updated_at: Generated<Date>
  txid: Generated<string>
}

export interface FileTable {
  id: Generated<number>
  path: string
  size: number
  mtime: number
  /** Ids of the mirrors whose copy matched this size (and mtime) at their last scan. */
  mirrors: ColumnType<number[], number[] | undefined, number[]>
  md5: string | null
  sha1: string | null
  sha256: string | null
  piece_size: number | null
  piece_hash: string | null
  pieces: string | null
  hashed_size: number | null
  hashed_mtime: number | null
  /** SHA-1 digests of each `piece_size` piece, hex, concatenated (BitTorrent v1; migration 0014). */
  sha1_pieces: ColumnType<string | null, string | null | undefined, string | null>
  /** zsync block size in bytes when `file_zsync` holds this version's block sums, else null (migration 0014). */
  zsync_block_size: ColumnType<number | null, number | null | undefined, number | null>
  indexed_at: Generated<Date>
  /** `.asc` or `.sig`: the detached signature indexed beside the file, smaller than it (migration 0015); null when none. */
  signature: ColumnType<string | null, string | null | undefined, string | null>
  txid: Generated<string>
  /** The origin no longer holds the file; kept under `serve.mirror_only` while a mirror holds it (migration 0033). */
  mirror_only: Generated<boolean>
}

export interface MirrorFileStaleTable {
  mirror_id: number
  file_id: number
  size: number
  mtime: number | null
  seen_at: Generated<Date>
}

/** A mirror's copy that a content check found corrupt at the origin version `size`/`mtime` (migration 0021). */
export interface MirrorFileBadTable {
  mirror_id: number
  file_id: number
  size: number
  mtime: number
  /** 0-based index of the `piece_size` piece whose SHA-1 did not match `file.sha1_pieces`. */
  piece: number
  found_at: Generated<Date>
  /** Id of the transaction that last wrote the row (migration 0030; docs/change-tracking.md). */
  txid: Generated<string>
}

/** A copy a sync trace vouched for (`select.trust_trace`) at the origin version `size`/`mtime`, until a scan decides (migration 0023). */
export interface MirrorFileTraceTable {
  mirror_id: number
  file_id: number
  size: number
  mtime: number
  /** The mirror's trace time that vouched for the copy. */
  trace_at: ColumnType<Date, Date | string, Date | string>
  added_at: Generated<Date>
}

/** A symbolic link of the origin tree whose target lies inside the root (migration 0012). */
export interface FileLinkTable {
  /** The link's path, relative to the root. */
  path: string
  /** The target's canonical path relative to the root (every symlink in it resolved; '' = the root). */
  target: string
  /** The target is a directory. */
  directory: boolean
  indexed_at: Generated<Date>
  txid: Generated<string>
}

/** zsync block sums of one file version (migration 0014). */
export interface FileZsyncTable {
  file_id: number
  /** zsync `Hash-Lengths`: `seq_matches,rsum_bytes,checksum_bytes`, e.g. `2,3,5`. */
  hash_lengths: string
  /** Per block: the trailing rsum bytes then the leading MD4 bytes, as zsyncmake writes them. */
  sums: Uint8Array
}

export interface FileTombstoneTable {
  path: string
  txid: Generated<string>
}

/** Daily download aggregates (migration 0006). `mirror_id` 0 = origin; `country` '--' = unknown. */
export interface StatsDailyTable {
  /** UTC day, 'YYYY-MM-DD' on write. */
  day: ColumnType<Date, string, string>
  path: string
  mirror_id: number
  country: string
  downloads: number
  bytes: number
  other_requests: number
}

/** Monthly rollups of `stats_daily` (`month` = first day of the month, UTC). */
export interface StatsMonthlyTable {
  month: ColumnType<Date, string, string>
  path: string
  mirror_id: number
  country: string
  downloads: number
  bytes: number
  other_requests: number
}

/** One probe check: mirror x protocol x address family x time. */
export interface MirrorProbeTable {
  id: Generated<number>
  mirror_id: number
  at: ColumnType<Date, Date | string | undefined, Date | string>
  protocol: 'http' | 'https'
  family: 'ipv4' | 'ipv6'
  ok: boolean
  http_status: number | null
  latency_ms: number | null
  reason: string
  url: string | null
  detail: string | null
}

/** A probe state change: scope 'mirror' (the summary) or '<protocol>/<family>'. */
export interface MirrorTransitionTable {
  id: Generated<number>
  mirror_id: number
  at: ColumnType<Date, Date | string | undefined, Date | string>
  scope: string
  from_state: 'up' | 'down' | 'unknown'
  to_state: 'up' | 'down'
  reason: string
}

/** A redirect rule (migration 0017; src/lib/rules). */
export interface RedirectRuleTable {
  id: Generated<number>
  name: string
  /** Rules are tried in ascending priority, then by name. */
  priority: number
  enabled: ColumnType<boolean, boolean | undefined, boolean>
  /** picomatch glob of origin paths; without a `/` it matches basenames anywhere. */
  path_glob: string
  countries: ColumnType<string[], string[] | undefined, string[]>
  not_countries: ColumnType<string[], string[] | undefined, string[]>
  continents: ColumnType<string[], string[] | undefined, string[]>
  /** Client CIDRs, canonical text. */
  clients: ColumnType<string[], string[] | undefined, string[]>
  asns: ColumnType<number[], number[] | undefined, number[]>
  target: 'url' | 'mirrors' | 'origin'
  url: string | null
  append_path: ColumnType<boolean, boolean | undefined, boolean>
  /** Mirror identifiers of a `mirrors` target. */
  mirrors: ColumnType<string[], string[] | undefined, string[]>
  status: ColumnType<number, number | undefined, number>
  comment: string | null
  created_at: Generated<Date>
  updated_at: ColumnType<Date, Date | string | undefined, Date | string>
  /** Id of the transaction that last wrote the row (migration 0030; docs/change-tracking.md). */
  txid: Generated<string>
}

/** Requests answered by each rule, per UTC day (migration 0017). */
export interface RuleHitDailyTable {
  day: ColumnType<Date, string, string>
  rule: string
  hits: number
}

/** A folder scanned on demand (migration 0025): the last claim, and what its run did. */
export interface DemandScanTable {
  folder: string
  claimed_at: ColumnType<Date, Date | string, Date | string>
  finished_at: ColumnType<Date | null, Date | string | null, Date | string | null>
  mirrors: Generated<number>
  found: Generated<number>
}

/** One mirror scanned on demand (migration 0025), for the per-mirror budget. */
export interface DemandScanRunTable {
  id: Generated<number>
  mirror_id: number
  started_at: Generated<Date>
  folder: string
  ok: boolean | null
  found: Generated<number>
}

/** Scans on demand per UTC day (migration 0025), for `mb stats`. */
export interface DemandScanDailyTable {
  day: ColumnType<Date, string, string>
  folder_scans: Generated<number>
  mirror_scans: Generated<number>
  failed: Generated<number>
  found: Generated<number>
}

/** One removal of a mirror (migration 0020): its id then, name, URLs (credentials redacted), when and by whom. */
export interface RemovedMirrorTable {
  id: Generated<number>
  mirror_id: number
  identifier: string
  http_url: string | null
  https_url: string | null
  rsync_url: string | null
  ftp_url: string | null
  removed_at: Generated<Date>
  removed_by: string
}

/** What content checks read of a mirror's copy at the origin version `size`/`mtime` (migration 0032). */
export interface MirrorFileCheckTable {
  mirror_id: number
  file_id: number
  size: number
  mtime: number
  /** 0-based piece the next check of the copy starts at. */
  next_piece: Generated<number>
  /** The last check that read pieces of the copy. */
  checked_at: Date | null
  /** When a pass last read every piece of the copy and found them all matching. */
  whole_at: Date | null
  /** The last check that could not judge the copy, and why. */
  unchecked_at: Date | null
  unchecked_reason: string | null
}

/** A check of one copy a client's retry asked for, claimed by one replica (migration 0032). */
export interface ContentCheckDemandTable {
  mirror_id: number
  file_id: number
  claimed_at: Date
}

/** One check run on demand, for the per-mirror hourly bound (migration 0032). */
export interface ContentCheckDemandRunTable {
  id: Generated<number>
  mirror_id: number
  file_id: number
  started_at: Generated<Date>
}

/** When the last background round of a kind finished (`mb serve`'s timers; migration 0029). */
export interface BackgroundRoundTable {
  /** The round's lock name (`content-check`). */
  name: string
  finished_at: Date
}

export interface DB {
  mirror: MirrorTable
  file: FileTable
  mirror_file_stale: MirrorFileStaleTable
  mirror_file_bad: MirrorFileBadTable
  mirror_file_trace: MirrorFileTraceTable
  file_tombstone: FileTombstoneTable
  file_link: FileLinkTable
  file_zsync: FileZsyncTable
  stats_daily: StatsDailyTable
  stats_monthly: StatsMonthlyTable
  mirror_probe: MirrorProbeTable
  mirror_transition: MirrorTransitionTable
  redirect_rule: RedirectRuleTable
  rule_hit_daily: RuleHitDailyTable
  demand_scan: DemandScanTable
  demand_scan_run: DemandScanRunTable
  demand_scan_daily: DemandScanDailyTable
  removed_mirror: RemovedMirrorTable
  background_round: BackgroundRoundTable
  mirror_file_check: MirrorFileCheckTable
  content_check_demand: ContentCheckDemandTable
  content_check_demand_run: ContentCheckDemandRunTable
}

import type {Selectable} from 'kysely'
/** A mirror row as read from the database. */
export type MirrorRow = Selectable<MirrorTable>
