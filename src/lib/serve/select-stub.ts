/**
 * TEMPORARY stand-in for `select()` from src/lib/select/ until the selection engine lands:
 * country -> continent -> world, weighted random by score. Deleted once the real one exists.
 */
import {mirrorUrl} from '../select/url.js'
import type {SelectOptions} from '../select/options.js'
import type {Candidate, ClientInfo, Realm, SelectFile, SelectMirror, Selection} from '../select/types.js'

export function select(client: ClientInfo, file: SelectFile, mirrorsById: ReadonlyMap<number, SelectMirror>, options: SelectOptions): Selection {
  if (file.size < options.minSize) return {realm: null, ranked: [], excluded: [], origin: {reason: 'small_file', detail: 'small'}}
  const eligible: SelectMirror[] = []
  for (let i = 0; i < file.mirrors.length; i++) {
    const m = mirrorsById.get(file.mirrors[i])
    if (!m || !m.enabled || !m.up || m.score <= 0) continue
    if (client.https && !m.httpsUrl) continue
    if (!m.httpUrl && !m.httpsUrl) continue
    eligible.push(m)
  }
  const pools: Array<[Realm, SelectMirror[]]> = [
    ['country', eligible.filter((m) => client.country && m.country === client.country)],
    ['continent', eligible.filter((m) => client.continent && m.continent === client.continent)],
    ['world', eligible],
  ]
  for (const [realm, pool] of pools) {
    if (pool.length === 0) continue
    const ranked = pool.map((m) => ({m, k: Math.random() ** (1 / m.score)})).sort((a, b) => b.k - a.k)
    const candidates: Candidate[] = ranked.map(({m}, i) => ({mirror: m, realm, rank: i + 1, url: mirrorUrl(m, file.path, client.https)}))
    return {realm, ranked: candidates, excluded: []}
  }
  return {realm: null, ranked: [], excluded: [], origin: {reason: 'no_mirror', detail: 'none'}}
}
