/**
 * Step 5 of `select()`: the order of the eligible mirrors. Pools are taken most specific
 * first (prefix … world, then fallback). For an IPv6 client under `select.ipv6: prefer`,
 * each pool is split in two: its mirrors not known to lack IPv6, then those probing found
 * without IPv6.
 *
 * - The choice: in the first non-empty pool, weighted rendezvous hashing of (client network,
 *   mirror id) with the score as weight (./hash.ts), among its near members (./distance.ts;
 *   all of them without client coordinates). Score shares and stickiness hold over it.
 * - The alternatives: every other member of each pool nearest-first (near ones before far
 *   ones; members without coordinates right after the near ones), pool after pool. Without
 *   client coordinates, in rendezvous order.
 *
 * Ranks are 1-based over all candidates. Under `select.ranking: score` there is one pool
 * (./pools.ts, `onePool`) and no distance: the rendezvous order over all of it.
 */
import {farNote, kmFromA, nearLimit, type PositionColumns} from './distance.js'
import {rendezvousKey} from './hash.js'
import type {SelectOptions} from './options.js'
import type {Query} from './query.js'
import {REALMS} from './pools.js'
import type {Candidate, SelectMirror} from './types.js'
import {encodePath, mirrorBase} from './url.js'

/** The bit of `MirrorTable.flags` set when probing found no IPv6 on the mirror (module-private for speed, see ./pools.ts). */
const NO_IPV6 = 16

/** The bit of `MirrorTable.flags` that this step reads, for one mirror. */
export function ipv6Flags(m: SelectMirror): number {
  return m.ipv6 === false ? NO_IPV6 : 0
}

const IPV6_NOTE = 'IPv6 client and probing found no IPv6 on the mirror: ranked after the mirrors of its pool with IPv6 (select.ipv6 is prefer)'

/**
 * Orders `order[from..count)` (positions in `eligible`) by `key[position]`, ties by mirror
 * id, and keeps the smallest in `order[from..want)`: a bounded insertion sort with no
 * comparator calls and no allocation (pools are small).
 */
function sortRange(eligible: readonly SelectMirror[], order: Int32Array, from: number, count: number, key: Float64Array, want: number): void {
  if (want <= from) return
  let filled = from
  for (let k = from; k < count; k++) {
    const i = order[k]
    const ki = key[i]
    const id = eligible[i].id
    let j: number
    if (filled < want) {
      j = filled - 1
      filled++
    } else {
      const last = order[want - 1]
      if (!(key[last] > ki || (key[last] === ki && eligible[last].id > id))) continue
      j = want - 2
    }
    while (j >= from && (key[order[j]] > ki || (key[order[j]] === ki && eligible[order[j]].id > id))) {
      order[j + 1] = order[j]
      j--
    }
    order[j + 1] = i
  }
}

/**
 * Moves the rendezvous winner among the near members of `order[0..count)` (distance term
 * not above `limitA`; NaN, no coordinates, counts as near) to `order[0]`.
 */
function chooseNear(q: Query, eligible: readonly SelectMirror[], order: Int32Array, count: number, dist: Float64Array, limitA: number): void {
  const networkKey = q.networkKey
  let best = -1
  let bestKey = Infinity
  let bestId = 0
  for (let k = 0; k < count; k++) {
    const i = order[k]
    if (dist[i] > limitA) continue
    const m = eligible[i]
    const rk = rendezvousKey(networkKey, m.id, m.score)
    if (best < 0 || rk < bestKey || (rk === bestKey && m.id < bestId)) {
      best = k
      bestKey = rk
      bestId = m.id
    }
  }
  const chosen = order[best]
  order[best] = order[0]
  order[0] = chosen
}

/**
 * Orders one (sub)pool `order[0..count)` and keeps its first `want` members: the choice
 * first when `choose`, then the rest by distance (with client coordinates) or rendezvous key.
 * @returns the haversine term above which a member is far (Infinity: none is)
 */
/** The mirror table's columns and buffers that the ranking reads (`MirrorTable`, ./mirror.ts). */
interface RankColumns extends PositionColumns {
  readonly scratch: {order: Int32Array; distance: Float64Array; key: Float64Array}
  readonly withoutIpv6: number
}

function orderPool(table: RankColumns, q: Query, eligible: readonly SelectMirror[], count: number, want: number, choose: boolean, options: SelectOptions): number {
  const {order, distance, key} = table.scratch
  if (!q.hasPosition || options.ranking === 'score') {
    const networkKey = q.networkKey
    for (let k = 0; k < count; k++) {
      const m = eligible[order[k]]
      key[order[k]] = rendezvousKey(networkKey, m.id, m.score)
    }
    sortRange(eligible, order, 0, count, key, want)
    return Infinity
  }
  const limitA = nearLimit(table, q, eligible, order, count, distance, options)
  if (choose) chooseNear(q, eligible, order, count, distance, limitA)
  // Members without coordinates sort at the edge of the near ones (ties by id).
  const unknown = Math.min(limitA, 1)
  for (let k = 0; k < count; k++) {
    const i = order[k]
    const a = distance[i]
    key[i] = Number.isNaN(a) ? unknown : a
  }
  sortRange(eligible, order, choose ? 1 : 0, count, key, want)
  return limitA
}

/**
 * Ranks the pools marked in `present` (see `assignPools`) until `max` candidates are built.
 * @param realmOf   pool number of each eligible mirror (-1: excluded)
 * @param explain   add `distanceKm` (both positions known) and `note` (why a mirror ranks after others of its pool)
 * @returns the candidates
 */
export function rankPools(table: RankColumns, q: Query, eligible: readonly SelectMirror[], realmOf: Int8Array, present: number, options: SelectOptions, max: number, explain: boolean): Candidate[] {
  const {order, distance} = table.scratch
  const flags = table.flags
  const ranked: Candidate[] = []
  const n = eligible.length
  const split = q.preferIpv6 && table.withoutIpv6 > 0
  const path = q.file.path
  const https = q.https
  let encodedWhole: string | undefined
  for (let p = 0; p < REALMS.length && ranked.length < max; p++) {
    if ((present & (1 << p)) === 0) continue
    const realm = REALMS[p]
    let withIpv6 = 0
    for (let part = 0; part < (split ? 2 : 1) && ranked.length < max; part++) {
      let count = 0
      if (!split) {
        for (let i = 0; i < n; i++) if (realmOf[i] === p) order[count++] = i
      } else {
        const without = part === 0 ? 0 : NO_IPV6
        for (let i = 0; i < n; i++) if (realmOf[i] === p && (flags[eligible[i].id] & NO_IPV6) === without) order[count++] = i
      }
      if (part === 0) withIpv6 = count
      if (count === 0) continue
      const want = Math.min(count, max - ranked.length)
      const limitA = orderPool(table, q, eligible, count, want, ranked.length === 0, options)
      const start = ranked.length
      for (let k = 0; k < want; k++) {
        const m = eligible[order[k]]
        const base = mirrorBase(m, https)!
        let url: string
        if (m.basePath) {
          url = base + encodePath(path.slice(m.basePath.length))
        } else {
          if (encodedWhole === undefined) encodedWhole = encodePath(path)
          url = base + encodedWhole
        }
        ranked.push({mirror: m, realm, rank: ranked.length + 1, url: m.sign ? m.sign(url) : url})
      }
      if (explain) {
        for (let k = 0; k < want; k++) {
          const c = ranked[start + k]
          const a = distance[order[k]]
          if (q.hasPosition && !Number.isNaN(a)) c.distanceKm = kmFromA(a)
          if (part === 1 && withIpv6 > 0) c.note = IPV6_NOTE
          else if (q.hasPosition && a > limitA) c.note = farNote(a, order, count, distance, realm, options)
        }
      }
    }
  }
  return ranked
}
