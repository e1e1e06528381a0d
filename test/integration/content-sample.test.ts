/**
 * The candidates of a content round (src/lib/probe/content-store.ts): one sample of the
 * hashed files per round, read by mtime and by random ids, from which each mirror takes the
 * files its own set holds, with what checks recorded of each copy (`mirror_file_check`).
 */
import {expect} from 'chai'
import {sql} from 'kysely'
import {contentCandidates, roundSample} from '../../src/lib/probe/content-store.js'
import {backend, useTestDatabase} from '../helpers/db.js'

const MiB = 1024 * 1024
const T = 1_700_000_000

describe(`content checks: one sample per round, each mirror its own files (${backend})`, () => {
  const store = useTestDatabase()
  let a: number
  let b: number

  before(async () => {
    const db = store.database.db
    const mirror = async (identifier: string) =>
      (
        await db
          .insertInto('mirror')
          .values({identifier, http_url: `http://${identifier}/`})
          .returning('id')
          .executeTakeFirstOrThrow()
      ).id
    a = await mirror('a.test')
    b = await mirror('b.test')
    // 60 files of 1 MiB in 256 KiB pieces, file i changed at T + i: a holds the even ones,
    // b every third; files 50..59 carry no usable pieces (never hashed, or hashed at another version).
    for (let i = 0; i < 60; i++) {
      const mirrors = [...(i % 2 === 0 ? [a] : []), ...(i % 3 === 0 ? [b] : [])]
      const hashed = i < 50
      await sql`
        INSERT INTO file (path, size, mtime, mirrors, piece_size, hashed_size, hashed_mtime, sha1_pieces)
        VALUES (${`pub/f${i}.iso`}, ${MiB}, ${T + i}, ${`{${mirrors.join(',')}}`}::smallint[], ${256 * 1024}, ${MiB}, ${hashed ? T + i : T - 1}, ${'ab'.repeat(80)})`.execute(db)
    }
    // Gaps in the ids, as removed files leave them.
    await sql`DELETE FROM file WHERE path IN ('pub/f10.iso', 'pub/f11.iso', 'pub/f12.iso')`.execute(db)
  })

  const index = (path: string) => Number(/f(\d+)\.iso$/.exec(path)![1])

  it('reads the hashed files once: the newest first, and a random draw of the others without repeats', async () => {
    const sample = await roundSample(store.database.db, 64 * MiB)
    const usable = Array.from({length: 50}, (_, i) => i).filter((i) => i < 10 || i > 12)
    expect(sample.recent.map((r) => index(r.path))).to.deep.equal([...usable].reverse())
    // 2,560 ids drawn over 60: every usable file is drawn (a miss has odds below 1e-17), once.
    expect(sample.random.map((r) => index(r.path)).sort((x, y) => x - y)).to.deep.equal(usable)
    expect(sample.random.map((r) => index(r.path))).to.not.deep.equal(usable)
  })

  it('gives each mirror only the files its set holds, at most what its budget could use, with their check state', async () => {
    const sample = await roundSample(store.database.db, 64 * MiB)
    const ofA = await contentCandidates(store.database.db, a, 64 * MiB, sample)
    const evens = [48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20, 18, 16, 14, 8, 6, 4, 2, 0]
    expect(ofA.held.map((c) => index(c.path)).sort((x, y) => y - x)).to.deep.equal(evens)
    expect(ofA.held.find((c) => c.path === 'pub/f48.iso')).to.include({size: MiB, mtime: T + 48, pieceSize: 256 * 1024})
    const ofB = await contentCandidates(store.database.db, b, 64 * MiB, sample)
    expect(ofB.held.map((c) => index(c.path)).sort((x, y) => y - x)).to.deep.equal([48, 45, 42, 39, 36, 33, 30, 27, 24, 21, 18, 15, 9, 6, 3, 0])
    // A budget of one smallest piece: one candidate per list (the newest, and one drawn at random).
    const one = await contentCandidates(store.database.db, a, 256 * 1024, sample)
    expect(one.held.map((c) => index(c.path))).to.include(48)
    expect(one.held.length).to.be.within(1, 2)
    // What a check recorded at the file's current version comes with the candidate; another version's record does not.
    const f48 = ofA.held.find((c) => c.path === 'pub/f48.iso')!.fileId
    const f46 = ofA.held.find((c) => c.path === 'pub/f46.iso')!.fileId
    await sql`INSERT INTO mirror_file_check (mirror_id, file_id, size, mtime, next_piece, whole_at) VALUES
      (${a}::smallint, ${f48}, ${MiB}, ${T + 48}, 2, now()), (${a}::smallint, ${f46}, ${MiB}, ${T + 1}, 3, now())`.execute(store.database.db)
    const again = await contentCandidates(store.database.db, a, 64 * MiB, sample)
    expect(again.held.find((c) => c.fileId === f48))
      .to.include({nextPiece: 2})
      .and.to.have.property('wholeAt')
      .that.is.a('number')
    expect(again.held.find((c) => c.fileId === f46)).to.not.have.property('nextPiece')
  })

  it('takes a copy that just arrived on a mirror (its file row written last), however old the file', async () => {
    await sql`UPDATE file SET mirrors = array_append(mirrors, ${b}::smallint) WHERE path = 'pub/f1.iso'`.execute(store.database.db)
    const sample = await roundSample(store.database.db, 256 * 1024)
    expect(sample.written.map((r) => index(r.path))[0]).to.equal(1)
    const one = await contentCandidates(store.database.db, b, 256 * 1024, sample)
    expect(one.held.map((c) => index(c.path))).to.include(1)
  })

  it('an empty file table gives an empty sample', async () => {
    await sql`DELETE FROM file`.execute(store.database.db)
    expect(await roundSample(store.database.db, 64 * MiB)).to.deep.equal({recent: [], written: [], random: []})
  })
})
