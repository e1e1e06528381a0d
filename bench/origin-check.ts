/**
 * Origin-check benchmark: what checking the disk on each redirect costs `mb serve`
 * (`serve.disk_check_seconds`, src/lib/origin/disk.ts: one stat per path at most once a
 * second). In-process, on a real tree of `--files` empty files in the serve benchmark's
 * layout, with a virtual clock advancing 1/`--rate` s per request, so the stat cache expires
 * as it would at that request rate; CPU time (process.cpuUsage) rather than wall time, which
 * the loaded machine makes unreliable.
 *
 * Two request patterns: `hot` (`--paths` distinct paths, as wrk sends in the serve
 * benchmark) and `uniform` (every file of the tree equally likely: nearly every request
 * misses the cache and stats). Each is measured in `--rounds` interleaved pairs: the
 * snapshot lookup alone (A, what a redirect does anyway), then the lookup plus the check (B);
 * the medians of B - A are the check's cost per redirect, printed in ns and as a share of a
 * redirect's CPU (`--redirect-us`, 50 µs measured by `npm run bench`).
 *
 *   npm run bench -- origin-check                      # 100,000 files
 *   npm run bench -- origin-check --files 1000000      # the 1M-file tree
 */
import {closeSync, mkdirSync, mkdtempSync, openSync, rmSync, statSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {parseArgs} from 'node:util'
import {DiskVersions} from '../src/lib/origin/disk.js'
import {median, rng} from './lib.js'

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
    const stepMs = 1000 / rate
    let clock = Date.now()
    for (const [name, pick] of patterns) {
      // The request sequence, drawn once: both sides walk the same paths.
      const sequence: string[] = new Array(requests)
      for (let i = 0; i < requests; i++) sequence[i] = pick()
      const disk = new DiskVersions(root, 1)
      let sink = 0
      const lookupOnly = () => {
        for (let i = 0; i < requests; i++) if (snapshot.get(sequence[i]) !== undefined) sink++
      }
      const withCheck = () => {
        for (let i = 0; i < requests; i++) {
          const path = sequence[i]
          const entry = snapshot.get(path)
          clock += stepMs
          const v = disk.version(path, clock)
          if (entry !== undefined && v !== null && v.size === entry.size && v.mtime === entry.mtime) sink++
        }
      }
      withCheck() // warm-up: JIT, and the dentries of the paths
      const a: number[] = []
      const b: number[] = []
      for (let r = 0; r < rounds; r++) {
        a.push((cpuMicros(lookupOnly) * 1000) / requests)
        b.push((cpuMicros(withCheck) * 1000) / requests)
      }
      const costNs = median(b) - median(a)
      const share = (costNs / 1000 / redirectUs) * 100
      console.log(
        `origin check, ${name}, ${rate} requests/s (virtual clock): lookup ${a.map((x) => x.toFixed(0)).join(', ')} ns, lookup + check ${b.map((x) => x.toFixed(0)).join(', ')} ns per request (interleaved); median cost ${costNs.toFixed(0)} ns per redirect = ${share.toFixed(1)}% of a ${redirectUs} µs redirect${sink < 0 ? '' : ''}`,
      )
    }
  } finally {
    const t1 = performance.now()
    rmSync(root, {recursive: true, force: true})
    console.log(`(tree removed in ${((performance.now() - t1) / 1000).toFixed(1)} s)`)
  }
}
