/**
 * The order of the sources a segmented client reads in parallel (a Metalink 4 or 3
 * document, a torrent's web seeds and magnet `ws=`, the `Link: rel=duplicate` alternatives of
 * a redirect): the selection's ranking with every mirror that probing found answering a
 * ranged request with the whole file (`range_ok = false`) moved after those that honour Range
 * or are not yet known, each part in rank order. aria2c, wget2 and libzypp fetch pieces with
 * `Range` (RFC 9110 §14.2); a mirror that ignores it sends each of them the whole file, so it
 * is the last source they should try. A plain download is not affected: its redirect still
 * goes to the first ranked mirror, and a ranged request is never redirected to such a mirror
 * (./rules.ts, `no_range`).
 */
import type {Candidate} from './types.js'

/**
 * `ranked` with the candidates whose mirror ignores Range last, the order within each part
 * kept. Returns `ranked` itself (no copy) when none ignores Range, as on the redirect path
 * nearly always.
 */
export function rangeHonouringFirst(ranked: readonly Candidate[]): readonly Candidate[] {
  let ignoring = 0
  for (let i = 0; i < ranked.length; i++) if (ranked[i].mirror.rangeOk === false) ignoring++
  if (ignoring === 0) return ranked
  const ordered: Candidate[] = []
  for (const c of ranked) if (c.mirror.rangeOk !== false) ordered.push(c)
  for (const c of ranked) if (c.mirror.rangeOk === false) ordered.push(c)
  return ordered
}
