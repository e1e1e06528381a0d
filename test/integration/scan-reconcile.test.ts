import {expect} from 'chai'
import {sql} from 'kysely'
import type {Database} from '../../src/lib/db/index.js'
import {MbError} from '../../src/lib/errors.js'
import {upsertOriginFiles} from '../../src/lib/origin/index.js'
import {planScope, reconcileListing, type ReconcileMirror, type ReconcileOptions, recordScanFailure} from '../../src/lib/scan/reconcile.js'
import type {ListingEntry} from '../../src/lib/scan/types.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'

const T = 1_700_000_000

async function* listing(entries: Array<Partial<ListingEntry> & {path: string}>, failAfter?: number): AsyncGenerator<ListingEntry> {
  let n = 0
  for (const e of entries) {
    if (failAfter !== undefined && n++ >= failAfter) throw new MbError('connection reset by peer', {code: 'RSYNC_FAILED'})
    yield {type: 'file', size: 0, mtimePrecision: 1, ...e} as ListingEntry
  }
  if (failAfter !== undefined && n >= failAfter) throw new MbError('connection reset by peer', {code: 'RSYNC_FAILED'})
}

describe('scan reconciler', function () {
  let tdb: TestDatabase
  let database: Database

  async function addMirror(identifier: string, extra: Record<string, unknown> = {}): Promise<ReconcileMirror> {
    const row = await database.db
      .insertInto('mirror')
      .values({identifier, http_url: `http://${identifier}/`, ...extra} as any)
      .returning(['id', 'identifier', 'base_path', 'include_patterns', 'exclude_patterns'])
      .executeTakeFirstOrThrow()
    return row
  }

  async function holders(): Promise<Record<string, number[]>> {
    const rows = await database.db.selectFrom('file').select(['path', 'mirrors']).orderBy('path').execute()
    return Object.fromEntries(rows.map((r) => [r.path, [...r.mirrors].sort()]))
  }

  async function staleRows(mirrorId: number) {
    return (
      await sql<{
        path: string
        size: number
        mtime: number | null
      }>`SELECT f.path, s.size, s.mtime FROM mirror_file_stale s JOIN file f ON f.id = s.file_id WHERE s.mirror_id = ${mirrorId} ORDER BY f.path`.execute(database.db)
    ).rows
  }

  beforeEach(async () => {
    tdb = await createTestDatabase()
    database = await tdb.open()
    await upsertOriginFiles(database.db, [
      {path: 'a.iso', size: 100, mtime: T},
      {path: 'b.iso', size: 200, mtime: T},
      {path: 'c.iso', size: 300, mtime: T},
      {path: 'sub/d.txt', size: 4, mtime: T},
      {path: 'sub/e.txt', size: 5, mtime: T},
      {path: 'sub/deep/f.txt', size: 6, mtime: T},
      {path: 'other/g.txt', size: 7, mtime: T},
    ])
  })
  afterEach(async () => {
    await database.close()
    await tdb.drop()
  })

  it('matches equal size and mtime, records stale copies, leaves missing files out, clears needs_rescan', async () => {
    const m = await addMirror('m1', {needs_rescan: true})
    const result = await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'b.iso', size: 150, mtime: T}, // wrong size
        {path: 'c.iso', size: 300, mtime: T + 5}, // wrong mtime
        {path: 'sub/d.txt', size: 4, mtime: T + 3600}, // whole-hour offset: tolerated
        {path: 'sub/e.txt', size: 5, mtime: T - 7200},
        {path: 'sub', type: 'dir'},
        {path: 'not-on-origin', size: 1, mtime: T},
      ]),
      {mirror: m, protocol: 'rsync'},
    )
    expect(result).to.deep.include({files: 6, matched: 3, stale: 2, missing: 2, previous: 0, added: 3, removed: 0})
    const h = await holders()
    expect(h['a.iso']).to.deep.equal([m.id])
    expect(h['b.iso']).to.deep.equal([])
    expect(h['c.iso']).to.deep.equal([])
    expect(h['sub/d.txt']).to.deep.equal([m.id])
    expect(h['sub/e.txt']).to.deep.equal([m.id])
    expect(await staleRows(m.id)).to.deep.equal([
      {path: 'b.iso', size: 150, mtime: T},
      {path: 'c.iso', size: 300, mtime: T + 5},
    ])
    const row = await database.db.selectFrom('mirror').selectAll().where('id', '=', m.id).executeTakeFirstOrThrow()
    expect(row.last_scan_protocol).to.equal('rsync')
    expect(row.last_scan_files).to.equal(6)
    expect(row.last_scan_matched).to.equal(3)
    expect(row.last_scan_error).to.equal(null)
    expect(row.last_scan_ok_at).to.be.instanceOf(Date)
    expect(row.needs_rescan).to.equal(false)
  })

  type Entries = Array<Partial<ListingEntry> & {path: string}>

  // One mirror scanned once (after an optional full scan, `seed`); `holds` and `lacks` name the
  // origin paths that must and must not list the mirror afterwards.
  const scanCases: Array<{
    title: string
    identifier?: string
    mirror?: Record<string, unknown>
    seed?: Entries
    entries: Entries
    options?: (m: ReconcileMirror) => Partial<Omit<ReconcileOptions, 'mirror'>>
    result?: Record<string, unknown>
    holds: string[]
    lacks: string[]
    stale?: Array<{path: string; size: number; mtime: number}>
    keepsMirrorRecord?: boolean
  }> = [
    {
      title: 'matches a rounded index size by its range, and still records a copy outside it as stale',
      identifier: 'ranged',
      entries: [
        {path: 'a.iso', size: 102, sizeApproximate: true, sizeMin: 51, sizeMax: 153, mtime: T, mtimePrecision: 60}, // "0.1K" holds 100
        {path: 'b.iso', size: 102, sizeApproximate: true, sizeMin: 51, sizeMax: 153, mtime: T, mtimePrecision: 60}, // origin has 200
        {path: 'c.iso', size: 300, mtime: T},
      ],
      options: () => ({protocol: 'http'}),
      result: {matched: 2, stale: 1},
      holds: ['a.iso', 'c.iso'],
      lacks: ['b.iso'],
      stale: [{path: 'b.iso', size: 102, mtime: T}],
    },
    {
      title: 'honours the listing precision and accepts entries without mtime on size alone',
      entries: [
        {path: 'a.iso', size: 100, mtime: T - (T % 60), mtimePrecision: 60}, // minute precision, truncated
        {path: 'b.iso', size: 200, mtime: undefined},
        {path: 'c.iso', size: 300, mtime: T - 120, mtimePrecision: 60}, // two minutes off: stale
      ],
      options: () => ({protocol: 'http'}),
      result: {matched: 2, stale: 1},
      holds: ['a.iso', 'b.iso'],
      lacks: ['c.iso'],
    },
    {
      title: 'maps mirror paths through base_path',
      identifier: 'sub-only',
      mirror: {base_path: 'sub'},
      entries: [
        {path: 'd.txt', size: 4, mtime: T},
        {path: 'deep/f.txt', size: 6, mtime: T},
        {path: 'a.iso', size: 100, mtime: T},
      ],
      result: {matched: 2, missing: 1},
      holds: ['sub/d.txt', 'sub/deep/f.txt'],
      lacks: ['a.iso'], // mirror's a.iso would be origin sub/a.iso
    },
    {
      title: 'applies global and per-mirror include/exclude globs on origin paths',
      mirror: {exclude_patterns: ['**/*.txt']},
      entries: [
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'b.iso', size: 200, mtime: T},
        {path: 'sub/d.txt', size: 4, mtime: T},
        {path: 'other/g.txt', size: 7, mtime: T},
      ],
      options: () => ({include: ['*.iso', 'sub/**'], exclude: ['b.*']}),
      result: {files: 4, considered: 1, matched: 1},
      holds: ['a.iso'],
      lacks: ['b.iso', 'sub/d.txt', 'other/g.txt'],
    },
    {
      title: '--dir rescans one subtree and keeps records outside it',
      seed: [
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'sub/d.txt', size: 4, mtime: T},
        {path: 'sub/e.txt', size: 5, mtime: T},
        {path: 'other/g.txt', size: 7, mtime: T},
      ],
      entries: [
        {path: 'sub/d.txt', size: 4, mtime: T},
        {path: 'sub/deep/f.txt', size: 6, mtime: T},
      ],
      options: (m) => ({plan: planScope(m.base_path, 'sub'), minRatio: 0}),
      result: {subdir: 'sub', previous: 2, matched: 2, added: 1, removed: 1},
      holds: ['a.iso', 'other/g.txt', 'sub/d.txt', 'sub/deep/f.txt'],
      lacks: ['sub/e.txt'],
    },
    {
      title: 'a one-folder scan replaces only the files directly in the folder and leaves the mirror record alone',
      seed: [
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'sub/e.txt', size: 5, mtime: T},
        {path: 'sub/deep/f.txt', size: 6, mtime: T},
      ],
      // A stray deeper entry (a lister that recursed anyway) is ignored, not taken as proof.
      entries: [
        {path: 'sub/d.txt', size: 4, mtime: T},
        {path: 'sub/deep', type: 'dir'},
        {path: 'sub/deep/x.txt', size: 1, mtime: T},
      ],
      options: (m) => ({plan: planScope(m.base_path, 'sub', false), minRatio: 0, enable: true}),
      result: {subdir: 'sub', considered: 1, previous: 1, matched: 1, added: 1, removed: 1, missing: 1, enabled: true, enabledByScan: false},
      holds: ['a.iso', 'sub/d.txt', 'sub/deep/f.txt'], // sub/deep/f.txt is below the folder: untouched
      lacks: ['sub/e.txt'],
      keepsMirrorRecord: true,
    },
    {
      title: 'a one-folder scan of the top folder touches only top-level files',
      seed: [
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'sub/d.txt', size: 4, mtime: T},
      ],
      entries: [{path: 'b.iso', size: 200, mtime: T}],
      options: () => ({plan: planScope('', '', false), minRatio: 0}),
      holds: ['b.iso', 'sub/d.txt'],
      lacks: ['a.iso'],
    },
  ]

  for (const c of scanCases) {
    it(c.title, async () => {
      const m = await addMirror(c.identifier ?? 'm1', c.mirror)
      if (c.seed) await reconcileListing(database, listing(c.seed), {mirror: m, protocol: 'rsync'})
      const mirrorRecord = () => database.db.selectFrom('mirror').select(['last_scan_at', 'last_scan_files']).where('id', '=', m.id).executeTakeFirstOrThrow()
      const before = c.keepsMirrorRecord ? await mirrorRecord() : undefined
      const result = await reconcileListing(database, listing(c.entries), {protocol: 'rsync', ...c.options?.(m), mirror: m})
      if (c.result) expect(result).to.deep.include(c.result)
      const h = await holders()
      for (const path of c.holds) expect(h[path], path).to.deep.equal([m.id])
      for (const path of c.lacks) expect(h[path], path).to.deep.equal([])
      if (c.stale) expect(await staleRows(m.id)).to.deep.equal(c.stale)
      if (c.keepsMirrorRecord) expect(await mirrorRecord()).to.deep.equal(before)
    })
  }

  it('a rescan replaces the set: files gone from the mirror leave it, other mirrors are untouched', async () => {
    const m1 = await addMirror('m1')
    const m2 = await addMirror('m2')
    await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'b.iso', size: 200, mtime: T},
      ]),
      {mirror: m2, protocol: 'rsync'},
    )
    await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'b.iso', size: 200, mtime: T},
        {path: 'c.iso', size: 1, mtime: T},
      ]),
      {mirror: m1, protocol: 'rsync'},
    )
    expect(await staleRows(m1.id)).to.have.length(1)
    const again = await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'c.iso', size: 300, mtime: T},
      ]),
      {mirror: m1, protocol: 'rsync'},
    )
    expect(again).to.deep.include({previous: 2, matched: 2, added: 1, removed: 1, stale: 0})
    const h = await holders()
    expect(h['a.iso']).to.deep.equal([m1.id, m2.id].sort())
    expect(h['b.iso']).to.deep.equal([m2.id])
    expect(h['c.iso']).to.deep.equal([m1.id])
    expect(await staleRows(m1.id)).to.deep.equal([])
  })

  it('refuses a scan that finds fewer than min_ratio of before, changing nothing', async () => {
    const m = await addMirror('m1')
    const full = [
      {path: 'a.iso', size: 100, mtime: T},
      {path: 'b.iso', size: 200, mtime: T},
      {path: 'c.iso', size: 300, mtime: T},
      {path: 'sub/d.txt', size: 4, mtime: T},
    ]
    await reconcileListing(database, listing(full), {mirror: m, protocol: 'rsync'})
    const before = await holders()
    let error: unknown
    try {
      await reconcileListing(database, listing([{path: 'a.iso', size: 100, mtime: T}]), {mirror: m, protocol: 'rsync', minRatio: 0.5})
    } catch (e) {
      error = e
    }
    expect(error).to.be.instanceOf(MbError)
    expect((error as MbError).code).to.equal('SCAN_TOO_FEW')
    expect((error as MbError).message).to.match(/matched only 1 file\(s\) where it matched 4 before/)
    expect(await holders()).to.deep.equal(before)
    // half is enough
    const ok = await reconcileListing(database, listing(full.slice(0, 2)), {mirror: m, protocol: 'rsync', minRatio: 0.5})
    expect(ok.matched).to.equal(2)
  })

  it('plans listing subdirs against base_path', () => {
    expect(planScope('', 'sub')).to.deep.equal({listSubdir: 'sub', scope: 'sub', recursive: true})
    expect(planScope('sub', 'sub/deep')).to.deep.equal({listSubdir: 'deep', scope: 'sub/deep', recursive: true})
    expect(planScope('sub/deep', 'sub')).to.deep.equal({listSubdir: '', scope: 'sub', recursive: true})
    expect(planScope('sub', 'sub/deep', false)).to.deep.equal({listSubdir: 'deep', scope: 'sub/deep', recursive: false})
    expect(planScope('sub', 'sub', false)).to.deep.equal({listSubdir: '', scope: 'sub', recursive: false})
    expect(() => planScope('sub/deep', 'sub', false)).to.throw(/holds no file directly in --dir sub/)
    expect(() => planScope('sub', '', false)).to.throw(/holds no file directly/)
    expect(() => planScope('sub', 'other')).to.throw(/does not overlap/)
    expect(() => planScope('', '../etc')).to.throw(/no '.' or '..'/)
  })

  it('a listing that fails halfway changes nothing; the failure is recorded', async () => {
    const m = await addMirror('m1')
    await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'b.iso', size: 1, mtime: T},
      ]),
      {mirror: m, protocol: 'rsync'},
    )
    const before = await holders()
    const staleBefore = await staleRows(m.id)
    let error: unknown
    try {
      await reconcileListing(
        database,
        listing(
          [
            {path: 'c.iso', size: 300, mtime: T},
            {path: 'sub/d.txt', size: 4, mtime: T},
          ],
          1,
        ),
        {mirror: m, protocol: 'rsync', minRatio: 0},
      )
    } catch (e) {
      error = e
    }
    expect((error as Error).message).to.equal('connection reset by peer')
    await recordScanFailure(database.db, m.id, 'rsync: connection reset by peer', 'rsync')
    expect(await holders()).to.deep.equal(before)
    expect(await staleRows(m.id)).to.deep.equal(staleBefore)
    const row = await database.db.selectFrom('mirror').selectAll().where('id', '=', m.id).executeTakeFirstOrThrow()
    expect(row.last_scan_error).to.equal('rsync: connection reset by peer')
    expect(row.last_scan_matched).to.equal(1)
  })

  it('refuses a second scan of the same mirror while one runs', async () => {
    const m = await addMirror('m1')
    let release!: () => void
    const gate = new Promise<void>((resolve) => (release = resolve))
    let started!: () => void
    const running = new Promise<void>((resolve) => (started = resolve))
    async function* slow(): AsyncGenerator<ListingEntry> {
      yield {path: 'a.iso', type: 'file', size: 100, mtime: T, mtimePrecision: 1}
      started()
      await gate
    }
    const first = reconcileListing(database, slow(), {mirror: m, protocol: 'rsync'})
    await running
    let error: unknown
    try {
      await reconcileListing(database, listing([{path: 'a.iso', size: 100, mtime: T}]), {mirror: m, protocol: 'rsync'})
    } catch (e) {
      error = e
    }
    release()
    expect((error as MbError).code).to.equal('SCAN_BUSY')
    expect((error as MbError).message).to.match(/being scanned by another process/)
    expect((await first).matched).to.equal(1)
    // and the lock is released afterwards
    expect((await reconcileListing(database, listing([{path: 'a.iso', size: 100, mtime: T}]), {mirror: m, protocol: 'rsync'})).matched).to.equal(1)
  })

  it("counts a file listed again through a directory symlink of the origin once, and states the mirror's real enabled state", async () => {
    await database.db.insertInto('file_link').values({path: 'latest', target: 'sub', directory: true}).execute()
    const m = await addMirror('m1')
    const result = await reconcileListing(
      database,
      listing([
        {path: 'a.iso', size: 100, mtime: T},
        {path: 'sub/d.txt', size: 4, mtime: T},
        {path: 'sub/e.txt', size: 5, mtime: T},
        // An HTTP or FTP listing follows `latest -> sub`: the same two files again.
        {path: 'latest/d.txt', size: 4, mtime: T},
        {path: 'latest/e.txt', size: 5, mtime: T},
        {path: 'latestish/x.txt', size: 1, mtime: T},
      ]),
      {mirror: m, protocol: 'http'},
    )
    expect(result).to.include({files: 4, matched: 3, enabled: true, enabledByScan: false})
    const off = await addMirror('m2', {enabled: false})
    expect(await reconcileListing(database, listing([{path: 'a.iso', size: 100, mtime: T}]), {mirror: off, protocol: 'rsync'})).to.include({enabled: false, enabledByScan: false})
  })

  it('--enable enables a mirror whose scan matched files', async () => {
    const m = await addMirror('m1', {enabled: false})
    const result = await reconcileListing(database, listing([{path: 'a.iso', size: 100, mtime: T}]), {mirror: m, protocol: 'rsync', enable: true})
    expect(result).to.include({enabled: true, enabledByScan: true})
    const row = await database.db.selectFrom('mirror').select('enabled').where('id', '=', m.id).executeTakeFirstOrThrow()
    expect(row.enabled).to.equal(true)
  })
})
