/**
 * Origin-check benchmark: what checking the disk on each redirect costs `mb serve`
 * (`serve.disk_check_seconds`, src/lib/origin/disk.ts), with the origin's directories watched
 * (`serve.disk_check_watch`, the default: a stat believed until an inotify event, src/lib/origin/watch.ts)
 * and without (one stat per path at most once a second). In-process, on a real tree of `--files` empty files in the serve benchmark's
 * layout, with a virtual clock advancing 1/`--rate` s per request, so the stat cache expires
 * as it would at that request rate; CPU time (process.cpuUsage) rather than wall time, which
 * the loaded machine makes unreliable.
 *
 * Two request patterns: `hot` (`--paths` distinct paths, as wrk sends in the serve
 * benchmark) and `uniform` (every file of the tree equally likely: nearly every request
 * misses the per-second cache and stats). Each is measured in `--rounds` interleaved rounds:
 * the snapshot lookup alone (A, what a redirect does anyway), the lookup plus the per-second
 * check (B), the lookup plus the watched check (C); the medians of B - A and C - A are the
 * check's cost per redirect, printed in ns and as a share of a redirect's CPU
 * (`--redirect-us`, 50 µs measured by `npm run bench`). The watched check is judged against
 * the target (at most 5% of a redirect) in its steady state, once every requested path was
 * stat()ed; its first pass (one stat per path, then none) is printed beside it.
 *
 *   npm run bench -- origin-check                      # 100,000 files
 *   npm run bench -- origin-check --files 1000000      # the 1M-file tree
 */
import {closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import {DiskVersions} from '../src/lib/origin/disk.js'
import {OriginWatch} from '../src/lib/origin/watch.js'
import {median, rng, verdict} from './lib.js'

/** The target: the check costs at most this share of a redirect's CPU, percent. */
const TARGET_PERCENT = 5

interface Entry {
  size: number
  mtime: number
}

function filePath(i: number): string {
  return `pub/dir${i % 100}/sub${Math.floor(i / 100) % 100}/file-${i}.iso`
}

/** CPU µs (user + system) that `fn` took. */
function cpuMicros(fn: () => void): number {
  const before = process.cpuUsage()
  fn()
  const used = process.cpuUsage(before)
  return used.user + used.system
}

interface Setup {
  root: string
  snapshot: Map<string, Entry>
  watch: OriginWatch
  requests: number
  rate: number
  rounds: number
  redirectUs: number
}

/** The request loop of one side: `check` answers whether the disk matches `entry` (none: the lookup alone). */
function side(sequence: string[], snapshot: Map<string, Entry>, step: () => number, disk?: DiskVersions): () => void {
  let sink = 0
  return () => {
    for (let i = 0; i < sequence.length; i++) {
      const path = sequence[i]
      const entry = snapshot.get(path)
      if (disk === undefined) {
        if (entry !== undefined) sink++
        continue
      }
      const v = disk.version(path, step())
      if (entry !== undefined && v !== null && v.size === entry.size && v.mtime === entry.mtime) sink++
    }
    if (sink < 0) console.log(sink)
  }
}

/** Measures one request pattern (A lookup, B per-second check, C watched check, interleaved); the watched check's median share of a redirect, percent. */
function measurePattern(name: string, pick: () => string, o: Setup): number {
  const stepMs = 1000 / o.rate
  let clock = Date.now()
  const step = () => {
    clock += stepMs
    return clock
  }
  // The request sequence, drawn once: every side walks the same paths.
  const sequence: string[] = new Array(o.requests)
  for (let i = 0; i < o.requests; i++) sequence[i] = pick()
  const lookupOnly = side(sequence, o.snapshot, step)
  const perSecond = side(sequence, o.snapshot, step, new DiskVersions(o.root, 1))
  const watchedDisk = new DiskVersions(o.root, 1, o.watch)
  const watched = side(sequence, o.snapshot, step, watchedDisk)
  perSecond() // warm-up: JIT, and the dentries of the paths
  const firstPass = cpuMicros(watched)
  const statsAfterFirst = watchedDisk.stats
  const a: number[] = []
  const b: number[] = []
  const c: number[] = []
  for (let r = 0; r < o.rounds; r++) {
    a.push((cpuMicros(lookupOnly) * 1000) / o.requests)
    b.push((cpuMicros(perSecond) * 1000) / o.requests)
    c.push((cpuMicros(watched) * 1000) / o.requests)
  }
  const share = (ns: number) => (ns / 1000 / o.redirectUs) * 100
  const list = (xs: number[]) => xs.map((x) => x.toFixed(0)).join(', ')
  const perSecondNs = median(b) - median(a)
  const watchedNs = median(c) - median(a)
  const firstNs = (firstPass * 1000) / o.requests - median(a)
  console.log(`origin check, ${name}, ${o.rate} requests/s (virtual clock): lookup ${list(a)} ns; + per-second check ${list(b)} ns; + watched check ${list(c)} ns per request (interleaved)`)
  console.log(`  per-second stat: median cost ${perSecondNs.toFixed(0)} ns per redirect = ${share(perSecondNs).toFixed(1)}% of a ${o.redirectUs} µs redirect`)
  console.log(
    `  watched: median cost ${watchedNs.toFixed(0)} ns = ${share(watchedNs).toFixed(1)}% (${watchedDisk.stats - statsAfterFirst} stats after the first pass); first pass ${firstNs.toFixed(0)} ns = ${share(firstNs).toFixed(1)}% (${statsAfterFirst} stats)`,
  )
  return share(watchedNs)
}

/** Entry point: `npm run bench -- origin-check [--files N] [--paths N] [--requests N] [--rate R] [--rounds N]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      files: {type: 'string', default: '100000'},
      paths: {type: 'string', default: '5000'},
      requests: {type: 'string', default: '400000'},
      rate: {type: 'string', default: '19000'},
      rounds: {type: 'string', default: '5'},
      'redirect-us': {type: 'string', default: '50'},
    },
  })
  const files = Number(values.files)
  const requests = Number(values.requests)
  const rate = Number(values.rate)
  const rounds = Number(values.rounds)
  const redirectUs = Number(values['redirect-us'])
  const root = mkdtempSync(join(tmpdir(), 'mb-bench-origin-'))
  try {
    const t0 = performance.now()
    const snapshot = new Map<string, Entry>()
    const dirs = new Set<string>()
    for (let i = 0; i < files; i++) {
      const path = filePath(i)
      const dir = path.slice(0, path.lastIndexOf('/'))
      if (!dirs.has(dir)) {
        mkdirSync(join(root, dir), {recursive: true})
        dirs.add(dir)
      }
      closeSync(openSync(join(root, path), 'w'))
      const st = statSync(join(root, path))
      snapshot.set(path, {size: st.size, mtime: Math.floor(st.mtimeMs / 1000)})
    }
    console.log(`origin tree: ${files} files in ${dirs.size} directories, created in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    const random = rng(7)
    const hot: string[] = []
    for (let i = 0; i < Number(values.paths); i++) hot.push(filePath(Math.floor(random() * files)))
    const patterns: Array<[string, () => string]> = [
      [`hot (${hot.length} paths)`, () => hot[Math.floor(random() * hot.length)]],
      [`uniform (${files} paths)`, () => filePath(Math.floor(random() * files))],
    ]
    const watch = new OriginWatch(root)
    await watch.ready
    const report = watch.report()
    console.log(`origin watch: ${report.watched} directories watched, ${report.unwatched} not (inotify limit ${report.limit ?? 'unknown'}${report.limitHit ? ', reached' : ''})`)
    const failed: string[] = []
    try {
      for (const [name, pick] of patterns) {
        const share = measurePattern(name, pick, {root, snapshot, watch, requests, rate, rounds, redirectUs})
        if (!verdict(`origin check, ${name.split(' ')[0]}, watched`, share, TARGET_PERCENT, '%', 'lower').pass) failed.push(name)
      }
    } finally {
      watch.close()
    }
    if (failed.length > 0) process.exitCode = 1
  } finally {
    const t1 = performance.now()
    rmSync(root, {recursive: true, force: true})
    console.log(`(tree removed in ${((performance.now() - t1) / 1000).toFixed(1)} s)`)
  }
}
