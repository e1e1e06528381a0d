import {expect} from 'chai'
import {type ContentCandidate, contentVerdict, parseContentRange, pieceCount, pieceDigest, pieceRange, planContentChecks} from '../../src/lib/probe/content.js'

const KiB = 1024
const MiB = 1024 * KiB

function file(fileId: number, size: number, pieceSize = 256 * KiB, extra: Partial<ContentCandidate> = {}): ContentCandidate {
  return {fileId, path: `f${fileId}`, size, mtime: 1_700_000_000 + fileId, pieceSize, ...extra}
}

/** A fixed sequence of "random" numbers, repeated. */
function sequence(...values: number[]): () => number {
  let i = 0
  return () => values[i++ % values.length]
}

describe('probe --content: pieces', () => {
  it('counts pieces, the last one shorter', () => {
    expect(pieceCount(0, 256 * KiB)).to.equal(0)
    expect(pieceCount(1, 256 * KiB)).to.equal(1)
    expect(pieceCount(256 * KiB, 256 * KiB)).to.equal(1)
    expect(pieceCount(256 * KiB + 1, 256 * KiB)).to.equal(2)
  })

  it('gives inclusive byte ranges, the last piece ending at the end of the file', () => {
    expect(pieceRange(600 * KiB, 256 * KiB, 0)).to.deep.equal({start: 0, end: 256 * KiB - 1, length: 256 * KiB})
    expect(pieceRange(600 * KiB, 256 * KiB, 2)).to.deep.equal({start: 512 * KiB, end: 600 * KiB - 1, length: 88 * KiB})
    expect(pieceRange(10, 256 * KiB, 0)).to.deep.equal({start: 0, end: 9, length: 10})
    expect(() => pieceRange(600 * KiB, 256 * KiB, 3)).to.throw(RangeError)
    expect(() => pieceRange(0, 256 * KiB, 0)).to.throw(RangeError)
  })

  it('reads the digest of one piece out of the concatenated list', () => {
    const list = `${'a'.repeat(40)}${'B'.repeat(40)}`
    expect(pieceDigest(list, 1)).to.equal('b'.repeat(40))
    expect(pieceDigest(list, 2)).to.equal(undefined)
  })
})

describe('probe --content: planning a round (sampling order and budget)', () => {
  it('re-checks corrupt copies first, on the piece that failed', () => {
    const bad = file(1, 10 * MiB, 1 * MiB, {badPiece: 7})
    const plan = planContentChecks({bad: [bad], recent: [file(2, MiB, MiB)], random: []}, 64 * MiB, () => 0)
    expect(plan.map((p) => [p.candidate.fileId, p.piece, p.start, p.end])).to.deep.equal([
      [1, 7, 7 * MiB, 8 * MiB - 1],
      [2, 0, 0, MiB - 1],
    ])
  })

  it('spends at most half the budget on the most recent files, the rest at random, never over budget', () => {
    const recent = Array.from({length: 10}, (_, i) => file(100 + i, 4 * MiB, MiB))
    const random = Array.from({length: 10}, (_, i) => file(200 + i, 4 * MiB, MiB))
    const plan = planContentChecks({bad: [], recent, random}, 8 * MiB, () => 0.5)
    expect(plan.filter((p) => p.candidate.fileId < 200)).to.have.length(4)
    expect(plan.filter((p) => p.candidate.fileId >= 200)).to.have.length(4)
    expect(plan.reduce((n, p) => n + p.length, 0)).to.equal(8 * MiB)
    expect(plan.every((p) => p.piece === 2)).to.equal(true)
  })

  it('checks each file once, even when it is both recent and drawn at random', () => {
    const a = file(1, MiB)
    const plan = planContentChecks({bad: [], recent: [a], random: [a, file(2, MiB)]}, 64 * MiB)
    expect(plan.map((p) => p.candidate.fileId)).to.deep.equal([1, 2])
  })

  it('passes over a piece that does not fit and takes smaller ones after it', () => {
    const big = file(1, 16 * MiB, 4 * MiB)
    const small = file(2, 100 * KiB)
    const plan = planContentChecks({bad: [], recent: [], random: [big, small]}, 1 * MiB)
    expect(plan.map((p) => p.candidate.fileId)).to.deep.equal([2])
    expect(planContentChecks({bad: [], recent: [], random: [big]}, 0)).to.deep.equal([])
  })

  it('chooses the piece at random over the whole file, the last one included, and skips empty files', () => {
    const f = file(1, 600 * KiB)
    const pieces = [0, 0.34, 0.99].map((r) => planContentChecks({bad: [], recent: [], random: [f]}, MiB, sequence(r))[0].piece)
    expect(pieces).to.deep.equal([0, 1, 2])
    expect(planContentChecks({bad: [], recent: [file(3, 0)], random: []}, MiB)).to.deep.equal([])
  })

  it('falls back to a random piece when the recorded bad piece no longer exists', () => {
    const plan = planContentChecks({bad: [file(1, MiB, 256 * KiB, {badPiece: 9})], recent: [], random: []}, 64 * MiB, () => 0.99)
    expect(plan[0].piece).to.equal(3)
  })
})

describe('probe --content: verdicts', () => {
  const check = {start: 0, end: 9, length: 10, size: 100}
  const good = 'a'.repeat(40)

  it('ok when the piece hashes to the index digest, corrupt when not', () => {
    const answer = {status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 10}
    expect(contentVerdict(check, good, {...answer, sha1: good.toUpperCase()}).verdict).to.equal('ok')
    const bad = contentVerdict(check, good, {...answer, sha1: 'b'.repeat(40)})
    expect(bad.verdict).to.equal('corrupt')
    expect(bad.detail).to.equal(`SHA-1 ${'b'.repeat(40)}, index ${good}`)
  })

  it('says what else happened: missing, another size, no range, short bodies, wrong ranges, errors', () => {
    const v = (answer: Parameters<typeof contentVerdict>[2]) => contentVerdict(check, good, answer).verdict
    expect(v({status: 404, bytes: 0})).to.equal('missing')
    expect(v({status: 410, bytes: 0})).to.equal('missing')
    expect(v({status: 200, bytes: 0})).to.equal('no_range')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: 99}, bytes: 10, sha1: good})).to.equal('size_differs')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: null}, bytes: 10, sha1: good})).to.equal('ok')
    expect(v({status: 206, contentRange: {start: 1, end: 10, total: 100}, bytes: 10, sha1: good})).to.equal('error')
    expect(v({status: 206, bytes: 10, sha1: good})).to.equal('error')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 4})).to.equal('error')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 11})).to.equal('error')
    expect(v({status: 500, bytes: 0})).to.equal('error')
    expect(contentVerdict(check, good, {status: null, bytes: 0, failure: 'timeout'})).to.deep.equal({verdict: 'error', detail: 'timeout'})
  })

  it('parses Content-Range (RFC 9110 §14.4)', () => {
    expect(parseContentRange('bytes 0-9/100')).to.deep.equal({start: 0, end: 9, total: 100})
    expect(parseContentRange('bytes 5-9/*')).to.deep.equal({start: 5, end: 9, total: null})
    expect(parseContentRange('items 0-9/100')).to.equal(undefined)
    expect(parseContentRange(undefined)).to.equal(undefined)
  })
})
