/**
 * Content checks, the pure part: which copies a round checks on one mirror within its byte
 * budget, which pieces of each, the byte range of those pieces, and the verdict on what the
 * mirror sent. The network and the database are in ./content-check.ts.
 *
 * A copy is checked against the file's SHA-1 piece list (`file.sha1_pieces`, written by
 * `mb index --hashes`: the hex SHA-1 of each `piece_size` piece, concatenated; the last piece
 * may be shorter), and checked whole: a round reads a copy's pieces in order from where its
 * last check stopped (`mirror_file_check.next_piece`) to its end, as far as the budget goes,
 * so that repeated rounds cover the whole copy; a pass that reaches the end marks the copy
 * checked whole and the next pass starts at piece 0. A sampled piece proves little: a
 * 21-byte corruption in a 12 MiB copy hides in one of 48 pieces.
 *
 * Order within a round: copies found corrupt before (the piece that failed, alone, so that a
 * repaired copy comes back), then copies not yet checked whole at their current version, the
 * most recently changed first (a new version is where a half-finished or damaged sync shows),
 * then the most downloaded; then copies checked whole before, the longest ago first. A span
 * that does not fit in what is left of the budget is cut at a piece boundary; a copy whose
 * next piece does not fit is passed over, and smaller ones after it may still fit.
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
  /** 0-based piece the next check starts at (`mirror_file_check.next_piece` of this version; 0 when never checked). */
  nextPiece?: number
  /** When a pass last found every piece matching at this version (Unix ms); undefined = never checked whole. */
  wholeAt?: number
  /** Downloads of the file from this mirror lately (the order among copies of one mtime). */
  downloads?: number
}

/** One planned check: consecutive pieces of a candidate, by their byte range (inclusive, as `Range: bytes=start-end` says it, RFC 9110 §14.1.2). */
export interface PlannedCheck {
  candidate: ContentCandidate
  /** 0-based index of the first piece. */
  piece: number
  /** Number of pieces (at least 1). */
  pieces: number
  /** First byte of the first piece and last byte of the last (inclusive). */
  start: number
  end: number
  /** end - start + 1. */
  length: number
}

/** The candidates of one mirror as the store found them (see ./content-store.ts). */
export interface CandidateLists {
  /** Copies found corrupt before, at the file's current version. */
  bad: ContentCandidate[]
  /** Held files with their check state, in any order (the plan sorts them). */
  held: ContentCandidate[]
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

/**
 * The byte range of pieces `first`..`first + pieces - 1` (0-based, clipped to the file's end).
 * @throws RangeError when the file has no piece `first`
 */
export function spanRange(size: number, pieceSize: number, first: number, pieces: number): {start: number; end: number; length: number} {
  const last = Math.min(pieceCount(size, pieceSize) - 1, first + Math.max(1, pieces) - 1)
  const start = pieceRange(size, pieceSize, first).start
  const end = pieceRange(size, pieceSize, last).end
  return {start, end, length: end - start + 1}
}

/** The hex SHA-1 of piece `piece` in `sha1Pieces` (40 hex digits per piece), or undefined when the list is too short. */
export function pieceDigest(sha1Pieces: string, piece: number): string | undefined {
  const digest = sha1Pieces.slice(piece * 40, piece * 40 + 40)
  return digest.length === 40 ? digest.toLowerCase() : undefined
}

/** Copies not checked whole first (newest, then most downloaded), then those checked whole, the longest ago first. */
function byUrgency(a: ContentCandidate, b: ContentCandidate): number {
  if ((a.wholeAt === undefined) !== (b.wholeAt === undefined)) return a.wholeAt === undefined ? -1 : 1
  if (a.wholeAt !== undefined && b.wholeAt !== undefined && a.wholeAt !== b.wholeAt) return a.wholeAt - b.wholeAt
  return b.mtime - a.mtime || (b.downloads ?? 0) - (a.downloads ?? 0) || a.fileId - b.fileId
}

/**
 * Plans one round on one mirror: see the module doc for the order. Each file is planned at
 * most once, as one span of consecutive pieces.
 *
 * @param budgetBytes  bytes the round may fetch from the mirror (the sum of the planned spans' lengths never exceeds it)
 */
export function planContentChecks(lists: CandidateLists, budgetBytes: number): PlannedCheck[] {
  const planned: PlannedCheck[] = []
  const seen = new Set<number>()
  let used = 0
  const take = (c: ContentCandidate, bad: boolean): void => {
    if (seen.has(c.fileId)) return
    const count = pieceCount(c.size, c.pieceSize)
    if (count === 0) return
    const first = bad ? Math.min(c.badPiece ?? 0, count - 1) : (c.nextPiece ?? 0) < count ? Math.max(0, c.nextPiece ?? 0) : 0
    const left = budgetBytes - used
    const lastPieceLength = c.size - (count - 1) * c.pieceSize
    // Whole pieces that fit, counting the shorter last piece when the span reaches it.
    let pieces = bad ? 1 : count - first
    // A span cut short never reaches the (shorter) last piece, so whole pieces count.
    if (spanLength(c, first, pieces, count, lastPieceLength) > left) pieces = bad ? 0 : Math.floor(left / c.pieceSize)
    if (pieces <= 0) return
    const range = spanRange(c.size, c.pieceSize, first, pieces)
    seen.add(c.fileId)
    used += range.length
    planned.push({candidate: c, piece: first, pieces, ...range})
  }
  for (const c of lists.bad) take(c, true)
  for (const c of [...lists.held].sort(byUrgency)) take(c, false)
  return planned
}

function spanLength(c: ContentCandidate, first: number, pieces: number, count: number, lastPieceLength: number): number {
  return first + pieces >= count ? (count - 1 - first) * c.pieceSize + lastPieceLength : pieces * c.pieceSize
}

/**
 * Verdicts of one check (a span of pieces):
 * - `ok`: every piece's SHA-1 matches the index;
 * - `corrupt`: the mirror sent the span and a piece's SHA-1 differs (the first such piece is recorded);
 * - `missing`: 404 or 410 (the copy leaves the file's mirror set at once, as the next scan would take it out; a scan that lists it puts it back);
 * - `size_differs`: the mirror's `Content-Range` names another total size (the next scan sees it);
 * - `no_range`: the mirror answered the ranged request with the whole file (200);
 * - `error`: no answer, a redirect loop or off the mirror's host, another status (a 5xx),
 *   another range, a body shorter or longer than the range.
 * The last three are {@link UNCHECKED}: the copy is recorded as unchecked with the reason,
 * never as good or bad.
 */
export type ContentVerdict = 'ok' | 'corrupt' | 'missing' | 'size_differs' | 'no_range' | 'error'

/** Verdicts that judge nothing: the copy's standing and its check cursor stay as they were. */
export const UNCHECKED: ReadonlySet<ContentVerdict> = new Set(['size_differs', 'no_range', 'error'])

/** What the mirror answered to a ranged request, as ./content-check.ts read it. */
export interface PieceAnswer {
  /** Final HTTP status, or null when the request failed. */
  status: number | null
  /** `Content-Range` as `{start, end, total}` (total null for `*`), when sent and parsed. */
  contentRange?: {start: number; end: number; total: number | null}
  /** Hex SHA-1 of each piece read whole, in order (all of them when the body had the range's length). */
  sha1s?: string[]
  /** Bytes of the body received (reading stops past the range's length). */
  bytes: number
  /** Why the request failed (a reason code such as `timeout`, `redirect_offsite`). */
  failure?: string
}

/**
 * The verdict on one check from the mirror's answer, with a reason for the operator, and the
 * 0-based piece that did not match (for `corrupt`).
 * @param expected  the index's hex SHA-1 of each piece of the span, in order
 */
export function contentVerdict(
  check: Pick<PlannedCheck, 'piece' | 'start' | 'end' | 'length'> & {size: number},
  expected: readonly string[],
  answer: PieceAnswer,
): {verdict: ContentVerdict; detail: string; badPiece?: number} {
  if (answer.status === null) return {verdict: 'error', detail: answer.failure ?? 'no answer'}
  if (answer.status === 404 || answer.status === 410) return {verdict: 'missing', detail: `HTTP ${answer.status}`}
  if (answer.status === 200) return {verdict: 'no_range', detail: 'answered the ranged request with the whole file (200); not checked'}
  if (answer.status !== 206) return {verdict: 'error', detail: answer.failure ?? `HTTP ${answer.status}; not checked`}
  const range = answer.contentRange
  if (range?.total !== undefined && range.total !== null && range.total !== check.size) return {verdict: 'size_differs', detail: `the mirror's copy has ${range.total} bytes, origin ${check.size}`}
  if (!range || range.start !== check.start || range.end !== check.end)
    return {verdict: 'error', detail: `asked for bytes ${check.start}-${check.end}, got ${range ? `${range.start}-${range.end}` : 'no Content-Range'}; not checked`}
  if (answer.bytes < check.length) return {verdict: 'error', detail: answer.failure ?? `short body: ${answer.bytes} bytes for a range of ${check.length}; not checked`}
  if (answer.bytes > check.length) return {verdict: 'error', detail: `a body longer than the range of ${check.length} bytes; not checked`}
  const sha1s = answer.sha1s ?? []
  if (sha1s.length !== expected.length) return {verdict: 'error', detail: `${sha1s.length} pieces read of ${expected.length}; not checked`}
  const bad = sha1s.findIndex((sha1, i) => sha1.toLowerCase() !== expected[i].toLowerCase())
  if (bad >= 0) return {verdict: 'corrupt', detail: `piece ${check.piece + bad}: SHA-1 ${sha1s[bad]}, index ${expected[bad]}`, badPiece: check.piece + bad}
  return {verdict: 'ok', detail: expected.length === 1 ? 'SHA-1 matches' : `SHA-1 of ${expected.length} pieces match`}
}

/**
 * `Content-Range: bytes a-b/N` (or `/*`) parsed (RFC 9110 §14.4), or undefined.
 */
export function parseContentRange(header: string | undefined): {start: number; end: number; total: number | null} | undefined {
  const match = /^\s*bytes\s+(\d+)-(\d+)\/(\d+|\*)\s*$/i.exec(header ?? '')
  if (!match) return undefined
  return {start: Number(match[1]), end: Number(match[2]), total: match[3] === '*' ? null : Number(match[3])}
}
