/**
 * The ordered list of schema migrations (applied in name order). Add a new file
 * `NNNN_name.ts` with the next number and register it here; never edit a migration that has
 * been released.
 *
 * The numbers have gaps (no 0003, 0005, 0011, 0013, 0019) because a number is handed to a change when the
 * change is planned, so that changes made side by side do not collide, and it is never
 * reused: a planned change that needed no schema leaves its number unused. The gaps are
 * harmless, since kysely only needs the names to sort in the order they run. Never fill
 * them: a database that has applied 0006 would see a new 0003 as a migration out of order,
 * which kysely refuses. The next free number is 0022.
 */
import type {Migration} from 'kysely'
import * as m0001 from './0001_init.js'
import * as m0002 from './0002_mirror_asn_bigint.js'
import * as m0004 from './0004_probe.js'
import * as m0006 from './0006_stats.js'
import * as m0007 from './0007_file_touch_once.js'
import * as m0008 from './0008_stats_daily_fillfactor.js'
import * as m0009 from './0009_mirror_maintenance.js'
import * as m0010 from './0010_probe_scheme.js'
import * as m0012 from './0012_suspect_and_links.js'
import * as m0014 from './0014_client_formats.js'
import * as m0015 from './0015_repo_metadata.js'
import * as m0016 from './0016_push.js'
import * as m0017 from './0017_redirect_rules.js'
import * as m0018 from './0018_mirror_range_url_changed.js'
import * as m0020 from './0020_removed_mirror.js'
import * as m0021 from './0021_mirror_file_bad.js'
import * as m0022 from './0022_mirror_sync_trace.js'
import * as m0023 from './0023_mirror_file_trace.js'
import * as m0024 from './0024_mirror_bad_copies_suspect.js'
import * as m0025 from './0025_demand_scan.js'
import * as m0029 from './0029_background_round.js'
import * as m0030 from './0030_txid_rules_bad_copies.js'
import * as m0031 from './0031_stats_origin.js'
import * as m0032 from './0032_content_check.js'
import * as m0033 from './0033_file_mirror_only.js'
import * as m0034 from './0034_mirror_signing.js'

export const migrations: Record<string, Migration> = {
  '0001_init': m0001,
  '0002_mirror_asn_bigint': m0002,
  '0004_probe': m0004,
  '0006_stats': m0006,
  '0007_file_touch_once': m0007,
  '0008_stats_daily_fillfactor': m0008,
  '0009_mirror_maintenance': m0009,
  '0010_probe_scheme': m0010,
  '0012_suspect_and_links': m0012,
  '0014_client_formats': m0014,
  '0015_repo_metadata': m0015,
  '0016_push': m0016,
  '0017_redirect_rules': m0017,
  '0018_mirror_range_url_changed': m0018,
  '0020_removed_mirror': m0020,
  '0021_mirror_file_bad': m0021,
  '0022_mirror_sync_trace': m0022,
  '0023_mirror_file_trace': m0023,
  '0024_mirror_bad_copies_suspect': m0024,
  '0025_demand_scan': m0025,
  '0029_background_round': m0029,
  '0030_txid_rules_bad_copies': m0030,
  '0031_stats_origin': m0031,
  '0032_content_check': m0032,
  '0033_file_mirror_only': m0033,
  '0034_mirror_signing': m0034,
}
