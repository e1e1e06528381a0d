/**
 * Scans on demand for the client's own tier (docs/operations.md, "Scans on demand"): a
 * redirect that leaves the client's country and AS (its first mirror is on its continent, in
 * the world or a fallback) names, to the scans on demand, the enabled mirrors of the client's
 * country or AS. Those lack the file by their last scan, but may have synced it since: a US
 * client goes to France for a DVD the US mirror already holds until that mirror is scanned
 * again. The queue (../scan/demand.ts) scans the file's folder on them alone, within the
 * per-folder cooldown and each mirror's hourly budget, and only those carrying the folder
 * (base path, globs) and, with sync traces on, synced after the file was indexed.
 */
import type {DemandScanQueue} from '../scan/demand.js'
import type {ClientInfo, SelectMirror} from '../select/types.js'

/** Tier keys remembered per mirror table before the cache starts over. */
const MAX_TIERS = 4096

/**
 * The `onOutsideTier` hook of the server (../serve/delivery/settings.ts) for `demand`: cheap
 * on the redirect path (a cooldown lookup, then the tier's mirrors cached per mirror table and
 * country/AS).
 */
export function tierScans(demand: DemandScanQueue): (path: string, client: ClientInfo, mirrors: ReadonlyMap<number, SelectMirror>, network: string) => void {
  let table: ReadonlyMap<number, SelectMirror> | undefined
  let tiers = new Map<string, readonly string[]>()
  return (path, client, mirrors, network) => {
    if (client.country === undefined && client.asn === undefined) return
    if (demand.cooling(path)) return
    if (mirrors !== table) {
      table = mirrors
      tiers = new Map()
    }
    const key = `${client.country ?? ''} ${client.asn ?? ''}`
    let own = tiers.get(key)
    if (own === undefined) {
      own = tierMirrors(mirrors, client)
      if (tiers.size >= MAX_TIERS) tiers.clear()
      tiers.set(key, own)
    }
    if (own.length > 0) demand.request(path, own, network)
  }
}

/** The identifiers of the enabled mirrors in the client's country or AS. */
function tierMirrors(mirrors: ReadonlyMap<number, SelectMirror>, client: ClientInfo): string[] {
  const own: string[] = []
  for (const m of mirrors.values()) {
    if (!m.enabled) continue
    if ((client.country !== undefined && m.country === client.country) || (client.asn !== undefined && m.asn === client.asn)) own.push(m.identifier)
  }
  return own
}
