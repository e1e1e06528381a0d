/**
 * One mirror row for unit tests of selection, probing and mirror lists, as the registry would
 * hold it: cleared fields as `mb mirror add` leaves them, HTTP and HTTPS up, in GB/EU, score
 * 100, scanned ten minutes before {@link ROW_NOW}.
 */
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {CLEARED_VALUES} from '../../src/lib/mirrors/validate.js'

/** The clock (Unix seconds) the rows are made against; tests pass it to `options.now`. */
export const ROW_NOW = 1_800_000_000

/** Mirror `id` (`m<id>`, `http(s)://m<id>.example.org/pub/`), with `overrides` on top. */
export function mirrorRow(id: number, overrides: Partial<MirrorRow> = {}): MirrorRow {
  return {
    ...CLEARED_VALUES,
    id,
    identifier: `m${id}`,
    http_url: `http://m${id}.example.org/pub/`,
    https_url: `https://m${id}.example.org/pub/`,
    country: 'GB',
    continent: 'EU',
    score: 100,
    enabled: true,
    up: true,
    http_up: true,
    https_up: true,
    ipv6: null,
    status: {},
    needs_rescan: false,
    last_scan_ok_at: new Date((ROW_NOW - 600) * 1000),
    ...overrides,
  } as MirrorRow
}
