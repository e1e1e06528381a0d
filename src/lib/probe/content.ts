/**
 * Content checks, the pure part: which copies a round checks on one mirror within its byte
 * budget, which piece of each, the byte range of that piece, and the verdict on what the
 * mirror sent. The network and the database are in ./content-check.ts.
 *
 * A copy is checked by one piece of the file's SHA-1 piece list (`file.sha1_pieces`, written
 * by `mb index --hashes`: the hex SHA-1 of each `piece_size` piece, concatenated; the last
 * piece may be shorter). One random piece per copy and round catches a copy corrupted
 * anywhere in time, at the cost of one piece per file instead of the whole file.
 *
 * Order within a round: copies found corrupt before (each is re-checked on the piece that
 * failed, so that a repaired copy comes back), then the most recently changed files (a new
 * version is where a half-finished or damaged sync shows) up to half the budget, then files
 * in random order, so that over many rounds every copy is checked. A piece that does not fit
 * in what is left of the budget is passed over; smaller ones after it may still fit.
 */

/** A file a mirror holds (or held, before a check found it corrupt) with usable SHA-1 pieces. Bytes; mtime in Unix seconds. */
export interface ContentCandidate {
  fileId: number
  path: string
  size: number
  mtime: number
  /** Bytes per piece (`file.piece_size`). */
  pieceSize: number
  /** Set when an earlier check found this copy corrupt: the piece that did not match. */
  badPiece?: number
}

/** One planned check: a piece of a candidate, by its byte range (inclusive, as `Range: bytes=start-end` says it, RFC 9110 §14.1.2). */
export interface PlannedCheck {
  candidate: ContentCandidate
  /** 0-based piece index. */
  piece: number
  /** First and last byte of the piece (inclusive). */
  start: number
  end: number
  /** end - start + 1. */
  length: number
}

/** The candidates of one mirror as the store found them (see ./content-check.ts). */
export interface CandidateLists {
  /** Copies found corrupt before, at the file's current version. */
  bad: ContentCandidate[]
  /** Held files, most recently changed first. */
  recent: ContentCandidate[]
  /** Held files in random order. */
  random: ContentCandidate[]
}

/** Number of pieces of a file of `size` bytes in pieces of `pieceSize` bytes (0 for an empty file). */
export function pieceCount(size: number, pieceSize: number): number {
  if (!(size > 0) || !(pieceSize > 0)) return 0
  return Math.ceil(size / pieceSize)
}

/**
 * The byte range of piece `piece` (0-based) of a file of `size` bytes cut in `pieceSize`
 * pieces: the last piece ends at the end of the file.
 * @throws RangeError when the file has no such piece
 */
export function pieceRange(size: number, pieceSize: number, piece: number): {start: number; end: number; length: number} {
  const count = pieceCount(size, pieceSize)
  if (!Number.isInteger(piece) || piece < 0 || piece >= count) throw new RangeError(`piece ${piece} is outside 0..${count - 1} (size ${size}, piece_size ${pieceSize})`)
  const start = piece * pieceSize
  const end = Math.min(size, start + pieceSize) - 1
  return {start, end, length: end - start + 1}
}

/** The hex SHA-1 of piece `piece` in `sha1Pieces` (40 hex digits per piece), or undefined when the list is too short. */
export function pieceDigest(sha1Pieces: string, piece: number): string | undefined {
  const digest = sha1Pieces.slice(piece * 40, piece * 40 + 40)
  return digest.length === 40 ? digest.toLowerCase() : undefined
}

/**
 * Plans one round on one mirror: see the module doc for the order. Each file is checked at
 * most once; `random` (a function returning [0, 1), default `Math.random`) chooses the piece
 * of a copy not found corrupt before.
 *
 * @param budgetBytes  bytes the round may fetch from the mirror (the sum of the planned pieces' lengths never exceeds it)
 */
export function planContentChecks(lists: CandidateLists, budgetBytes: number, random: () => number = Math.random): PlannedCheck[] {
  const planned: PlannedCheck[] = []
  const seen = new Set<number>()
  let used = 0
  const take = (c: ContentCandidate, limit: number): void => {
    if (seen.has(c.fileId)) return
    const count = pieceCount(c.size, c.pieceSize)
    if (count === 0) return
    const piece = c.badPiece !== undefined && c.badPiece < count ? c.badPiece : Math.min(count - 1, Math.floor(random() * count))
    const range = pieceRange(c.size, c.pieceSize, piece)
    if (used + range.length > limit) return
    seen.add(c.fileId)
    used += range.length
    planned.push({candidate: c, piece, ...range})
  }
  for (const c of lists.bad) take(c, budgetBytes)
  const recentLimit = used + Math.max(0, budgetBytes - used) / 2
  for (const c of lists.recent) {
    if (used >= recentLimit) break
    take(c, recentLimit)
  }
  for (const c of lists.random) take(c, budgetBytes)
  return planned
}

/**
 * Verdicts of one check:
 * - `ok`: the piece's SHA-1 matches the index;
 * - `corrupt`: the mirror sent the piece and its SHA-1 differs;
 * - `missing`: 404 or 410 (the copy leaves the file's mirror set at once, as the next scan would take it out; a scan that lists it puts it back);
 * - `size_differs`: the mirror's `Content-Range` names another total size (the next scan sees it);
 * - `no_range`: the mirror answered the ranged request with the whole file (200): not checked;
 * - `error`: no answer, another status, a short body or a redirect off the mirror's host.
 */
export type ContentVerdict = 'ok' | 'corrupt' | 'missing' | 'size_differs' | 'no_range' | 'error'

/** What the mirror answered to a ranged request, as ./content-check.ts read it. */
export interface PieceAnswer {
  /** Final HTTP status, or null when the request failed. */
  status: number | null
  /** `Content-Range` as `{start, end, total}` (total null for `*`), when sent and parsed. */
  contentRange?: {start: number; end: number; total: number | null}
  /** Hex SHA-1 of the bytes read (the whole piece), when it could be read. */
  sha1?: string
  /** Bytes of the body received (reading stops past the piece's length). */
  bytes: number
  /** Why the request failed (a reason code such as `timeout`, `redirect_offsite`). */
  failure?: string
}

/**
 * The verdict on one check from the mirror's answer, with a reason for the operator.
 * @param expected  the index's hex SHA-1 of the piece
 */
export function contentVerdict(check: Pick<PlannedCheck, 'start' | 'end' | 'length'> & {size: number}, expected: string, answer: PieceAnswer): {verdict: ContentVerdict; detail: string} {
  if (answer.status === null) return {verdict: 'error', detail: answer.failure ?? 'no answer'}
  if (answer.status === 404 || answer.status === 410) return {verdict: 'missing', detail: `HTTP ${answer.status}`}
  if (answer.status === 200) return {verdict: 'no_range', detail: 'answered the ranged request with the whole file (200); not checked'}
  if (answer.status !== 206) return {verdict: 'error', detail: answer.failure ?? `HTTP ${answer.status}`}
  const range = answer.contentRange
  if (range?.total !== undefined && range.total !== null && range.total !== check.size) return {verdict: 'size_differs', detail: `the mirror's copy has ${range.total} bytes, origin ${check.size}`}
  if (!range || range.start !== check.start || range.end !== check.end)
    return {verdict: 'error', detail: `asked for bytes ${check.start}-${check.end}, got ${range ? `${range.start}-${range.end}` : 'no Content-Range'}`}
  if (answer.bytes !== check.length || answer.sha1 === undefined) return {verdict: 'error', detail: answer.failure ?? `a body of ${answer.bytes} bytes for a piece of ${check.length}`}
  if (answer.sha1.toLowerCase() !== expected.toLowerCase()) return {verdict: 'corrupt', detail: `SHA-1 ${answer.sha1}, index ${expected}`}
  return {verdict: 'ok', detail: 'SHA-1 matches'}
}

/**
 * `Content-Range: bytes a-b/N` (or `/*`) parsed (RFC 9110 §14.4), or undefined.
 */
export function parseContentRange(header: string | undefined): {start: number; end: number; total: number | null} | undefined {
  const match = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(header ?? '')
  if (!match) return undefined
  return {start: Number(match[1]), end: Number(match[2]), total: match[3] === '*' ? null : Number(match[3])}
}
