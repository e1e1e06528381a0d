/**
 * What a mirror lacks, as its page counts it (src/lib/operator/mirror-view.ts, over the file
 * map's columns and set membership table), against the straightforward pass over every entry,
 * in a random world: nested and look-alike folders, more distinct mirror sets than the
 * membership table starts with room for, sparse mirror ids, replaced and deleted files
 * (dead slots), entries kept whole, paths beyond Latin-1, a base path, globs, stale and
 * corrupt copies.
 */
import {expect} from 'chai'
import {pathFilter} from '../../src/lib/glob.js'
import type {FileKind} from '../../src/lib/lookup/mirror-files.js'
import {type MirrorFileIndex, MirrorFilesView} from '../../src/lib/operator/mirror-view.js'
import {MirrorTable} from '../../src/lib/select/mirror.js'
import type {SelectMirror} from '../../src/lib/select/types.js'
import {fileWith} from '../../src/lib/serve/snapshot/file-entry.js'
import {Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {folderOf} from '../../src/lib/text.js'

/** A seeded generator of numbers in [0, 1) (mulberry32), so that a failure can be replayed. */
function rng(seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6d2b79f5) | 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const FOLDERS = ['', 'a', 'a-b', 'a/b', 'a/b/c', 'pub', 'pub/x', 'pub/x/y', 'pub-old', 'pub/\u00e9t\u00e9', 'pub/\u20ac', 'z']
/** Mirror ids that sets draw from: dense ones and a few far apart. */
const IDS = [...Array.from({length: 20}, (_, i) => i + 1), 300, 4000, 32000]

/** A random world: files of random sets in {@link FOLDERS}, then some replaced, deleted, or kept whole. */
function world(random: () => number): {snapshot: Snapshot; paths: string[]} {
  const snapshot = new Snapshot()
  const pick = () => snapshot.mirrorSets.fromArray(IDS.filter(() => random() < 0.4))
  const entry = (path: string) => snapshot.digests.entry({path, size: 1 + Math.floor(random() * 1e10), mtime: 1_764_000_000, mirrors: pick()}, null, null, null)
  const paths: string[] = []
  for (let i = 0; i < 4_000; i++) {
    const folder = FOLDERS[Math.floor(random() * FOLDERS.length)]
    const path = `${folder === '' ? '' : `${folder}/`}f${i}${random() < 0.3 ? '.src.rpm' : '.iso'}`
    snapshot.files.set(path, entry(path))
    paths.push(path)
  }
  for (const path of paths) {
    const r = random()
    if (r < 0.1) snapshot.files.set(path, entry(path))
    else if (r < 0.15) snapshot.files.delete(path)
    else if (r < 0.18) snapshot.files.set(path, fileWith(snapshot.files.get(path)!, {mirrors: pick()}))
  }
  return {snapshot, paths}
}

/** The straightforward answer: every entry, tested on its own. */
function expected(snapshot: Snapshot, m: {id: number; basePath: string}, skip: Set<string>, carried: (path: string) => boolean) {
  const byFolder = new Map<string, Array<[string, number]>>()
  for (const [path, entry] of snapshot.files) {
    if (!path.startsWith(m.basePath) || entry.mirrors.includes(m.id) || skip.has(path) || !carried(path)) continue
    const folder = folderOf(path)
    byFolder.set(folder, [...(byFolder.get(folder) ?? []), [path, entry.size]])
  }
  const folders = [...byFolder.keys()].sort().map((folder) => ({folder, files: byFolder.get(folder)!.length, bytes: byFolder.get(folder)!.reduce((sum, f) => sum + f[1], 0)}))
  return {folders, lists: new Map([...byFolder].map(([folder, list]) => [folder, list.sort((a, b) => (a[0] < b[0] ? -1 : 1))]))}
}

/** A view whose database read (globs and stale copies) is `extra`. */
function viewWith(scan: {include: string[]; exclude: string[]}, extra: {include: string[]; exclude: string[]; stale: Map<string, {size: number; mtime: number | null}>}): MirrorFilesView {
  const view = new MirrorFilesView({db: undefined as never}, scan)
  return Object.assign(view, {readExtra: async () => extra})
}

/** The index's folders and every folder's files, as {@link expected} gives them. */
function read(index: MirrorFileIndex) {
  return {folders: index.folders, lists: new Map(index.folders.map((f) => [f.folder, [...index.list(f.folder)]]))}
}

describe("a mirror's missing files from the snapshot's columns (src/lib/operator/mirror-view.ts)", () => {
  for (const seed of [1, 2, 3]) {
    it(`equal the straightforward pass over every entry, with and without globs, base path, stale and corrupt copies (world ${seed})`, async () => {
      const random = rng(seed)
      const {snapshot, paths} = world(random)
      const live = paths.filter((path) => snapshot.files.has(path))
      const stale = new Map(live.filter(() => random() < 0.05).map((path) => [path, {size: 1, mtime: null}]))
      const bad = live.filter(() => random() < 0.05)
      snapshot.badCopies = new Map([[3, bad]])
      const skip = new Set([...stale.keys(), ...bad])
      const none = {include: [], exclude: []}
      const cases = [
        {m: {id: 3, basePath: ''}, scan: none, own: none},
        {m: {id: 3, basePath: 'pub/'}, scan: none, own: none},
        {m: {id: 300, basePath: 'a/'}, scan: none, own: none},
        {m: {id: 77, basePath: ''}, scan: none, own: none}, // an id no set holds
        {m: {id: 3, basePath: ''}, scan: {include: [], exclude: ['z/**']}, own: {include: ['**/*.iso'], exclude: []}},
      ]
      for (const {m, scan, own} of cases) {
        const view = viewWith(scan, {...own, stale: m.id === 3 ? stale : new Map()})
        const index = await view.index(snapshot, m as SelectMirror, 'missing' as FileKind)
        const carried = pathFilter([scan.include, own.include], [...scan.exclude, ...own.exclude])
        const want = expected(snapshot, m, m.id === 3 ? skip : new Set(), carried)
        expect(read(index), JSON.stringify(m)).to.deep.equal(want)
        expect([index.files, index.bytes]).to.deep.equal([want.folders.reduce((n, f) => n + f.files, 0), want.folders.reduce((n, f) => n + f.bytes, 0)])
      }
    })
  }

  it('sees files, folders and mirror sets added after an earlier page, with and without globs', async () => {
    const random = rng(9)
    const {snapshot} = world(random)
    const m = {id: 5, basePath: ''} as SelectMirror
    const none = {include: [], exclude: [], stale: new Map()}
    const scan = {include: [], exclude: ['**/*.src.rpm', 'new/3/**']}
    const plain = viewWith({include: [], exclude: []}, none)
    const globbed = viewWith(scan, none)
    await plain.index(snapshot, m, 'missing')
    await globbed.index(snapshot, m, 'missing')
    for (let i = 0; i < 3_000; i++) {
      const path = `new/${i % 7}/g${i}${i % 3 === 0 ? '.src.rpm' : '.iso'}`
      snapshot.files.set(path, snapshot.digests.entry({path, size: i, mtime: 1, mirrors: snapshot.mirrorSets.fromArray(IDS.filter(() => random() < 0.5))}, null, null, null))
    }
    for (const path of [...snapshot.files.keys('a/')].slice(0, 50)) snapshot.files.delete(path)
    snapshot.mirrors = new MirrorTable() // as a refresh that changed anything does
    const index = await plain.index(snapshot, m, 'missing')
    expect(read(index)).to.deep.equal(expected(snapshot, m, new Set(), () => true))
    expect(index.folders.map((f) => f.folder)).to.include.members(['new/0', 'new/6'])
    const carried = pathFilter([[]], scan.exclude)
    expect(read(await globbed.index(snapshot, m, 'missing'))).to.deep.equal(expected(snapshot, m, new Set(), carried))
  })
})
