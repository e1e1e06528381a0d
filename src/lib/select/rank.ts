/**
 * Step 5 of `select()`: each pool is ordered by weighted rendezvous hashing of (client
 * network, mirror id) with the score as weight (./hash.ts). Pools are taken most specific
 * first (prefix … world, then fallback); the candidates are the winning pool, then the later
 * pools, with 1-based ranks over all of them.
 */
import {keepNear, kmFromA} from './distance.js'
import {rendezvousKey} from './hash.js'
import type {MirrorTable} from './mirror.js'
import type {SelectOptions} from './options.js'
import type {Query} from './query.js'
import {REALMS} from './pools.js'
import type {Candidate, Exclusion, SelectMirror} from './types.js'
import {encodePath, mirrorBase} from './url.js'

/**
 * Orders `order[0..count)` (positions in `eligible`) by rendezvous key, ties by mirror id,
 * and keeps the first `want`: a bounded insertion sort with no comparator calls and no
 * allocation (pools are small). `key[position]` is filled here.
 */
function orderPool(q: Query, eligible: readonly SelectMirror[], order: Int32Array, count: number, key: Float64Array, want: number): void {
  const networkKey = q.networkKey
  for (let k = 0; k < count; k++) {
    const m = eligible[order[k]]
    key[order[k]] = rendezvousKey(networkKey, m.id, m.score)
  }
  let filled = 0
  for (let k = 0; k < count; k++) {
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
    while (j >= 0 && (key[order[j]] > ki || (key[order[j]] === ki && eligible[order[j]].id > id))) {
      order[j + 1] = order[j]
      j--
    }
    order[j + 1] = i
  }
}

/**
 * Ranks the pools marked in `present` (see `assignPools`), applying the distance rule in
 * each, until `max` candidates are built.
 * @param realmOf   pool number of each eligible mirror (-1: excluded)
 * @param excluded  receives the `too_far` exclusions (explained selections)
 * @returns the candidates, with `distanceKm` when `excluded` is given and both positions are known
 */
export function rankPools(
  table: MirrorTable,
  q: Query,
  eligible: readonly SelectMirror[],
  realmOf: Int8Array,
  present: number,
  options: SelectOptions,
  max: number,
  excluded: Exclusion[] | undefined,
): Candidate[] {
  const {order, distance, key} = table.scratch
  const ranked: Candidate[] = []
  const n = eligible.length
  const path = q.file.path
  const https = q.https
  let encodedWhole: string | undefined
  for (let p = 0; p < REALMS.length && ranked.length < max; p++) {
    if ((present & (1 << p)) === 0) continue
    const realm = REALMS[p]
    let count = 0
    for (let i = 0; i < n; i++) if (realmOf[i] === p) order[count++] = i
    count = keepNear(table, q, eligible, order, count, distance, realm, options, excluded)
    const want = Math.min(count, max - ranked.length)
    orderPool(q, eligible, order, count, key, want)
    for (let k = 0; k < want; k++) {
      const i = order[k]
      const m = eligible[i]
      const base = mirrorBase(m, https)!
      let url: string
      if (m.basePath) {
        url = base + encodePath(path.slice(m.basePath.length))
      } else {
        if (encodedWhole === undefined) encodedWhole = encodePath(path)
        url = base + encodedWhole
      }
      const candidate: Candidate = {mirror: m, realm, rank: ranked.length + 1, url}
      if (excluded && q.hasPosition && !Number.isNaN(distance[i])) candidate.distanceKm = kmFromA(distance[i])
      ranked.push(candidate)
    }
  }
  return ranked
}
