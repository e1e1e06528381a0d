/**
 * Checks of the snapshot's per-directory counts (src/lib/serve/snapshot/directory-counts.ts)
 * against a recount that walks every file.
 */
import {expect} from 'chai'
import {type Holding, holdingsOf} from '../../src/lib/operator/network.js'
import type {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'

/** Holdings of `subtree` by walking every file: what the counts must equal. */
export function recount(snapshot: Snapshot, subtree: string): Map<number, Holding> {
  const result = new Map<number, Holding>()
  for (const m of snapshot.mirrors.values()) {
    if (!(m.basePath.startsWith(subtree) || subtree.startsWith(m.basePath))) continue
    const scope = m.basePath.startsWith(subtree) ? m.basePath : subtree
    const h: Holding = {files: 0, bytes: subtree === '' ? 0 : null, originFiles: 0, originBytes: 0}
    for (const file of snapshot.files.values()) {
      if (file.path.startsWith(scope)) {
        h.originFiles++
        h.originBytes += file.size
      }
      if (file.path.startsWith(subtree) && file.mirrors.includes(m.id)) {
        h.files++
        if (h.bytes !== null) h.bytes += file.size
      }
    }
    result.set(m.id, h)
  }
  return result
}

/** Every directory of the snapshot's paths, and one that holds nothing. */
function directories(snapshot: Snapshot): string[] {
  const all = new Set(['', 'none/'])
  for (const path of snapshot.files.keys()) {
    for (let slash = path.indexOf('/'); slash >= 0; slash = path.indexOf('/', slash + 1)) all.add(path.slice(0, slash + 1))
  }
  return [...all]
}

/** Expects the holdings of every directory (and of one that holds nothing) to equal {@link recount}'s. */
export function expectRecount(snapshot: Snapshot): void {
  for (const dir of directories(snapshot)) expect(holdingsOf(snapshot, dir), `holdings of "${dir}"`).to.deep.equal(recount(snapshot, dir))
}
