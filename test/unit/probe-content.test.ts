import {expect} from 'chai'
import {type ContentCandidate, contentVerdict, parseContentRange, pieceCount, pieceDigest, pieceRange, planContentChecks} from '../../src/lib/probe/content.js'

const KiB = 1024
const MiB = 1024 * KiB

function file(fileId: number, size: number, pieceSize = 256 * KiB, extra: Partial<ContentCandidate> = {}): ContentCandidate {
  return {fileId, path: `f${fileId}`, size, mtime: 1_700_000_000 + fileId, pieceSize, ...extra}
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

describe('probe --content: planning a round (whole copies, order and budget)', () => {
  it('re-checks corrupt copies first, on the piece that failed alone', () => {
    const bad = file(1, 10 * MiB, 1 * MiB, {badPiece: 7})
    const plan = planContentChecks({bad: [bad], held: [file(2, MiB, MiB)]}, 64 * MiB)
    expect(plan.map((p) => [p.candidate.fileId, p.piece, p.pieces, p.start, p.end])).to.deep.equal([
      [1, 7, 1, 7 * MiB, 8 * MiB - 1],
      [2, 0, 1, 0, MiB - 1],
    ])
  })

  it('checks a copy whole: every piece from where the last check stopped, the shorter last one included', () => {
    const plan = planContentChecks({bad: [], held: [file(1, 12 * MiB + 5, MiB)]}, 64 * MiB)
    expect(plan.map((p) => [p.piece, p.pieces, p.start, p.end])).to.deep.equal([[0, 13, 0, 12 * MiB + 4]])
    const resumed = planContentChecks({bad: [], held: [file(1, 12 * MiB + 5, MiB, {nextPiece: 10})]}, 64 * MiB)
    expect(resumed.map((p) => [p.piece, p.pieces, p.start, p.end])).to.deep.equal([[10, 3, 10 * MiB, 12 * MiB + 4]])
  })

  it('cuts a span at a piece boundary within the budget, so that the next round goes on from there', () => {
    const plan = planContentChecks({bad: [], held: [file(1, 10 * MiB, MiB)]}, 3.5 * MiB)
    expect(plan.map((p) => [p.piece, p.pieces, p.length])).to.deep.equal([[0, 3, 3 * MiB]])
  })

  it('takes copies not checked whole first (newest, then most downloaded), then those checked whole longest ago', () => {
    const held = [
      file(1, MiB, MiB, {wholeAt: 2000}),
      file(2, MiB, MiB, {wholeAt: 1000}),
      {...file(3, MiB, MiB), mtime: 10, downloads: 1},
      {...file(4, MiB, MiB), mtime: 10, downloads: 50},
      {...file(5, MiB, MiB), mtime: 20},
    ]
    expect(planContentChecks({bad: [], held}, 64 * MiB).map((p) => p.candidate.fileId)).to.deep.equal([5, 4, 3, 2, 1])
    expect(planContentChecks({bad: [], held}, 3 * MiB).map((p) => p.candidate.fileId)).to.deep.equal([5, 4, 3])
  })

  it('checks each file once, and passes over a copy whose next piece does not fit for smaller ones after it', () => {
    const a = file(1, MiB)
    expect(planContentChecks({bad: [file(1, MiB, 256 * KiB, {badPiece: 0})], held: [a, file(2, MiB)]}, 64 * MiB).map((p) => p.candidate.fileId)).to.deep.equal([1, 2])
    const big = {...file(1, 16 * MiB, 4 * MiB), mtime: 2_000_000_000}
    const small = file(2, 100 * KiB)
    expect(planContentChecks({bad: [], held: [big, small]}, 1 * MiB).map((p) => p.candidate.fileId)).to.deep.equal([2])
    expect(planContentChecks({bad: [], held: [big]}, 0)).to.deep.equal([])
    expect(planContentChecks({bad: [], held: [file(3, 0)]}, MiB)).to.deep.equal([])
  })

  it('starts a pass at piece 0 when the cursor lies past the end, and re-checks the last piece when the bad piece no longer exists', () => {
    expect(planContentChecks({bad: [], held: [file(1, MiB, 256 * KiB, {nextPiece: 9})]}, 64 * MiB)[0]).to.include({piece: 0, pieces: 4})
    expect(planContentChecks({bad: [file(1, MiB, 256 * KiB, {badPiece: 9})], held: []}, 64 * MiB)[0]).to.include({piece: 3, pieces: 1})
  })
})

describe('probe --content: verdicts', () => {
  const check = {piece: 0, start: 0, end: 9, length: 10, size: 100}
  const good = 'a'.repeat(40)

  it('ok when every piece hashes to the index digest, corrupt at the first that does not', () => {
    const answer = {status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 10}
    expect(contentVerdict(check, [good], {...answer, sha1s: [good.toUpperCase()]}).verdict).to.equal('ok')
    const bad = contentVerdict(check, [good], {...answer, sha1s: ['b'.repeat(40)]})
    expect(bad).to.deep.equal({verdict: 'corrupt', detail: `piece 0: SHA-1 ${'b'.repeat(40)}, index ${good}`, badPiece: 0})
    const span = contentVerdict({...check, piece: 4}, [good, good, good], {...answer, sha1s: [good, good, 'c'.repeat(40)]})
    expect(span).to.include({verdict: 'corrupt', badPiece: 6})
  })

  it('says what else happened: missing, another size, no range, short or long bodies, wrong ranges, errors (all unchecked)', () => {
    const v = (answer: Parameters<typeof contentVerdict>[2]) => contentVerdict(check, [good], answer).verdict
    expect(v({status: 404, bytes: 0})).to.equal('missing')
    expect(v({status: 410, bytes: 0})).to.equal('missing')
    expect(v({status: 200, bytes: 0})).to.equal('no_range')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: 99}, bytes: 10, sha1s: [good]})).to.equal('size_differs')
    expect(v({status: 206, contentRange: {start: 0, end: 9, total: null}, bytes: 10, sha1s: [good]})).to.equal('ok')
    expect(v({status: 206, contentRange: {start: 1, end: 10, total: 100}, bytes: 10, sha1s: [good]})).to.equal('error')
    expect(v({status: 206, bytes: 10, sha1s: [good]})).to.equal('error')
    expect(contentVerdict(check, [good], {status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 4}).detail).to.match(/^short body: 4 bytes/)
    expect(contentVerdict(check, [good], {status: 206, contentRange: {start: 0, end: 9, total: 100}, bytes: 11}).detail).to.match(/^a body longer than the range/)
    expect(contentVerdict(check, [good], {status: 503, bytes: 0}).detail).to.equal('HTTP 503; not checked')
    expect(contentVerdict(check, [good], {status: null, bytes: 0, failure: 'redirect_loop'})).to.deep.equal({verdict: 'error', detail: 'redirect_loop'})
  })

  it('parses Content-Range (RFC 9110 §14.4)', () => {
    expect(parseContentRange('bytes 0-9/100')).to.deep.equal({start: 0, end: 9, total: 100})
    expect(parseContentRange('bytes 5-9/*')).to.deep.equal({start: 5, end: 9, total: null})
    expect(parseContentRange('items 0-9/100')).to.equal(undefined)
    expect(parseContentRange(undefined)).to.equal(undefined)
  })
})
