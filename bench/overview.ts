/**
 * Overview benchmark (issue 35): how long the network overview (`GET /mirrors`,
 * src/lib/operator/network.ts `buildOverview`) takes to build, uncached, for the root and
 * for subtrees, at `--mirrors` mirrors (default 500) and `--files` files (default 1,000,000).
 * Target: at most 50 ms each, from the snapshot's per-directory counts.
 *
 * In process, no database: the snapshot is built in memory in the serve benchmark's shape
 * (bench/serve.ts: 10,000 directories, each on 20-60% of the mirrors, 5% of the files missing
 * from 1-3 of them; files in id order, which spreads consecutive files over directories). The
 * mirrors' probe and scan record, a cached read of one row per mirror, is left empty: its cost
 * does not grow with the files. It also prints how long the snapshot took to build (counts
 * included), and what the counts add to the heap: the heap in use after a compacting
 * collection, before and after a second set of counts is built from the same files.
 *
 *   npm run bench -- overview
 *   npm run bench -- overview --files 5000000 --mirrors 200
 */
import {parseArgs} from 'node:util'
import {compileMirror, MirrorTable} from '../src/lib/select/mirror.js'
import {buildOverview, NetworkView} from '../src/lib/operator/network.js'
import {DirectoryCounts} from '../src/lib/serve/snapshot/directory-counts.js'
import {collectGarbage} from '../src/lib/serve/snapshot/heap.js'
import {Snapshot} from '../src/lib/serve/snapshot/snapshot.js'
import {median, rng, verdict} from './lib.js'
import {mirrorRow} from '../test/helpers/mirror-row.js'
import {directoryMirrorSets, directoryOf, filePath, fileMirrorSet} from './serve.js'

/** The overview's build time target, in ms (issue 35 item 7). */
const TARGET_MS = 50
/** Subtrees timed besides the root: a top directory of the shape and one of its leaves. */
const SUBTREES = ['pub/', 'pub/dir7/', 'pub/dir7/sub3/']

/** The snapshot of `files` files on `mirrors` mirrors (see the module doc). */
export function buildSnapshot(files: number, mirrors: number): Snapshot {
  const random = rng(files * 7919 + mirrors)
  const snapshot = new Snapshot()
  const rows = Array.from({length: mirrors}, (_, i) => mirrorRow(i + 1))
  snapshot.mirrors = new MirrorTable(rows.map(compileMirror))
  const directorySets = directoryMirrorSets(
    rows.map((r) => r.id),
    random,
  )
  snapshot.files.reserve(files)
  for (let i = 0; i < files; i++) {
    const path = filePath(i)
    const mirrorSet = snapshot.mirrorSets.fromArray(fileMirrorSet(directorySets[directoryOf(i)], random))
    snapshot.files.set(path, snapshot.digests.entry({path, size: 8192 + Math.floor(random() * 4e9), mtime: 1_764_000_000, mirrors: mirrorSet}, null, null, null))
  }
  snapshot.files.counts.settle() // as a full load ends
  return snapshot
}

/** Heap in use (V8 heap and array buffers), in bytes, after a compacting collection. */
function heapInUse(): number {
  collectGarbage()
  const usage = process.memoryUsage()
  return usage.heapUsed + usage.arrayBuffers
}

/** `npm run bench -- overview [--files N] [--mirrors M] [--rounds R]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({args: argv, options: {files: {type: 'string', default: '1000000'}, mirrors: {type: 'string', default: '500'}, rounds: {type: 'string', default: '3'}}})
  const files = Number(values.files)
  const mirrors = Number(values.mirrors)
  const rounds = Number(values.rounds)
  console.log(`overview benchmark: ${files} files x ${mirrors} mirrors, in process`)
  let started = performance.now()
  const snapshot = buildSnapshot(files, mirrors)
  console.log(`  snapshot built in ${((performance.now() - started) / 1000).toFixed(1)} s (${snapshot.files.counts.size} directories counted)`)

  // Counting's own heap: a second set of counts built from the same files.
  const before = heapInUse()
  const again = new DirectoryCounts()
  started = performance.now()
  for (const file of snapshot.files.values()) again.add(file.path, file.size, file.mirrors)
  again.flush()
  const countMs = performance.now() - started
  const extraMB = (heapInUse() - before) / 2 ** 20
  if (again.subtree('').files !== snapshot.files.counts.subtree('').files) throw new Error('the two counts differ')
  console.log(`  the per-directory counts: ${extraMB.toFixed(1)} MB of heap; counting every file again took ${countMs.toFixed(0)} ms`)

  const view = new NetworkView({db: undefined as never}, () => snapshot)
  view.records = async () => new Map()
  view.originShare = async () => null
  const times = new Map<string, number[]>()
  for (let r = 0; r < rounds; r++) {
    for (const subtree of ['', ...SUBTREES]) {
      const t0 = performance.now()
      const overview = await buildOverview(view, snapshot, subtree)
      const ms = performance.now() - t0
      if (overview.mirrors.length === 0) throw new Error(`no mirror carries "${subtree}"`)
      times.set(subtree, [...(times.get(subtree) ?? []), ms])
    }
  }
  for (const [subtree, ms] of times) console.log(`  /mirrors${subtree ? `?path=${subtree}` : ''}: ${ms.map((m) => m.toFixed(2)).join(', ')} ms`)
  const subtreeWorst = Math.max(...SUBTREES.map((s) => median(times.get(s)!)))
  verdict(`overview build, root, ${mirrors} x ${files}`, median(times.get('')!), TARGET_MS, 'ms', 'lower')
  verdict(`overview build, subtree, ${mirrors} x ${files}`, subtreeWorst, TARGET_MS, 'ms', 'lower')
}
