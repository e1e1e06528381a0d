/**
 * Step 4 of `select()`: the distance rule. With client coordinates known, the members of a
 * pool within `distanceFactor` × the nearest member's distance (or within `distanceFloorKm`)
 * are *near*; members without coordinates count as near too. Distance orders and demotes,
 * it never excludes: the choice is made among the near members (./rank.ts), and every other
 * member of the pool ranks nearest-first after it, the far ones after the near ones.
 *
 * Distances are compared as haversine terms a = sin²(Δσ/2), a quarter of the squared chord
 * between unit vectors (the same quantity: chord = 2 sin(Δσ/2)), which needs no
 * trigonometry per mirror and does not cancel at short distances. Distance = 2R asin(√a) is
 * monotonic in a, so the arcsine is taken only for the nearest member and for explanations.
 */
import {EARTH_RADIUS_KM} from '../geo/distance.js'
import type {SelectOptions} from './options.js'
import type {Query} from './query.js'
import type {SelectMirror} from './types.js'

/** The bit of `MirrorTable.flags` set when the mirror has coordinates (module-private for speed, see ./pools.ts). */
const HAS_POSITION = 8

/** The bit of `MirrorTable.flags` that this step reads, for one mirror. */
export function positionFlags(m: SelectMirror): number {
  return m.latitude !== null && m.longitude !== null ? HAS_POSITION : 0
}

/** Kilometres from a haversine term. */
export function kmFromA(a: number): number {
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(a)))
}

/**
 * Measures one pool: `order[0..count)` are positions in `eligible`. Writes each member's
 * haversine term to `dist[position]` (NaN without coordinates).
 * @returns the largest haversine term that still counts as near (Infinity when every member
 *          is near: one member, or none with coordinates); a member with `dist > limit` is far
 */
/** The mirror table's columns that this step reads (`MirrorTable`, ./mirror.ts). */
export interface PositionColumns {
  readonly flags: Uint8Array
  readonly posX: Float64Array
  readonly posY: Float64Array
  readonly posZ: Float64Array
}

export function nearLimit(table: PositionColumns, q: Query, eligible: readonly SelectMirror[], order: Int32Array, count: number, dist: Float64Array, options: SelectOptions): number {
  // The table's arrays and the client vector in locals: this loop runs for every pool member.
  const {flags, posX, posY, posZ} = table
  const {x, y, z} = q
  let nearestA = Infinity
  for (let k = 0; k < count; k++) {
    const i = order[k]
    const id = eligible[i].id
    let a = Number.NaN // no coordinates
    if ((flags[id] & HAS_POSITION) !== 0) {
      const dx = posX[id] - x
      const dy = posY[id] - y
      const dz = posZ[id] - z
      a = (dx * dx + dy * dy + dz * dz) / 4
    }
    dist[i] = a
    if (a < nearestA) nearestA = a
  }
  if (!(nearestA < Infinity) || count <= 1) return Infinity
  const limitKm = Math.max(kmFromA(nearestA) * options.distanceFactor, options.distanceFloorKm)
  const half = limitKm / (2 * EARTH_RADIUS_KM)
  // The nearest member is near even when rounding puts sin² of its own distance a hair below it (factor 1).
  return half >= Math.PI / 2 ? Infinity : Math.max(Math.sin(half) ** 2, nearestA)
}

/**
 * Why a far member ranks after the near ones, for explanations: its distance, the factor and
 * the nearest member's distance (of `order[0..count)`, measured by {@link nearLimit}).
 */
export function farNote(a: number, order: Int32Array, count: number, dist: Float64Array, realm: string, options: SelectOptions): string {
  let nearestA = Infinity
  for (let k = 0; k < count; k++) if (dist[order[k]] < nearestA) nearestA = dist[order[k]]
  return `${Math.round(kmFromA(a))} km away, beyond ${options.distanceFactor} x the nearest ${realm} mirror's ${Math.round(kmFromA(nearestA))} km: ranked after the near ones`
}
