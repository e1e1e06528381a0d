/**
 * The selection engine: MirrorBrain's pool cascade with a weighted, sticky, stateless choice.
 *
 * `select()` is a pure function of (client, file, mirrors, options): no I/O, no clock other
 * than `options.now` (for scan ages and maintenance windows), no randomness other than the
 * stable rendezvous hash of (client network, mirror id). The rules are written out in
 * docs/selection.md ("How a mirror is chosen"); each step has its module, named below.
 */
import {parseIp} from '../net.js'
import {explainEligibility, eligibleHolders} from './eligibility.js'
import {MirrorTable} from './mirror.js'
import type {SelectOptions} from './options.js'
import {originException} from './origin.js'
import {assignPools, onePool} from './pools.js'
import {buildQuery} from './query.js'
import {rankPools} from './rank.js'
import type {ClientInfo, Exclusion, SelectFile, SelectMirror, Selection} from './types.js'

export * from './types.js'
export {compileSelectOptions, type SelectOptions} from './options.js'
export {compileMirror, compileMirrors, MirrorTable} from './mirror.js'
export {encodePath, mirrorUrl} from './url.js'
export {clientNetworkKey, uniform} from './hash.js'
export {clientInfo, clientNetwork, type SelectionContext, selectionContext} from './context.js'
export {outsideOwnTier} from './pools.js'

/**
 * Chooses mirrors for one request.
 *
 * 1. Origin exceptions first (./origin.ts; `origin` set, `realm` null, nothing ranked):
 *    files under `minSize`, origin-only patterns, excluded User-Agents, client CIDRs and
 *    MIME types; none for a file the origin lacks (`file.originLacks`).
 * 2. Eligibility of every mirror (./rules.ts, ./eligibility.ts; each failure is one
 *    {@link Exclusion}, first failing rule wins): enabled, up, score > 0, not in a
 *    maintenance window, inside its subtree, holds this version (`file.mirrors`; `stale`
 *    when `file.stale` knows a differing copy), size within `fileMaxsize`, last scan within
 *    `maxScanAgeSeconds`, not `needsRescan`, an https_url for HTTPS clients (an HTTP or
 *    HTTPS URL for others), IPv6 under `ipv6: require` when an IPv6 client meets a mirror
 *    probed without IPv6, client inside `clientPrefixes` when set, client country not in
 *    `excludeCountries`.
 * 3. Pools (./pools.ts): each eligible mirror goes to its most specific pool: prefix →
 *    AS → country (or its substitute, or listed in `otherCountries`) → continent → world;
 *    fallback mirrors form their own last pool. A mirror whose flags forbid its pool
 *    (prefix_only/as_only/country_only/region_only) is excluded. Under `ipv6: prefer`, an
 *    IPv6 client's pools each put the mirrors probed without IPv6 last.
 * 4. Distance (./distance.ts): in each pool, with client coordinates known, mirrors within
 *    `distanceFactor` × the nearest one's distance (or `distanceFloorKm`) are near, the
 *    others far; mirrors without coordinates count as near. Distance never excludes.
 *    Under `ranking: score` every pooled mirror but the fallback ones goes to the world
 *    pool, and distance does not apply: the score alone shares the requests.
 * 5. Ranking (./rank.ts): the first non-empty pool of prefix…world (else fallback, else the
 *    origin with `no_mirror`) gives the choice, by weighted rendezvous hashing of (client
 *    network, or network and path, mirror id) with the score as weight among its near
 *    members; `ranked` holds it, then the rest of each pool nearest-first (far after near),
 *    pool after pool, with 1-based ranks.
 *
 * @param client    the resolved client (country before substitution); `address` is parsed
 *                  from `ip` when absent
 * @param file      the origin file (size in bytes, mtime in Unix seconds) and its mirror set
 * @param mirrors   every mirror of the snapshot, as a {@link MirrorTable} (what
 *                  `compileMirrors()` and the snapshot build); any other map of compiled
 *                  mirrors is compiled into a table for this call
 * @param options   the compiled `select:` section (`compileSelectOptions()`)
 * @param explain   false skips building `excluded` (the redirect hot path needs only `ranked`)
 * @param limit     with `explain` false: build at most this many candidates (the redirect
 *                  needs 1 + max_alternatives); later pools are then not ranked at all.
 *                  Ignored when `explain` is true, so that explanations stay complete.
 */
export function select(client: ClientInfo, file: SelectFile, mirrors: ReadonlyMap<number, SelectMirror>, options: SelectOptions, explain = true, limit = Infinity): Selection {
  const address = client.address ?? parseIp(client.ip)
  const exception = file.originLacks ? undefined : originException(client, address, file, options)
  if (exception !== undefined) return {realm: null, ranked: [], excluded: [], origin: exception}

  const table = mirrors instanceof MirrorTable ? mirrors : new MirrorTable(mirrors.values())
  const q = buildQuery(table, client, address, file, options, explain)
  const eligible: SelectMirror[] = []
  const excluded: Exclusion[] | undefined = explain ? [] : undefined
  if (excluded) explainEligibility(table, q, eligible, excluded)
  else eligibleHolders(table, q, options, eligible)

  const realmOf = table.scratch.realm
  let present = assignPools(table, q, eligible, realmOf, excluded)
  const byScore = options.ranking === 'score'
  if (byScore) present = onePool(realmOf, eligible.length, present)
  const ranked = rankPools(table, q, eligible, realmOf, present, options, explain ? Infinity : Math.max(1, limit), explain)

  if (ranked.length === 0) return {realm: null, ranked, excluded: excluded ?? [], origin: {reason: 'no_mirror', detail: noMirrorDetail(mirrors.size, excluded)}}
  return byScore ? {realm: ranked[0].realm, ranked, excluded: excluded ?? [], ranking: 'score'} : {realm: ranked[0].realm, ranked, excluded: excluded ?? []}
}

/**
 * Why no mirror was eligible, in words: when mirrors holding the file were passed over, the
 * reasons that did it with their counts ("no eligible mirror: no_ipv6 (2), down (1)"), so an
 * explanation never blames the holding when something else excluded the holders.
 */
function noMirrorDetail(total: number, excluded: readonly Exclusion[] | undefined): string {
  if (total === 0) return 'no mirrors are registered'
  const checked = `${total} mirror${total === 1 ? '' : 's'} checked`
  const counts = new Map<string, number>()
  for (const e of excluded ?? []) if (e.reason !== 'not_held') counts.set(e.reason, (counts.get(e.reason) ?? 0) + 1)
  if (counts.size === 0) return `no eligible mirror holds this version (${checked})`
  const reasons = [...counts].map(([reason, n]) => `${reason} (${n})`).join(', ')
  return `no eligible mirror for this client: ${reasons}; ${checked}`
}
