// @store-independent: the queue's policy against an in-memory DemandStore; test/integration/demand-store.test.ts covers the SQL side
/**
 * The queue of scans on demand (src/lib/scan/demand.ts): per-folder cooldown, the cap on
 * folder scans at a time, the per-mirror hourly budget, and deduplication across replicas.
 */
import {expect} from 'chai'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {type DemandSettings, type DemandStore, DemandScanQueue, type FolderScanner, NO_CANDIDATE_RETRY_SECONDS} from '../../src/lib/scan/demand.js'
import type {ScanMirrorResult} from '../../src/lib/scan/scan.js'
import {mirrorRow} from '../helpers/mirror-row.js'

const SETTINGS: DemandSettings = {cooldownSeconds: 300, jobs: 2, mirrorBudget: 60, useTraces: false, include: [], exclude: []}

/** A shared "database": folder claims with a cooldown, budgets per mirror, on a fake clock. */
class FakeDatabase {
  now = 1_000_000
  claims = new Map<string, number>()
  runs: Array<{mirrorId: number; at: number; folder: string; ok?: boolean; found?: number; refunded?: boolean}> = []
  /** What changedSince answers: the folders' files were indexed recently (a release). */
  recent = true
  folders: Array<{folder: string; mirrors: number; failed: number; found: number}> = []
  mirrors: MirrorRow[] = [mirrorRow(1, {identifier: 'a.test'}), mirrorRow(2, {identifier: 'b.test'})]

  store(): DemandStore {
    return {
      claim: async (folder, cooldown) => {
        const last = this.claims.get(folder)
        if (last !== undefined && last > this.now - cooldown * 1000) return false
        this.claims.set(folder, this.now)
        return true
      },
      release: async (folder, cooldown, retry) => {
        this.claims.set(folder, this.now - (cooldown - retry) * 1000)
      },
      candidates: async () => this.mirrors,
      spend: async (mirrorId, folder, budget) => {
        const used = this.runs.filter((r) => r.mirrorId === mirrorId && r.at > this.now - 3_600_000 && !r.refunded).length
        if (used >= budget) return undefined
        this.runs.push({mirrorId, at: this.now, folder})
        return {id: this.runs.length - 1, mirrorId}
      },
      refund: async (ticket) => {
        this.runs[ticket.id].refunded = true
      },
      changedSince: async () => this.recent,
      finishRun: async (ticket, ok, found) => {
        Object.assign(this.runs[ticket.id], {ok, found})
      },
      finishFolder: async (folder, run) => {
        this.folders.push({folder, ...run})
      },
    }
  }
}

/** A scanner that records its calls and, while `gate` is set, waits for it. */
function scanner(found = 1): FolderScanner & {calls: Array<{mirror: string; folder: string}>; running: number; gate?: Promise<void>} {
  const running = new Set<string>()
  const fn = (async (mirror: MirrorRow, folder: string) => {
    fn.calls.push({mirror: mirror.identifier, folder})
    running.add(folder)
    if (running.size > fn.running) fn.running = running.size
    await fn.gate
    running.delete(folder)
    return {ok: true, added: found} as ScanMirrorResult
  }) as unknown as FolderScanner & {calls: Array<{mirror: string; folder: string}>; running: number; gate?: Promise<void>}
  fn.calls = []
  fn.running = 0
  return fn
}

describe('scans on demand: the queue', () => {
  it('scans the folder (not the file) once per cooldown, on every candidate mirror, and counts the copies found', async () => {
    const db = new FakeDatabase()
    const scan = scanner(2)
    const queue = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    queue.request('pub/15.6/a.iso')
    queue.request('pub/15.6/b.iso') // same folder, while it runs: the folder scan covers it
    await queue.idle()
    queue.request('pub/15.6/a.iso') // within the cooldown
    await queue.idle()
    expect(scan.calls).to.deep.equal([
      {mirror: 'a.test', folder: 'pub/15.6'},
      {mirror: 'b.test', folder: 'pub/15.6'},
    ])
    expect(queue.counters).to.include({requests: 3, cooledDown: 2, folderScans: 1, mirrorScans: 2, filesFound: 4})
    expect(db.folders).to.deep.equal([{folder: 'pub/15.6', mirrors: 2, failed: 0, found: 4}])
    db.now += 301_000
    queue.request('pub/15.6/a.iso')
    await queue.idle()
    expect(queue.counters.folderScans).to.equal(2)
  })

  it('counts a mirror that has not synced the folder yet (absent: ok, 0 files) as scanned, not failed', async () => {
    const db = new FakeDatabase()
    db.mirrors.push(mirrorRow(3, {identifier: 'c.test'}))
    const results: Record<string, Partial<ScanMirrorResult>> = {
      'a.test': {ok: true, added: 1},
      'b.test': {ok: true, added: 0, files: 0, absent: true},
      'c.test': {ok: false, added: 0, error: 'http: HTTP base URL answered 404'},
    }
    const scan = (async (mirror: MirrorRow) => results[mirror.identifier] as ScanMirrorResult) as FolderScanner
    const queue = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    queue.request('pub/16.0/rel.iso')
    await queue.idle()
    expect(queue.counters).to.include({mirrorScans: 3, mirrorScansFailed: 1, filesFound: 1})
    expect(db.folders).to.deep.equal([{folder: 'pub/16.0', mirrors: 3, failed: 1, found: 1}])
    // The failed scan gave its slot back, and the folder may be asked for again within a minute.
    expect(db.runs.map((r) => [r.ok, r.refunded === true])).to.deep.equal([
      [true, false],
      [true, false],
      [undefined, true],
    ])
    db.now += (NO_CANDIDATE_RETRY_SECONDS + 1) * 1000
    queue.request('pub/16.0/rel.iso')
    await queue.idle()
    expect(queue.counters.folderScans).to.equal(2)
  })

  it('runs at most demand_jobs folder scans at a time; the rest wait their turn', async () => {
    const db = new FakeDatabase()
    db.mirrors = [db.mirrors[0]]
    const scan = scanner()
    let open!: () => void
    scan.gate = new Promise((resolve) => (open = resolve))
    const queue = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    for (const dir of ['a', 'b', 'c', 'd', 'e']) queue.request(`${dir}/file.iso`)
    await new Promise((resolve) => setTimeout(resolve, 20))
    expect(scan.calls.map((c) => c.folder)).to.deep.equal(['a', 'b'])
    expect(queue.size).to.equal(5)
    open()
    await queue.idle()
    expect(scan.calls.map((c) => c.folder)).to.deep.equal(['a', 'b', 'c', 'd', 'e'])
    expect(scan.running).to.equal(2)
    expect(queue.size).to.equal(0)
  })

  it('leaves a mirror out once its hourly budget is spent, and scans it again when the hour has room', async () => {
    const db = new FakeDatabase()
    db.mirrors = [db.mirrors[0]]
    const scan = scanner()
    const queue = new DemandScanQueue(db.store(), scan, {...SETTINGS, mirrorBudget: 2}, {now: () => db.now})
    for (const dir of ['a', 'b', 'c']) queue.request(`${dir}/file.iso`)
    await queue.idle()
    expect(scan.calls.map((c) => c.folder)).to.deep.equal(['a', 'b'])
    expect(queue.counters).to.include({mirrorScans: 2, overBudget: 1})
    db.now += 3_601_000
    queue.request('d/file.iso')
    await queue.idle()
    expect(scan.calls.map((c) => c.folder)).to.deep.equal(['a', 'b', 'd'])
  })

  it('waits behind a scan holding the mirror lock instead of failing, its budget slot given back meanwhile', async () => {
    const db = new FakeDatabase()
    db.mirrors = [db.mirrors[0]]
    let busy = 2
    const scan = (async () => (busy-- > 0 ? {ok: false, added: 0, busy: true, error: 'rsync: another scan of a.test is running'} : {ok: true, added: 3})) as unknown as FolderScanner
    const queue = new DemandScanQueue(db.store(), scan, {...SETTINGS, mirrorBudget: 1}, {now: () => db.now, busyWaitMs: 5})
    queue.request('pub/16.0/rel.iso')
    await queue.idle()
    expect(queue.counters).to.include({busyWaits: 2, mirrorScans: 1, mirrorScansFailed: 0, overBudget: 0, filesFound: 3})
    expect(db.runs.filter((r) => !r.refunded)).to.have.length(1)
    expect(db.folders).to.deep.equal([{folder: 'pub/16.0', mirrors: 1, failed: 0, found: 3}])
  })

  it('one client asking for old files spends half of a mirror budget at most: a release still gets the other half', async () => {
    const db = new FakeDatabase()
    db.mirrors = [db.mirrors[0]]
    db.recent = false
    const scan = scanner(0)
    const queue = new DemandScanQueue(db.store(), scan, {...SETTINGS, mirrorBudget: 4}, {now: () => db.now})
    for (let i = 0; i < 200; i++) queue.request(`junk/${i}/old.iso`, undefined, '198.51.100.0/24')
    await queue.idle()
    expect(scan.calls).to.have.length(2)
    expect(queue.counters.overBudget).to.equal(198)
    // An old folder left out by the junk share may be asked for again within a minute, not after the cooldown.
    db.now += (NO_CANDIDATE_RETRY_SECONDS + 1) * 1000
    queue.request('junk/199/old.iso', undefined, '198.51.100.0/24')
    await queue.idle()
    expect(queue.counters.overBudget).to.equal(199)
    // Old files asked for by many networks are wanted too.
    for (const network of ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24']) queue.request('popular/old.iso', undefined, network)
    await queue.idle()
    // A release: files indexed within the day.
    db.recent = true
    queue.request('pub/16.0/rel.iso', undefined, '198.51.100.0/24')
    await queue.idle()
    expect(scan.calls.slice(2).map((c) => c.folder)).to.deep.equal(['popular', 'pub/16.0'])
  })

  it('two replicas sharing the database scan a folder once: the second finds it claimed', async () => {
    const db = new FakeDatabase()
    const scan = scanner()
    const one = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    const two = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    one.request('pub/x.iso')
    two.request('pub/x.iso')
    await Promise.all([one.idle(), two.idle()])
    expect(scan.calls).to.have.length(2) // the two mirrors, once
    expect(one.counters.folderScans + two.counters.folderScans).to.equal(1)
    expect(one.counters.deduplicated + two.counters.deduplicated).to.equal(1)
  })

  it('a folder no mirror could hold is tried again after a minute, not the whole cooldown', async () => {
    const db = new FakeDatabase()
    db.mirrors = []
    const scan = scanner()
    const queue = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    queue.request('pub/x.iso')
    await queue.idle()
    expect(queue.counters).to.include({folderScans: 1, noCandidates: 1})
    db.mirrors = [mirrorRow(3, {identifier: 'c.test'})]
    queue.request('pub/x.iso')
    await queue.idle()
    expect(queue.counters.cooledDown).to.equal(1)
    db.now += (NO_CANDIDATE_RETRY_SECONDS + 1) * 1000
    queue.request('pub/x.iso')
    await queue.idle()
    expect(scan.calls).to.deep.equal([{mirror: 'c.test', folder: 'pub'}])
  })

  it('scans only the mirrors that carry the folder and the file, and those a mirrors rule names', async () => {
    const db = new FakeDatabase()
    db.mirrors = [
      mirrorRow(1, {identifier: 'all.test'}),
      mirrorRow(2, {identifier: 'other-base.test', base_path: 'other'}),
      mirrorRow(3, {identifier: 'no-iso.test', exclude_patterns: ['**/*.iso']}),
      mirrorRow(4, {identifier: 'pub-base.test', base_path: 'pub'}),
    ]
    const scan = scanner()
    const queue = new DemandScanQueue(db.store(), scan, SETTINGS, {now: () => db.now})
    queue.request('pub/15.6/x.iso')
    queue.request('top.iso', ['pub-base.test', 'all.test'])
    await queue.idle()
    expect(scan.calls).to.deep.equal([
      {mirror: 'all.test', folder: 'pub/15.6'},
      {mirror: 'pub-base.test', folder: 'pub/15.6'},
      {mirror: 'all.test', folder: ''},
    ])
  })

  it('drops what waits when stopped, and takes no more', async () => {
    const db = new FakeDatabase()
    const scan = scanner()
    const queue = new DemandScanQueue(db.store(), scan, {...SETTINGS, jobs: 1}, {now: () => db.now})
    queue.request('a/x.iso')
    queue.request('b/x.iso')
    await queue.stop()
    queue.request('c/x.iso')
    await queue.idle()
    expect(scan.calls.map((c) => c.folder)).to.not.include('b')
    expect(queue.counters.dropped).to.equal(1)
  })
})
