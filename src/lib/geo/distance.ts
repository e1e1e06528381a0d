/**
 * Great-circle distance between two points on the Earth, by the haversine formula
 * (R. W. Sinnott, "Virtues of the Haversine", Sky & Telescope 68:2, 1984), on a sphere of
 * the IUGG mean Earth radius (6371.0088 km).
 */

/** Mean Earth radius in km (IUGG R1). */
export const EARTH_RADIUS_KM = 6371.0088

const RAD = Math.PI / 180

/**
 * Distance in km between (lat1, lon1) and (lat2, lon2), all in degrees (WGS84).
 * Accurate to about 0.5% (spherical model), plenty for choosing the nearer mirror.
 * Returns NaN when an argument is NaN.
 */
export function distanceKm(lat1: number, lon1: number, lat2: number, lon2: number): number {
  const dLat = (lat2 - lat1) * RAD
  const dLon = (lon2 - lon1) * RAD
  const s1 = Math.sin(dLat / 2)
  const s2 = Math.sin(dLon / 2)
  const a = s1 * s1 + Math.cos(lat1 * RAD) * Math.cos(lat2 * RAD) * s2 * s2
  return 2 * EARTH_RADIUS_KM * Math.asin(Math.min(1, Math.sqrt(a)))
}
