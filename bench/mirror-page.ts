/**
 * Mirror page benchmark (issue 47 item 11): how long a page of `GET /mirrors/NAME`
 * (src/lib/operator/mirror-page.ts `buildMirrorPage`) takes at `--mirrors` mirrors (default
 * 500) and `--files` files (default 1,000,000), in process, on the overview benchmark's
 * snapshot (bench/overview.ts: 10,000 directories, each on 20-60% of the mirrors, 5% of the
 * files missing from 1-3 of them). Target: at most 50 ms a page.
 *
 * For each of `--sample` mirrors it times the first page of `missing` (the folders with
 * counts), which counts what the mirror lacks per directory (src/lib/operator/mirror-view.ts:
 * one pass over the file map's columns, each file's mirror set tested with one read of the
 * set membership table that the snapshot keeps, no path strings), then the second page of
 * the folder list, and pages 1 and 2 of the largest folder's files (page 1 finds them: a pass
 * over the columns, then over the stored paths; page 2 is a slice). The first mirror's first
 * page is the first page after the snapshot is built (its build ends as a full load does,
 * `DirectoryCounts.settle`). The database read of the page (the mirror's globs and stale
 * copies, the overview's records: a few rows, cached) is left empty: its cost does not grow
 * with the files. Verdicts take medians: the first pages, the folders' first pages, and the
 * slices (the second pages).
 *
 * With `--exclude GLOB` (a `scan.exclude` glob; repeatable) the pages read the bitset of the
 * files the globs keep (src/lib/operator/carried-slots.ts), a path string and a glob test per
 * file, which the mirrors share. It is made in idle time first, as `mb serve` does after a
 * full load (`MirrorFilesView.warmAfterLoads`): the benchmark reports how long that took and
 * the longest the event loop waited for it (the gaps between `setImmediate` turns). With
 * `--cold` it is not, and the first mirror's first page makes it.
 *
 *   npm run bench -- mirror-page
 *   npm run bench -- mirror-page --files 2000 --mirrors 10 --sample 2
 *   npm run bench -- mirror-page --exclude 'pub/dir1?/**' [--cold]
 */
import {parseArgs} from 'node:util'
import {NetworkView} from '../src/lib/operator/network.js'
import {buildMirrorPage} from '../src/lib/operator/mirror-page.js'
import {MirrorFilesView} from '../src/lib/operator/mirror-view.js'
import type {Snapshot} from '../src/lib/serve/snapshot/snapshot.js'
import {median, verdict} from './lib.js'
import {buildSnapshot} from './overview.js'

/** The page time target, in ms (issue 47 item 11). */
const TARGET_MS = 50
/** Rows per page, as the page gives without `?page_size=`. */
const PAGE_SIZE = 100

/** `npm run bench -- mirror-page [--files N] [--mirrors M] [--sample S] [--exclude GLOB]... [--cold]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      files: {type: 'string', default: '1000000'},
      mirrors: {type: 'string', default: '500'},
      sample: {type: 'string', default: '5'},
      exclude: {type: 'string', multiple: true, default: []},
      cold: {type: 'boolean', default: false},
    },
  })
  const files = Number(values.files)
  const mirrors = Number(values.mirrors)
  const sample = Math.min(Number(values.sample), mirrors)
  console.log(`mirror page benchmark: ${files} files x ${mirrors} mirrors, in process${values.exclude.length > 0 ? `, scan.exclude ${values.exclude.join(' ')}` : ''}`)
  let started = performance.now()
  const snapshot = buildSnapshot(files, mirrors)
  console.log(`  snapshot built in ${((performance.now() - started) / 1000).toFixed(1)} s`)
  const view = new NetworkView({db: undefined as never}, () => snapshot)
  view.records = async () => new Map()
  const filesView = new MirrorFilesView({db: undefined as never}, {include: [], exclude: values.exclude})
  Object.assign(filesView, {readExtra: async () => ({include: [], exclude: [], stale: new Map()})})
  if (values.exclude.length > 0 && !values.cold) await warmed(filesView, snapshot)
  const first: number[] = []
  const folderFirst: number[] = []
  const cached: number[] = []
  const all = [...snapshot.mirrors.values()]
  for (let i = 0; i < sample; i++) {
    const m = all[Math.floor((i * all.length) / sample)]
    started = performance.now()
    const page = await buildMirrorPage(view, filesView, snapshot, m, {kind: 'missing', folder: undefined, paging: {page: 1, size: PAGE_SIZE}})
    first.push(performance.now() - started)
    const largest = page.folders!.reduce((a, b) => (b.files > a.files ? b : a), {folder: '', files: 0, bytes: 0})
    const requests = [
      {folder: undefined, page: 2},
      {folder: largest.folder, page: 1},
      {folder: largest.folder, page: 2},
    ]
    const times: number[] = []
    for (const r of requests) {
      started = performance.now()
      await buildMirrorPage(view, filesView, snapshot, m, {kind: 'missing', folder: r.folder, paging: {page: r.page, size: PAGE_SIZE}})
      times.push(performance.now() - started)
    }
    folderFirst.push(times[1])
    cached.push(times[0], times[2])
    console.log(`  ${m.identifier}: ${page.total} missing in ${page.count} folders; first page ${first.at(-1)!.toFixed(1)} ms, then ${times.map((t) => t.toFixed(2)).join(', ')} ms`)
  }
  verdict(`mirror page, first (counts), ${mirrors} x ${files}`, median(first), TARGET_MS, 'ms', 'lower')
  verdict(`mirror page, a folder's first, ${mirrors} x ${files}`, median(folderFirst), TARGET_MS, 'ms', 'lower')
  verdict(`mirror page, next pages, ${mirrors} x ${files}`, median(cached), TARGET_MS, 'ms', 'lower')
}

/** Warms `filesView`'s glob bitset for `snapshot` as `mb serve` does after a full load, and prints how long it took and the longest the event loop waited. */
async function warmed(filesView: MirrorFilesView, snapshot: Snapshot): Promise<void> {
  let longest = 0
  let last = performance.now()
  let going = true
  const tick = () => {
    const now = performance.now()
    longest = Math.max(longest, now - last)
    last = now
    if (going) setImmediate(tick)
  }
  setImmediate(tick)
  const started = performance.now()
  await filesView.warmAfterLoads({current: snapshot, onChange: () => {}})
  going = false
  console.log(`  glob bitset made in idle time: ${(performance.now() - started).toFixed(0)} ms, the event loop waited ${longest.toFixed(1)} ms at most`)
}
