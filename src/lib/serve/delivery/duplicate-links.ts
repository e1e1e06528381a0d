/**
 * `Link: <url>; rel=duplicate; pri=K; geo=cc` on redirects (RFC 6249): the alternatives a
 * client may fall back to, the mirrors ranked after the Location (those that ignore Range
 * last: ../../select/segmented.ts).
 */
import {rangeHonouringFirst} from '../../select/segmented.js'
import type {RedirectHeaderProvider} from './route.js'

const geoParameters = new Map<string, string>()

/** `; geo=cc` for a mirror's country code (RFC 6249 §6), lower-cased once per code instead of per request. */
function geoParameter(country: string): string {
  let text = geoParameters.get(country)
  if (text === undefined) {
    text = `; geo=${country.toLowerCase()}`
    if (geoParameters.size < 1000) geoParameters.set(country, text)
  }
  return text
}

/**
 * The provider of `Link: <url>; rel=duplicate; pri=K; geo=cc` (RFC 6249 §3, §6): one header
 * line per alternative, for the first `count` ranked mirrors (the Location is the first).
 * @param count a number, or a function read per redirect (a reload may change it)
 */
export function duplicateLinks(count: number | (() => number)): RedirectHeaderProvider {
  const limit = typeof count === 'number' ? () => count : count
  return (headers, _ctx, _file, _client, selection) => {
    const ranked = rangeHonouringFirst(selection.ranked)
    const links = Math.min(ranked.length, limit())
    if (links <= 0) return
    const duplicates: string[] = new Array(links)
    for (let i = 0; i < links; i++) {
      const c = ranked[i]
      const cc = c.mirror.country
      // Header-safe as built: a compiled mirror's base URL is, and so is an encoded path.
      duplicates[i] = `<${c.url}>; rel=duplicate; pri=${i + 1}${cc ? geoParameter(cc) : ''}`
    }
    // One name with an array of values: node writes one `Link:` line per value and checks
    // the name once.
    headers.push('Link', duplicates)
  }
}
