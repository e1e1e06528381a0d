/**
 * The origin's budget and meter (docs/selection.md, "The origin's budget"): what the origin
 * delivers that a mirror could carry (a file in the origin form `/_origin/PATH`, a file under
 * `select.min_size`) is kept within `serve.origin_budget`, bytes per second in all and per
 * client network; over it, such a request gets a `302` to the best mirror instead. Files no
 * eligible mirror holds are always delivered and never charged.
 *
 * Each budget is a token bucket that may run into debt: a delivery is allowed while both the
 * total and the client network's bucket hold at least one byte, and then takes the file's
 * whole size from both, so that one large file passes a full bucket once and its network
 * then waits until the rate has paid it back. A bucket holds at most one second of its rate.
 * Networks are keyed by `select.client_prefix_v4`/`_v6` (src/lib/select/hash.ts); at most
 * {@link MAX_NETWORKS} are tracked, and full buckets are forgotten first.
 *
 * What the origin delivers is counted by reason in src/lib/stats/origin.ts (the meter).
 */
import type {IpAddress} from '../../net.js'
import {clientNetworkKey} from '../../select/hash.js'
import {DEFAULT_ORIGIN_BUDGET_NETWORK, DEFAULT_ORIGIN_BUDGET_TOTAL} from '../config.js'

/** `serve.origin_budget` as the server takes it: bytes per second, 0 = no limit. */
export interface OriginBudgetSettings {
  /** All deliveries a mirror could carry together, bytes per second; 0 = no limit. */
  totalBytesPerSecond: number
  /** Those of one client network, bytes per second; 0 = no limit. */
  networkBytesPerSecond: number
}

/** The default `serve.origin_budget`: 100 MiB/s in all, 10 MiB/s per client network. */
export const DEFAULT_ORIGIN_BUDGET: OriginBudgetSettings = {totalBytesPerSecond: DEFAULT_ORIGIN_BUDGET_TOTAL, networkBytesPerSecond: DEFAULT_ORIGIN_BUDGET_NETWORK}

/** Client networks whose buckets are tracked at most (about 50 bytes each). */
const MAX_NETWORKS = 65_536

/** One bucket: bytes available (negative: debt) at `atMs`. */
interface Bucket {
  bytes: number
  atMs: number
}

/** Refills `b` at `rate` bytes per second up to one second's worth, to `nowMs`. */
function refill(b: Bucket, rate: number, nowMs: number): void {
  if (nowMs > b.atMs) {
    b.bytes = Math.min(rate, b.bytes + ((nowMs - b.atMs) / 1000) * rate)
    b.atMs = nowMs
  }
}

/** The budget of one server; see the module doc. */
export class OriginBudget {
  private settings: OriginBudgetSettings
  private readonly total: Bucket
  private readonly networks = new Map<number, Bucket>()

  constructor(
    settings: OriginBudgetSettings,
    private readonly prefixes: {v4: number; v6: number},
  ) {
    this.settings = settings
    this.total = {bytes: settings.totalBytesPerSecond, atMs: 0}
  }

  /** Applies reloaded settings (the buckets keep their levels, capped to the new rates). */
  configure(settings: OriginBudgetSettings, prefixes: {v4: number; v6: number}): void {
    this.settings = settings
    this.prefixes.v4 = prefixes.v4
    this.prefixes.v6 = prefixes.v6
  }

  /**
   * True, and charged, when a delivery of `bytes` to the client at `address` (undefined: an
   * address GeoIP could not parse, charged to the total only) fits the budget at `nowMs`
   * (ms since the epoch); false, and nothing charged, when it does not.
   */
  take(address: IpAddress | undefined, bytes: number, nowMs: number): boolean {
    const {totalBytesPerSecond: totalRate, networkBytesPerSecond: networkRate} = this.settings
    if (totalRate > 0) {
      refill(this.total, totalRate, nowMs)
      if (this.total.bytes < 1) return false
    }
    let bucket: Bucket | undefined
    if (networkRate > 0 && address !== undefined) {
      const key = clientNetworkKey(address, this.prefixes.v4, this.prefixes.v6)
      bucket = this.networks.get(key)
      if (bucket === undefined) {
        if (this.networks.size >= MAX_NETWORKS) this.forgetFull(networkRate, nowMs)
        bucket = {bytes: networkRate, atMs: nowMs}
        this.networks.set(key, bucket)
      } else refill(bucket, networkRate, nowMs)
      if (bucket.bytes < 1) return false
    }
    if (totalRate > 0) this.total.bytes -= bytes
    if (bucket !== undefined) bucket.bytes -= bytes
    return true
  }

  /** Drops the buckets that have refilled (they read as new), else the oldest half. */
  private forgetFull(rate: number, nowMs: number): void {
    for (const [key, b] of this.networks) {
      refill(b, rate, nowMs)
      if (b.bytes >= rate) this.networks.delete(key)
    }
    if (this.networks.size < MAX_NETWORKS) return
    let n = 0
    for (const key of this.networks.keys()) {
      if (n++ >= MAX_NETWORKS / 2) break
      this.networks.delete(key)
    }
  }
}
