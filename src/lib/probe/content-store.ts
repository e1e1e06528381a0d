/**
 * Content checks, the database part: the candidates of a mirror (./content.ts plans among
 * them), the index's piece digests, and the verdicts written back: a corrupt copy gets a
 * `mirror_file_bad` row (migration 0021) and leaves the file's mirror set; a copy found
 * corrupt before that now matches loses the row and joins the set again.
 *
 * Mirror-set writes follow docs/change-tracking.md: they stamp `txid` in the statement, and
 * the `file` triggers notify, so every `mb serve` sees the change at its next refresh. The
 * writes run under the mirror's scan lock, so that a scan reconciling the same mirror never
 * interleaves with them (src/lib/scan/reconcile.ts keeps a bad copy out of the set).
 */
import {type Kysely, sql} from 'kysely'
import type {DB} from '../db/schema.js'
import type {CandidateLists, ContentCandidate} from './content.js'

/** Candidates loaded per list and mirror at most (256 KiB pieces at the smallest: 2,000 fill 500 MiB). */
const MAX_CANDIDATES = 2000
/** The smallest piece `mb index --hashes` writes, bytes (src/lib/origin/hash.ts). */
const MIN_PIECE = 256 * 1024

/** SQL on `file f`: the file has a SHA-1 piece list read from its current version. */
const HASHED = sql<boolean>`f.sha1_pieces IS NOT NULL AND f.piece_size > 0 AND f.size > 0 AND f.hashed_size = f.size AND f.hashed_mtime = f.mtime`

type CandidateRow = {id: number; path: string; size: unknown; mtime: unknown; piece_size: unknown; piece?: number | null}

/** A sampled file with the mirrors its set holds (`file.mirrors`). */
type SampleRow = CandidateRow & {mirrors: number[]}

function candidate(r: CandidateRow): ContentCandidate {
  const c: ContentCandidate = {fileId: Number(r.id), path: r.path, size: Number(r.size), mtime: Number(r.mtime), pieceSize: Number(r.piece_size)}
  if (r.piece !== undefined && r.piece !== null) c.badPiece = Number(r.piece)
  return c
}

/** Candidates of one list a mirror's round could need: `budgetBytes` in pieces of the smallest size, at most MAX_CANDIDATES. */
function candidatesNeeded(budgetBytes: number): number {
  return Math.min(MAX_CANDIDATES, Math.max(1, Math.ceil(budgetBytes / MIN_PIECE)))
}

/**
 * The files with SHA-1 pieces a round draws every mirror's candidates from, read once per
 * round rather than once per mirror: a query that filters the file table on one mirror's set
 * reads the whole table (no index serves `M = ANY(mirrors)`), and two such reads per mirror
 * kept PostgreSQL busy on every core for the length of a round, slowing the redirects served
 * beside it (docs/benchmarks.md, "Content checks beside the redirects").
 */
export interface RoundSample {
  /** The most recently changed files (by mtime, newest first). */
  recent: SampleRow[]
  /**
   * The most recently written file rows (by `txid`, its index): a copy that arrives on a
   * mirror (a scan or a trace adds the mirror to the file's set) writes the row, whatever the
   * file's mtime, so new copies of old files are checked soon after they arrive too.
   */
  written: SampleRow[]
  /** Files drawn at random (by id), in random order. */
  random: SampleRow[]
}

/** Files per list of a round's sample: enough for each mirror that holds a tenth of the tree. */
const SAMPLE_FACTOR = 10
/** The most rows a sample list holds. */
const MAX_SAMPLE = 20_000

/**
 * Reads a round's sample for mirrors each given `budgetBytes`: three statements, the newest
 * files (one pass over the table), the most recently written rows (the txid index) and random
 * ids looked up by primary key (ids left by removed files draw nothing, so a sample of a tree
 * with gaps is smaller, never skewed).
 * @throws what the database driver throws
 */
export async function roundSample(db: Kysely<DB>, budgetBytes: number): Promise<RoundSample> {
  const k = Math.min(MAX_SAMPLE, candidatesNeeded(budgetBytes) * SAMPLE_FACTOR)
  const recent = await sql<SampleRow>`
    SELECT f.id, f.path, f.size, f.mtime, f.piece_size, f.mirrors FROM file f WHERE ${HASHED} ORDER BY f.mtime DESC, f.id LIMIT ${k}`.execute(db)
  const written = await sql<SampleRow>`
    SELECT f.id, f.path, f.size, f.mtime, f.piece_size, f.mirrors FROM file f WHERE ${HASHED} ORDER BY f.txid DESC LIMIT ${k}`.execute(db)
  const random = await sql<SampleRow>`
    WITH bounds AS (SELECT min(id) AS lo, max(id) AS hi FROM file),
    ids AS (SELECT DISTINCT (bounds.lo + floor(random() * (bounds.hi - bounds.lo + 1)))::int AS id FROM bounds, generate_series(1, ${k}) WHERE bounds.lo IS NOT NULL)
    SELECT f.id, f.path, f.size, f.mtime, f.piece_size, f.mirrors FROM ids JOIN file f ON f.id = ids.id WHERE ${HASHED} ORDER BY random()`.execute(db)
  return {recent: recent.rows, written: written.rows, random: random.rows}
}

/** Days of `stats_daily` whose downloads order copies of one mtime. */
const DOWNLOAD_DAYS = 7

/**
 * The candidate lists of mirror `mirrorId` for a round of `budgetBytes`: its corrupt copies
 * at the files' current versions, and the files of the round's `sample` its set holds (as
 * many of the newest, the most recently written and the random ones as the budget could need), each with its check
 * state at the current version (`mirror_file_check`) and its downloads from the mirror in
 * the last {@link DOWNLOAD_DAYS} days (`stats_daily`).
 * @throws what the database driver throws
 */
export async function contentCandidates(db: Kysely<DB>, mirrorId: number, budgetBytes: number, sample: RoundSample): Promise<CandidateLists> {
  const M = mirrorId
  const n = candidatesNeeded(budgetBytes)
  const bad = await sql<CandidateRow>`
    SELECT f.id, f.path, f.size, f.mtime, f.piece_size, b.piece FROM mirror_file_bad b JOIN file f ON f.id = b.file_id
    WHERE b.mirror_id = ${M}::smallint AND b.size = f.size AND b.mtime = f.mtime AND ${HASHED}
    ORDER BY b.found_at LIMIT ${MAX_CANDIDATES}`.execute(db)
  const held = new Map<number, ContentCandidate>()
  for (const rows of [sample.recent, sample.written, sample.random]) {
    for (const r of rows.filter((r) => r.mirrors.includes(M)).slice(0, n)) held.set(Number(r.id), candidate(r))
  }
  await addCheckState(db, M, [...held.values()])
  return {bad: bad.rows.map(candidate), held: [...held.values()]}
}

/** Sets `nextPiece`, `wholeAt` and `downloads` of `candidates` on mirror `M` (two statements by primary key and index). */
async function addCheckState(db: Kysely<DB>, M: number, candidates: ContentCandidate[]): Promise<void> {
  if (candidates.length === 0) return
  const byId = new Map(candidates.map((c) => [c.fileId, c]))
  const checks = await sql<{file_id: number; next_piece: number; whole_at: Date | null}>`
    SELECT c.file_id, c.next_piece, c.whole_at FROM mirror_file_check c JOIN file f ON f.id = c.file_id AND f.size = c.size AND f.mtime = c.mtime
    WHERE c.mirror_id = ${M}::smallint AND c.file_id = ANY(${[...byId.keys()]}::int[])`.execute(db)
  for (const r of checks.rows) {
    const c = byId.get(Number(r.file_id))
    if (!c) continue
    c.nextPiece = Number(r.next_piece)
    if (r.whole_at) c.wholeAt = new Date(r.whole_at).getTime()
  }
  const byPath = new Map(candidates.map((c) => [c.path, c]))
  const downloads = await sql<{path: string; n: string | number}>`
    SELECT path, sum(downloads) AS n FROM stats_daily
    WHERE mirror_id = ${M}::smallint AND path = ANY(${[...byPath.keys()]}::text[]) AND day >= (now() AT TIME ZONE 'UTC')::date - ${DOWNLOAD_DAYS}::int
    GROUP BY path`.execute(db)
  for (const r of downloads.rows) {
    const c = byPath.get(r.path)
    if (c) c.downloads = Number(r.n)
  }
}

/** One copy to check at once (a client retried away from it): its candidate with its check state, or undefined when the mirror does not hold the file's hashed current version. */
export async function copyCandidate(db: Kysely<DB>, mirrorId: number, path: string): Promise<ContentCandidate | undefined> {
  const M = mirrorId
  const rows = await sql<CandidateRow>`
    SELECT f.id, f.path, f.size, f.mtime, f.piece_size, b.piece FROM file f
    LEFT JOIN mirror_file_bad b ON b.file_id = f.id AND b.mirror_id = ${M}::smallint AND b.size = f.size AND b.mtime = f.mtime
    WHERE f.path = ${path} AND ${HASHED} AND (${M}::smallint = ANY(f.mirrors) OR b.file_id IS NOT NULL)`.execute(db)
  const row = rows.rows[0]
  if (row === undefined) return undefined
  const c = candidate(row)
  await addCheckState(db, M, [c])
  return c
}

/**
 * The index's hex SHA-1 of each piece of each planned span, keyed by file id, for the files
 * whose version is still `size`/`mtime` as planned (a file the index changed since is left out).
 */
export async function pieceDigests(db: Kysely<DB>, wanted: Array<{fileId: number; piece: number; pieces: number; size: number; mtime: number}>): Promise<Map<number, string[]>> {
  if (wanted.length === 0) return new Map()
  const rows = await sql<{id: number; pieces: number; digests: string}>`
    SELECT f.id, p.pieces, substr(f.sha1_pieces, p.piece * 40 + 1, p.pieces * 40) AS digests
    FROM unnest(${wanted.map((w) => w.fileId)}::int[], ${wanted.map((w) => w.piece)}::int[], ${wanted.map((w) => w.pieces)}::int[], ${wanted.map((w) => w.size)}::bigint[], ${wanted.map((w) => w.mtime)}::bigint[]) AS p(id, piece, pieces, size, mtime)
    JOIN file f ON f.id = p.id AND f.size = p.size AND f.mtime = p.mtime
    WHERE ${HASHED}`.execute(db)
  const digests = new Map<number, string[]>()
  for (const r of rows.rows) {
    const text = (r.digests ?? '').toLowerCase()
    if (text.length !== Number(r.pieces) * 40) continue
    digests.set(
      Number(r.id),
      Array.from({length: Number(r.pieces)}, (_, i) => text.slice(i * 40, i * 40 + 40)),
    )
  }
  return digests
}

/**
 * What a check read of one copy, to record in `mirror_file_check` (migration 0032): the copy
 * of `fileId` at version `size`/`mtime` (bytes, Unix seconds). `read` = pieces were judged
 * (`nextPiece` is where the next check starts, `whole` = this check completed a pass with
 * every piece matching, `corrupt` = a piece did not match); `unchecked` = the reason a check
 * could not judge (part of) the copy.
 */
export interface CheckRecord {
  fileId: number
  size: number
  mtime: number
  read: boolean
  nextPiece: number
  whole: boolean
  corrupt: boolean
  unchecked?: string
}

/**
 * Writes `records` of mirror `mirrorId` in the caller's transaction. A row of another version
 * starts afresh; an unchecked record keeps the cursor and the last whole check; a corrupt one
 * clears the last whole check (the copy is checked whole again once it passes).
 */
export async function recordChecks(trx: Kysely<DB>, mirrorId: number, records: CheckRecord[]): Promise<void> {
  if (records.length === 0) return
  const M = mirrorId
  const same = sql`c.size = excluded.size AND c.mtime = excluded.mtime`
  await sql`
    INSERT INTO mirror_file_check AS c (mirror_id, file_id, size, mtime, next_piece, checked_at, whole_at, unchecked_at, unchecked_reason)
    SELECT ${M}::smallint, p.id, p.size, p.mtime, p.next, CASE WHEN p.read THEN now() END, CASE WHEN p.whole THEN now() END, CASE WHEN p.reason IS NOT NULL THEN now() END, p.reason
    FROM unnest(${records.map((r) => r.fileId)}::int[], ${records.map((r) => r.size)}::bigint[], ${records.map((r) => r.mtime)}::bigint[], ${records.map((r) => r.nextPiece)}::int[],
      ${records.map((r) => r.read)}::bool[], ${records.map((r) => r.whole)}::bool[], ${records.map((r) => r.unchecked ?? null)}::text[]) AS p(id, size, mtime, next, read, whole, reason)
    JOIN file f ON f.id = p.id AND f.size = p.size AND f.mtime = p.mtime
    ON CONFLICT (mirror_id, file_id) DO UPDATE SET size = excluded.size, mtime = excluded.mtime,
      next_piece = CASE WHEN excluded.checked_at IS NOT NULL THEN excluded.next_piece WHEN ${same} THEN c.next_piece ELSE 0 END,
      checked_at = coalesce(excluded.checked_at, CASE WHEN ${same} THEN c.checked_at END),
      whole_at = coalesce(excluded.whole_at, CASE WHEN ${same} THEN c.whole_at END),
      unchecked_at = coalesce(excluded.unchecked_at, CASE WHEN ${same} THEN c.unchecked_at END),
      unchecked_reason = CASE WHEN excluded.unchecked_at IS NOT NULL THEN excluded.unchecked_reason WHEN ${same} THEN c.unchecked_reason END`.execute(trx)
  const corrupt = records.filter((r) => r.corrupt).map((r) => r.fileId)
  if (corrupt.length > 0) await sql`UPDATE mirror_file_check SET whole_at = NULL WHERE mirror_id = ${M}::smallint AND file_id = ANY(${corrupt}::int[])`.execute(trx)
}

/** A verdict to record: the copy of `fileId` at version `size`/`mtime` (bytes, Unix seconds). */
export interface CopyVerdict {
  fileId: number
  size: number
  mtime: number
  piece: number
}

/**
 * Makes mirror `mirrorId` suspect when it has at least `threshold` corrupt copies (rows of
 * `mirror_file_bad` at their files' current versions), keeping the time it first became so,
 * and clears the mark when it has fewer; `threshold` 0 never marks (and clears). In the
 * caller's transaction; the `mirror` row's change reaches every `mb serve` at its refresh.
 * @returns the mirror's corrupt copies and whether it is suspect now
 */
export async function updateBadCopiesSuspect(trx: Kysely<DB>, mirrorId: number, threshold: number): Promise<{badCopies: number; suspect: boolean}> {
  const M = mirrorId
  const counted = await sql<{n: string | number}>`
    SELECT count(*) AS n FROM mirror_file_bad b JOIN file f ON f.id = b.file_id
    WHERE b.mirror_id = ${M}::smallint AND b.size = f.size AND b.mtime = f.mtime`.execute(trx)
  const badCopies = Number(counted.rows[0]?.n ?? 0)
  const suspect = threshold > 0 && badCopies >= threshold
  await sql`
    UPDATE mirror SET bad_copies_suspect_at = ${suspect ? sql`coalesce(bad_copies_suspect_at, now())` : sql`NULL`}
    WHERE id = ${M}::smallint AND bad_copies_suspect_at IS ${suspect ? sql`NULL` : sql`NOT NULL`}`.execute(trx)
  return {badCopies, suspect}
}

/**
 * Takes the copies the mirror answered `404`/`410` for out of their files' mirror sets (in the
 * caller's transaction), as its next scan would: a file gone since the scan that listed it
 * must not wait for the next scan to stop drawing clients (wget2, for one, asks the same
 * mirror again and again). No record is kept: the next scan that lists the file puts it back.
 * Only copies of the file's current version count.
 * @returns how many copies were taken out
 */
export async function removeMissingCopies(trx: Kysely<DB>, mirrorId: number, missing: CopyVerdict[]): Promise<number> {
  if (missing.length === 0) return 0
  const M = mirrorId
  const removed = await sql`
    UPDATE file SET mirrors = array_remove(mirrors, ${M}::smallint), txid = pg_current_xact_id()
    FROM unnest(${missing.map((c) => c.fileId)}::int[], ${missing.map((c) => c.size)}::bigint[], ${missing.map((c) => c.mtime)}::bigint[]) AS p(id, size, mtime)
    WHERE file.id = p.id AND file.size = p.size AND file.mtime = p.mtime AND ${M}::smallint = ANY(file.mirrors)`.execute(trx)
  return Number(removed.numAffectedRows ?? 0)
}

/**
 * Records a round's verdicts on mirror `mirrorId` in the caller's transaction: `corrupt`
 * copies get (or keep) a `mirror_file_bad` row and leave the file's mirror set; `passed`
 * copies that had such a row lose it and join the set again. Only rows of the file's
 * current version count: a file the index changed meanwhile is left alone.
 * @returns how many copies were newly marked corrupt and how many were cleared
 */
export async function recordContentVerdicts(trx: Kysely<DB>, mirrorId: number, corrupt: CopyVerdict[], passed: CopyVerdict[]): Promise<{marked: number; cleared: number}> {
  const M = mirrorId
  let marked = 0
  if (corrupt.length > 0) {
    const ids = corrupt.map((c) => c.fileId)
    await sql`
      INSERT INTO mirror_file_bad (mirror_id, file_id, size, mtime, piece)
      SELECT ${M}::smallint, f.id, f.size, f.mtime, p.piece
      FROM unnest(${ids}::int[], ${corrupt.map((c) => c.piece)}::int[], ${corrupt.map((c) => c.size)}::bigint[], ${corrupt.map((c) => c.mtime)}::bigint[]) AS p(id, piece, size, mtime)
      JOIN file f ON f.id = p.id AND f.size = p.size AND f.mtime = p.mtime
      ON CONFLICT (mirror_id, file_id) DO UPDATE SET piece = excluded.piece, size = excluded.size, mtime = excluded.mtime,
        found_at = CASE WHEN mirror_file_bad.size = excluded.size AND mirror_file_bad.mtime = excluded.mtime THEN mirror_file_bad.found_at ELSE now() END`.execute(trx)
    const removed = await sql`
      UPDATE file SET mirrors = array_remove(mirrors, ${M}::smallint), txid = pg_current_xact_id()
      FROM mirror_file_bad b
      WHERE b.mirror_id = ${M}::smallint AND b.file_id = file.id AND file.id = ANY(${ids}::int[])
        AND b.size = file.size AND b.mtime = file.mtime AND ${M}::smallint = ANY(file.mirrors)`.execute(trx)
    marked = Number(removed.numAffectedRows ?? 0)
  }
  let cleared = 0
  if (passed.length > 0) {
    const ids = passed.map((c) => c.fileId)
    await sql`
      UPDATE file SET mirrors = array_append(mirrors, ${M}::smallint), txid = pg_current_xact_id()
      FROM mirror_file_bad b
      WHERE b.mirror_id = ${M}::smallint AND b.file_id = file.id AND file.id = ANY(${ids}::int[])
        AND b.size = file.size AND b.mtime = file.mtime AND NOT (${M}::smallint = ANY(file.mirrors))`.execute(trx)
    const deleted = await sql`DELETE FROM mirror_file_bad WHERE mirror_id = ${M}::smallint AND file_id = ANY(${ids}::int[])`.execute(trx)
    cleared = Number(deleted.numAffectedRows ?? 0)
  }
  return {marked, cleared}
}

/**
 * What content checks recorded of one copy (`mirror_file_check`, at the file's current
 * version), as `mb file lookup` shows it: times ISO 8601 UTC (null = never).
 */
export interface CopyCheck {
  mirror_id: number
  /** Pieces of the current pass read and matching (the next check starts at this piece), of `pieces`. */
  pieces_read: number
  pieces: number
  /** The last check that read pieces; the last pass that read every piece and found them matching. */
  checked_at: string | null
  whole_at: string | null
  /** The last check the mirror's answer could not judge, and why. */
  unchecked_at: string | null
  unchecked_reason: string | null
}

const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString())

/** The check records of the files `fileIds` at their current versions: file id → records, by mirror id. */
export async function copyChecks(db: Kysely<DB>, fileIds: number[]): Promise<Map<number, CopyCheck[]>> {
  const byFile = new Map<number, CopyCheck[]>()
  if (fileIds.length === 0) return byFile
  const rows = await sql<{
    file_id: number
    mirror_id: number
    next_piece: number
    pieces: number
    checked_at: Date | null
    whole_at: Date | null
    unchecked_at: Date | null
    unchecked_reason: string | null
  }>`
    SELECT c.file_id, c.mirror_id, c.next_piece, CASE WHEN f.piece_size > 0 THEN ceil(f.size::float8 / f.piece_size)::int ELSE 0 END AS pieces,
      c.checked_at, c.whole_at, c.unchecked_at, c.unchecked_reason
    FROM mirror_file_check c JOIN file f ON f.id = c.file_id AND f.size = c.size AND f.mtime = c.mtime
    WHERE c.file_id = ANY(${fileIds}::int[]) ORDER BY c.file_id, c.mirror_id`.execute(db)
  for (const r of rows.rows) {
    const list = byFile.get(Number(r.file_id)) ?? []
    byFile.set(Number(r.file_id), list)
    list.push({
      mirror_id: Number(r.mirror_id),
      pieces_read: Number(r.next_piece),
      pieces: Number(r.pieces),
      checked_at: iso(r.checked_at),
      whole_at: iso(r.whole_at),
      unchecked_at: iso(r.unchecked_at),
      unchecked_reason: r.unchecked_reason,
    })
  }
  return byFile
}

/** A mirror's content checks in numbers (`mb mirror show`): copies it holds with SHA-1 pieces, those checked whole at their current version, the last check, and the copies whose last check could not judge them. */
export interface MirrorChecks {
  held: number
  checked_whole: number
  last_checked_at: string | null
  last_whole_at: string | null
  unchecked: number
  last_unchecked_reason: string | null
}

/** {@link MirrorChecks} of mirror `mirrorId` (one pass over the file table, as `mb mirror show` is run by hand). */
export async function mirrorChecks(db: Kysely<DB>, mirrorId: number): Promise<MirrorChecks> {
  const M = mirrorId
  const held = await sql<{n: number}>`SELECT count(*)::int AS n FROM file f WHERE ${M}::smallint = ANY(f.mirrors) AND ${HASHED}`.execute(db)
  const rows = await sql<{whole: number; checked: Date | null; last_whole: Date | null; unchecked: number; reason: string | null}>`
    SELECT count(*) FILTER (WHERE c.whole_at IS NOT NULL)::int AS whole, max(c.checked_at) AS checked, max(c.whole_at) AS last_whole,
      count(*) FILTER (WHERE c.unchecked_at IS NOT NULL AND (c.checked_at IS NULL OR c.unchecked_at > c.checked_at))::int AS unchecked,
      (SELECT c2.unchecked_reason FROM mirror_file_check c2 WHERE c2.mirror_id = ${M}::smallint AND c2.unchecked_at IS NOT NULL ORDER BY c2.unchecked_at DESC LIMIT 1) AS reason
    FROM mirror_file_check c JOIN file f ON f.id = c.file_id AND f.size = c.size AND f.mtime = c.mtime
    WHERE c.mirror_id = ${M}::smallint`.execute(db)
  const r = rows.rows[0]
  return {
    held: Number(held.rows[0]?.n ?? 0),
    checked_whole: Number(r?.whole ?? 0),
    last_checked_at: iso(r?.checked ?? null),
    last_whole_at: iso(r?.last_whole ?? null),
    unchecked: Number(r?.unchecked ?? 0),
    last_unchecked_reason: r?.reason ?? null,
  }
}
