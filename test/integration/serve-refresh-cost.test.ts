import {expect} from 'chai'
import {sql} from 'kysely'
import type {Database, ReadView} from '../../src/lib/db/index.js'
import {loadSnapshot, refreshSnapshot, type Snapshot} from '../../src/lib/serve/snapshot/snapshot.js'
import {readMarks} from '../../src/lib/serve/snapshot/marks.js'
import {backend, useTestDatabase} from '../helpers/db.js'

/** What a table (`file` unless said) cost a refresh, from the actual plans of its queries. */
interface FileReads {
  /** Rows read (returned by a scan node, or read and then filtered out). */
  rows: number
  /** Sequential scans. */
  seqScans: number
}

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Actual Rows'?: number
  'Actual Loops'?: number
  'Rows Removed by Filter'?: number
  'Rows Removed by Index Recheck'?: number
  Plans?: PlanNode[]
}

function addReads(node: PlanNode, reads: FileReads, table = 'file'): void {
  if (node['Relation Name'] === table) {
    if (node['Node Type'] === 'Seq Scan') reads.seqScans++
    reads.rows += (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1) + (node['Rows Removed by Filter'] ?? 0) + (node['Rows Removed by Index Recheck'] ?? 0)
  }
  for (const child of node.Plans ?? []) addReads(child, reads, table)
}

/** Reads of each table, by name. */
type TableReads = Record<string, FileReads>

/**
 * `view`, with every SELECT first run under EXPLAIN ANALYZE (the same view, so the same
 * snapshot and settings), its reads of each table of `reads` added there.
 */
function measuredView(view: ReadView, reads: TableReads): ReadView {
  return {
    async query(text, params) {
      if (/^\s*SELECT/i.test(text)) {
        const [[plan]] = await view.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params)
        const parsed = (typeof plan === 'string' ? JSON.parse(plan) : plan) as Array<{Plan: PlanNode}>
        for (const [table, tally] of Object.entries(reads)) addReads(parsed[0].Plan, tally, table)
      }
      return view.query(text, params)
    },
    parallel: (tasks) => view.parallel(tasks.map((task) => (half: ReadView) => task(measuredView(half, reads)))),
  }
}

/** `database`, its read views measured into `reads` (the `file` table's) and counted in `views.opened`. */
function measured(database: Database, reads: FileReads, views = {opened: 0}): Database {
  return {
    ...database,
    readSnapshot: (fn) => {
      views.opened++
      return database.readSnapshot((view) => fn(measuredView(view, {file: reads})))
    },
  }
}

const FILES = 100_000

describe(`serve refresh cost follows change, not size (${backend})`, function () {
  this.timeout(300_000)
  const store = useTestDatabase()
  let snapshot: Snapshot

  async function refreshReads(): Promise<{reads: FileReads; updated: number; deleted: number; views: number}> {
    const reads = {rows: 0, seqScans: 0}
    const views = {opened: 0}
    const result = await refreshSnapshot(measured(store.database, reads, views), snapshot)
    expect(result.reload, 'refreshed incrementally').to.equal(undefined)
    return {reads, updated: result.updated, deleted: result.deleted, views: views.opened}
  }

  /** The reads of the poll's one statement (./marks.ts) against the snapshot, by table. */
  async function pollReads(): Promise<TableReads> {
    const reads: TableReads = {file: {rows: 0, seqScans: 0}, file_tombstone: {rows: 0, seqScans: 0}}
    await store.database.readSnapshot((view) => readMarks(measuredView(view, reads), snapshot.xmin!))
    return reads
  }

  async function expectIdleAndOneRowCheap(path: string): Promise<void> {
    const none = {rows: 0, seqScans: 0}
    expect(await pollReads(), 'the poll').to.deep.equal({file: none, file_tombstone: none})
    const idle = await refreshReads()
    // The poll alone: no read view, so no file query at all.
    expect(idle).to.deep.equal({reads: none, updated: 0, deleted: 0, views: 0})
    await sql`UPDATE file SET size = size + 1 WHERE path = ${path}`.execute(store.database.db)
    const poll = await pollReads()
    expect(poll.file.seqScans + poll.file_tombstone.seqScans, 'the poll after a change').to.equal(0)
    expect(poll.file.rows, 'the poll after a change').to.be.at.most(1)
    const one = await refreshReads()
    expect(one.updated).to.equal(1)
    expect(one.reads.seqScans).to.equal(0)
    expect(one.reads.rows).to.be.at.most(4)
    expect(snapshot.files.get(path)?.size).to.equal(Number(path.slice(1, -4)) + 1)
    expect((await refreshReads()).reads).to.deep.equal({rows: 0, seqScans: 0})
  }

  before(async () => {
    // One transaction, as `mb index` writes a new tree: every row carries the same txid.
    await sql`INSERT INTO file (path, size, mtime, mirrors) SELECT 'f' || g || '.iso', g, 1, '{}' FROM generate_series(1, ${FILES}) g`.execute(store.database.db)
    snapshot = await loadSnapshot(store.database)
    expect(snapshot.files.size).to.equal(FILES)
  })

  it('reads no file row when idle and a handful for a one-row change, before the table is analyzed', async () => {
    await expectIdleAndOneRowCheap('f10.iso')
  })

  it('the same once the statistics say that every row carries one txid', async () => {
    await sql`ANALYZE file`.execute(store.database.db)
    await expectIdleAndOneRowCheap('f20.iso')
  })

  it('the same after VACUUM FREEZE (txid is a 64-bit column, not the row header xmin that freezing rewrites)', async () => {
    await sql`VACUUM (FREEZE, ANALYZE) file`.execute(store.database.db)
    await expectIdleAndOneRowCheap('f30.iso')
  })

  it('the same for a tree written in many transactions, and a deletion reads no file row', async () => {
    for (let batch = 0; batch < 10; batch++) {
      await sql`UPDATE file SET mtime = 2 WHERE id % 10 = ${batch} AND id <= 5000`.execute(store.database.db)
    }
    const many = await refreshReads()
    expect(many.updated).to.equal(5000)
    expect(many.reads.seqScans).to.equal(0)
    expect(many.reads.rows).to.be.at.most(3 * 5000 + 10)
    await sql`ANALYZE file`.execute(store.database.db)
    await expectIdleAndOneRowCheap('f40.iso')
    await sql`DELETE FROM file WHERE path = 'f50.iso'`.execute(store.database.db)
    expect(await refreshReads()).to.deep.equal({reads: {rows: 0, seqScans: 0}, updated: 0, deleted: 1, views: 1})
    expect(snapshot.files.has('f50.iso')).to.equal(false)
  })
})
