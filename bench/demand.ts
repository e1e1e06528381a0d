/**
 * Demand-check benchmark: what the scans on demand (`scan.demand`, src/lib/scan/demand.ts)
 * cost the redirect path of `mb serve`. In process, CPU time (process.cpuUsage), interleaved
 * rounds, medians; each figure also as a share of a redirect's CPU (`--redirect-us`, 50 µs
 * measured by `npm run bench`).
 *
 * - hit (the file has an eligible mirror): the server calls the hook only in its no-mirror
 *   branch (`MirrorServer.redirectOrDeliver`, reason `no_mirror`). Timed as that branch with
 *   the hook wired against the same loop without it, over ranked lists that are never empty.
 *   Target: at most 1% of a redirect.
 * - miss, folder in its cooldown (every miss after the first in a folder, the steady state of
 *   a popular new file): `request()` finds the folder in its Map and returns.
 * - miss, folder queued (the first miss in a folder): the folder is queued and its run
 *   started (the store answers at once that another replica claimed it, so no scan runs);
 *   the request's own CPU, not the run's, which follows on the event loop.
 *
 *   npm run bench -- demand [--requests N] [--folders N] [--rounds N]
 */
import {parseArgs} from 'node:util'
import {DemandScanQueue, type DemandStore} from '../src/lib/scan/demand.js'
import {median, verdict} from './lib.js'

/** CPU ns per call that `fn` took for `calls` calls. */
function cpuNsPer(calls: number, fn: () => void): number {
  const before = process.cpuUsage()
  fn()
  const used = process.cpuUsage(before)
  return ((used.user + used.system) * 1000) / calls
}

/** A store whose claims all fail at once (another replica holds them): the queue drains without scanning. */
const CLAIMED_ELSEWHERE: DemandStore = {
  claim: async () => false,
  release: async () => {},
  candidates: async () => [],
  spend: async () => undefined,
  refund: async () => {},
  changedSince: async () => false,
  finishRun: async () => {},
  finishFolder: async () => {},
}

/** Entry point: `npm run bench -- demand [--requests N] [--folders N] [--rounds N] [--redirect-us US]`. */
export async function main(argv: string[]): Promise<void> {
  const {values} = parseArgs({
    args: argv,
    options: {
      requests: {type: 'string', default: '1000000'},
      folders: {type: 'string', default: '5000'},
      rounds: {type: 'string', default: '5'},
      'redirect-us': {type: 'string', default: '50'},
    },
  })
  const requests = Number(values.requests)
  const folders = Number(values.folders)
  const rounds = Number(values.rounds)
  const redirectUs = Number(values['redirect-us'])
  const paths = Array.from({length: folders}, (_, i) => `pub/dir${i % 100}/sub${i}/file-${i}.iso`)
  const settings = {cooldownSeconds: 300, jobs: 2, mirrorBudget: 60, useTraces: false, include: [], exclude: []}

  // Hit: the server's branch, with and without the hook wired.
  const ranked = [[{id: 1}], [{id: 2}, {id: 3}]]
  const queue = new DemandScanQueue(CLAIMED_ELSEWHERE, async () => ({}) as never, settings)
  const hook: ((path: string) => void) | undefined = (path) => queue.request(path)
  let sink = 0
  const without = () => {
    for (let i = 0; i < requests; i++) sink += ranked[i & 1].length
  }
  const withHook = () => {
    for (let i = 0; i < requests; i++) {
      const list = ranked[i & 1]
      if (list.length === 0) hook?.(paths[i % folders])
      sink += list.length
    }
  }
  // Miss in cooldown: every folder asked once first, then again and again.
  for (let done = 0; done < folders; done += 500) {
    for (const path of paths.slice(done, done + 500)) queue.request(path)
    await queue.idle()
  }
  const cooled = () => {
    for (let i = 0; i < requests; i++) queue.request(paths[i % folders])
  }
  // Miss, queued: a virtual clock past the cooldown on each request, so each one queues its folder.
  let clock = 0
  const fresh = new DemandScanQueue(CLAIMED_ELSEWHERE, async () => ({}) as never, settings, {now: () => (clock += 301_000)})
  // In chunks below the queue's bound on waiting folders, drained between chunks (not timed):
  // the request's own cost, not that of the run it starts later on the event loop.
  const chunk = 500
  const queuedCalls = Math.min(requests, 100_000)
  const queued = async (): Promise<number> => {
    let ns = 0
    for (let done = 0; done < queuedCalls; done += chunk) {
      ns += cpuNsPer(1, () => {
        for (let i = done; i < done + chunk; i++) fresh.request(paths[i % folders])
      })
      await fresh.idle()
    }
    return ns / queuedCalls
  }

  withHook()
  without()
  cooled()
  const a: number[] = []
  const b: number[] = []
  const c: number[] = []
  const d: number[] = []
  for (let r = 0; r < rounds; r++) {
    a.push(cpuNsPer(requests, without))
    b.push(cpuNsPer(requests, withHook))
    c.push(cpuNsPer(requests, cooled))
    d.push(await queued())
  }
  const hitNs = Math.max(0, median(b) - median(a))
  const share = (ns: number) => (ns / 1000 / redirectUs) * 100
  console.log(
    `demand check, hit: ${hitNs.toFixed(1)} ns per redirect (branch ${median(a).toFixed(1)} ns without the hook, ${median(b).toFixed(1)} ns with it) = ${share(hitNs).toFixed(2)}% of a ${redirectUs} µs redirect`,
  )
  console.log(`demand check, miss in cooldown: ${median(c).toFixed(0)} ns per request = ${share(median(c)).toFixed(2)}% of a redirect`)
  console.log(`demand check, miss queued (first in its folder): ${median(d).toFixed(0)} ns per request = ${share(median(d)).toFixed(2)}% of a redirect${sink < 0 ? '' : ''}`)
  verdict('demand check on a hit, share of a redirect', share(hitNs), 1, '%', 'lower')
}
