/**
 * `mb probe --content`: a round of content checks over many mirrors, and the check of one copy
 * a client's retry asks for (./content-demand.ts). For each mirror, plan the checks within the
 * byte budget (./content.ts: whole copies, from where the last check stopped), fetch each
 * planned span of pieces with ranged `GET`s (`Range: bytes=start-end`, RFC 9110 §14.2) of at
 * most {@link MAX_REQUEST_BYTES} over the probe's connection pools (./http.ts), hashing each
 * piece with SHA-1 as it streams (bounded memory), compare with the index's, and record the
 * verdicts and what was read (./content-store.ts) under the mirror's scan lock.
 *
 * The mirror's `https_url` is used when it has one, else its `http_url`; the path goes below
 * the base URL as redirects write it (base path applied, segments percent-encoded). Redirects
 * are followed within the mirror's own scheme, host and port only: a content check vouches
 * for the mirror's own bytes. A mirror that probing found answers a ranged request with the
 * whole file (`mirror.range_ok = false`) is skipped, and so is one that is down; a `200`
 * answer is not read (`no_range`). An answer that proves nothing (a redirect loop, a 5xx, a
 * short body, a body longer than the range) records the copy as unchecked with the reason.
 */
import pLimit from 'p-limit'
import type {Database} from '../db/index.js'
import {scanLock} from '../db/named-locks.js'
import type {ProbeConfig} from './config.js'
import {type ContentCandidate, type ContentVerdict, contentVerdict, type PieceAnswer, parseContentRange, pieceCount, type PlannedCheck, planContentChecks, spanRange, UNCHECKED} from './content.js'
import {
  type CheckRecord,
  contentCandidates,
  type CopyVerdict,
  copyCandidate,
  pieceDigests,
  type RoundSample,
  recordChecks,
  recordContentVerdicts,
  removeMissingCopies,
  roundSample,
  updateBadCopiesSuspect,
} from './content-store.js'
import {digestPieces, type Family, getWithinOrigin, ProbeClient, type Resolver} from './http.js'
import {requestUrl} from './probe.js'
import {compileSigner} from '../sign.js'
import {clientOptions} from './run.js'
import {MbError} from '../errors.js'

/** The most bytes one ranged request asks for; a longer span is read in several, one after another. */
const MAX_REQUEST_BYTES = 64 * 1024 * 1024
/** The slowest rate a check's body may stream at (bytes per second): a request's time limit is `probe.timeout` plus its length at this rate. */
const MIN_RATE = 1024 * 1024

/** Options of one round. */
export interface ContentRoundOptions {
  /** Mirror identifiers; empty = every enabled mirror. */
  names?: string[]
  /** Bytes fetched per mirror at most (default `probe.content_budget_bytes`). */
  budgetBytes?: number
  /** Mirrors checked in parallel (default `probe.jobs`); the pieces of one mirror are fetched one after another. */
  jobs?: number
  /** Host name resolver (tests); default `dns.lookup`. */
  resolver?: Resolver
  /** Ends the round when aborted (`mb serve` stopping): a mirror whose checks it cut short records none of them. */
  signal?: AbortSignal
}

/** One check (a span of pieces of one copy), as `--json` shows it. Bytes; times UTC. */
export interface ContentCheckResult {
  path: string
  /** 0-based index of the first piece, the number of pieces, and their byte range (inclusive). */
  piece: number
  pieces: number
  start: number
  end: number
  url: string
  verdict: ContentVerdict
  detail: string
  http_status: number | null
  /** The copy had been found corrupt before this check. */
  was_bad: boolean
  /** This check read the copy's last piece with every piece of its pass matching: the copy is checked whole. */
  whole: boolean
}

/** One mirror's part of the round. */
export interface MirrorContentResult {
  id: number
  identifier: string
  /** Why the mirror was not checked (down, no range, no URL, nothing to check). */
  skipped?: string
  /** Bytes of the bodies received. */
  bytes: number
  checks: ContentCheckResult[]
  /** Copies newly found corrupt (taken out of the mirror's sets), and corrupt copies that pass now (put back). */
  marked_bad: number
  cleared: number
  /** Copies the mirror answered 404/410 for, taken out of their files' mirror sets until a scan lists them again. */
  removed_missing: number
  /** Checks the mirror's answer could not judge (recorded as unchecked with the reason). */
  unchecked: number
  /** The mirror has at least `probe.suspect_bad_copies` corrupt copies after this round: suspect, out of selection (reason `bad_copies`). Absent when the round recorded nothing. */
  suspect?: boolean
  /** Set when the verdicts could not be recorded (a scan of the mirror was running). */
  not_recorded?: string
}

/** The result of a round (the `--json` shape of `mb probe --content`). */
export interface ContentRound {
  at: string
  budget_bytes: number
  checked: number
  corrupt: number
  unchecked: number
  marked_bad: number
  cleared: number
  mirrors: MirrorContentResult[]
}

type MirrorRow = {
  id: number
  identifier: string
  http_url: string | null
  https_url: string | null
  base_path: string
  up: boolean
  range_ok: boolean | null
  sign_scheme: string | null
  sign_secret: string | null
  sign_ttl_seconds: number
}
const MIRROR_COLUMNS = ['id', 'identifier', 'http_url', 'https_url', 'base_path', 'up', 'range_ok', 'sign_scheme', 'sign_secret', 'sign_ttl_seconds'] as const

/**
 * Runs one round of content checks and records its verdicts.
 * @throws MbError MIRROR_NOT_FOUND when a named mirror does not exist (nothing is checked then)
 */
export async function checkMirrorContents(database: Database, config: ProbeConfig, options: ContentRoundOptions = {}): Promise<ContentRound> {
  const at = new Date()
  const budget = options.budgetBytes ?? config.content_budget_bytes
  const mirrors = await chooseMirrors(database, options.names ?? [])
  const limit = pLimit(options.jobs ?? config.jobs)
  // Read only when some mirror will be checked: a round of down mirrors costs no file read.
  let sample: Promise<RoundSample> | undefined
  const sampled = () => (sample ??= roundSample(database.db, budget))
  const plan = async (m: MirrorRow) => planContentChecks(await contentCandidates(database.db, m.id, budget, await sampled()), budget)
  const results = await Promise.all(mirrors.map((m) => limit(() => checkOneMirror(database, config, m, plan, options))))
  const checks = results.flatMap((r) => r.checks)
  return {
    at: at.toISOString(),
    budget_bytes: budget,
    checked: checks.filter((c) => c.verdict === 'ok' || c.verdict === 'corrupt').length,
    corrupt: checks.filter((c) => c.verdict === 'corrupt').length,
    unchecked: checks.filter((c) => UNCHECKED.has(c.verdict)).length,
    marked_bad: results.reduce((n, r) => n + r.marked_bad, 0),
    cleared: results.reduce((n, r) => n + r.cleared, 0),
    mirrors: results,
  }
}

/**
 * Checks one copy at once: the copy of `path` on mirror `mirrorId`, its piece found corrupt
 * before when there is one, else the whole copy from piece 0 (at most `maxBytes`, default
 * `probe.content_budget_bytes`; a longer copy's check goes on in the rounds). The verdicts are
 * recorded as a round's are, unless `signal` aborted the check (`mb serve` stopping).
 * @returns the mirror's result, or undefined when the mirror does not exist or does not hold a hashed current copy of `path`
 */
export async function checkCopy(
  database: Database,
  config: ProbeConfig,
  mirrorId: number,
  path: string,
  options: {maxBytes?: number; resolver?: Resolver; signal?: AbortSignal} = {},
): Promise<MirrorContentResult | undefined> {
  const m = await database.db.selectFrom('mirror').select(MIRROR_COLUMNS).where('id', '=', mirrorId).executeTakeFirst()
  const copy = m && (await copyCandidate(database.db, mirrorId, path))
  if (!m || !copy) return undefined
  const whole: ContentCandidate = {...copy, nextPiece: 0, wholeAt: undefined}
  const plan = async () => planContentChecks({bad: copy.badPiece === undefined ? [] : [copy], held: [whole]}, options.maxBytes ?? config.content_budget_bytes)
  return checkOneMirror(database, config, m, plan, options)
}

async function chooseMirrors(database: Database, names: string[]): Promise<MirrorRow[]> {
  let query = database.db.selectFrom('mirror').select(MIRROR_COLUMNS).orderBy('identifier')
  query = names.length > 0 ? query.where('identifier', 'in', names) : query.where('enabled', '=', true)
  const mirrors = await query.execute()
  const missing = names.filter((n) => !mirrors.some((m) => m.identifier === n))
  if (missing.length > 0) throw new MbError(`No mirror named ${missing.map((n) => `"${n}"`).join(', ')}. See \`mb mirror list\` for the registered identifiers.`, {code: 'MIRROR_NOT_FOUND'})
  return mirrors
}

/** What one mirror's checks found, to record. */
interface Findings {
  corrupt: CopyVerdict[]
  passed: CopyVerdict[]
  missing: CopyVerdict[]
  records: CheckRecord[]
}

/** Why a mirror's checks were not recorded when `mb serve` stopped during them. */
const STOPPED = 'the round was stopped'

/** Plans, fetches and records one mirror's checks. */
async function checkOneMirror(
  database: Database,
  config: ProbeConfig,
  m: MirrorRow,
  planFor: (m: MirrorRow) => Promise<PlannedCheck[]>,
  options: {resolver?: Resolver; signal?: AbortSignal},
): Promise<MirrorContentResult> {
  const result: MirrorContentResult = {id: m.id, identifier: m.identifier, bytes: 0, checks: [], marked_bad: 0, cleared: 0, removed_missing: 0, unchecked: 0}
  const baseUrl = m.https_url ?? m.http_url
  const sign = compileSigner(m.sign_scheme, m.sign_secret, m.sign_ttl_seconds)
  if (!baseUrl) return {...result, skipped: 'no HTTP or HTTPS URL'}
  if (!m.up) return {...result, skipped: 'down'}
  if (m.range_ok === false) return {...result, skipped: 'no range: probing found it answers a ranged request with the whole file'}
  if (options.signal?.aborted) return {...result, skipped: STOPPED}
  const plan = await planFor(m)
  if (plan.length === 0) return {...result, skipped: 'no held file with SHA-1 pieces (`mb index --hashes`) fits the budget'}
  const digests = await pieceDigests(
    database.db,
    plan.map((p) => ({fileId: p.candidate.fileId, piece: p.piece, pieces: p.pieces, size: p.candidate.size, mtime: p.candidate.mtime})),
  )
  const client = new ProbeClient(clientOptions(config, options.resolver, options.signal))
  const found: Findings = {corrupt: [], passed: [], missing: [], records: []}
  try {
    const family = await familyOf(client, baseUrl)
    for (const check of plan) {
      if (client.stopped) break
      const expected = digests.get(check.candidate.fileId)
      if (expected === undefined) continue // the index changed the file since the plan
      const unsigned = requestUrl(baseUrl, m.base_path ?? '', {kind: 'file', path: check.candidate.path})
      const url = sign ? sign(unsigned) : unsigned
      const read = await checkSpan(client, family, url, check, expected, config.timeout)
      result.bytes += read.bytes
      if (UNCHECKED.has(read.verdict)) result.unchecked++
      result.checks.push(noteFinding(found, check, url, read))
    }
  } finally {
    await client.close()
  }
  // Reads cut short by the stop say nothing about the copies; the next round checks them.
  if (client.stopped) return {...result, skipped: STOPPED}
  return {...result, ...(await record(database, config, m, found))}
}

/** Adds what one check found to `found`, and returns the check as `--json` shows it. */
function noteFinding(found: Findings, check: PlannedCheck, url: string, read: SpanRead): ContentCheckResult {
  const c = check.candidate
  const wasBad = c.badPiece !== undefined
  const copy = {fileId: c.fileId, size: c.size, mtime: c.mtime}
  const count = pieceCount(c.size, c.pieceSize)
  const reached = check.piece + read.piecesOk
  const whole = read.verdict === 'ok' && !wasBad && reached >= count
  if (read.verdict === 'corrupt') found.corrupt.push({...copy, piece: read.badPiece ?? check.piece})
  else if (read.verdict === 'ok' && wasBad) found.passed.push({...copy, piece: check.piece})
  else if (read.verdict === 'missing') found.missing.push({...copy, piece: check.piece})
  if (read.verdict !== 'missing') {
    const judged = read.verdict === 'ok' || read.verdict === 'corrupt' || read.piecesOk > 0
    // A bad piece that passes, or a corrupt copy, is checked whole again from piece 0.
    const nextPiece = read.verdict === 'corrupt' || wasBad || reached >= count ? 0 : reached
    found.records.push({...copy, read: judged, nextPiece, whole, corrupt: read.verdict === 'corrupt', ...(UNCHECKED.has(read.verdict) ? {unchecked: read.detail} : {})})
  }
  return {path: c.path, piece: check.piece, pieces: check.pieces, start: check.start, end: check.end, url, verdict: read.verdict, detail: read.detail, http_status: read.status, was_bad: wasBad, whole}
}

/** Tries to take a mirror's scan lock this many times, {@link LOCK_RETRY_MS} apart, before a check's findings count as not recorded. */
const LOCK_TRIES = 20
const LOCK_RETRY_MS = 250

/**
 * Writes one mirror's findings under its scan lock; the counts for its result. Another check
 * of the same mirror (a round, a check a retry asked for) holds the lock for a write of its
 * own, so a busy lock is tried again for a few seconds; a scan holds it longer, and then the
 * findings are reported as not recorded.
 */
async function record(database: Database, config: ProbeConfig, m: MirrorRow, found: Findings): Promise<Partial<MirrorContentResult>> {
  const {corrupt, passed, missing, records} = found
  const write = () =>
    database.db.transaction().execute(async (trx) => {
      await recordChecks(trx, m.id, records)
      return {
        ...(await recordContentVerdicts(trx, m.id, corrupt, passed)),
        removed: await removeMissingCopies(trx, m.id, missing),
        suspect: (await updateBadCopiesSuspect(trx, m.id, config.suspect_bad_copies)).suspect,
      }
    })
  // Recorded even when nothing changed: the suspect mark follows the count of corrupt copies,
  // which scans change too.
  for (let attempt = 1; ; attempt++) {
    const recorded = await database.withLock(scanLock(m.id), write, () => undefined)
    if (recorded !== undefined) return {marked_bad: recorded.marked, cleared: recorded.cleared, removed_missing: recorded.removed, suspect: recorded.suspect}
    if (attempt >= LOCK_TRIES) break
    await new Promise((resolve) => setTimeout(resolve, LOCK_RETRY_MS))
  }
  return corrupt.length + passed.length + missing.length === 0 ? {} : {not_recorded: 'a scan of this mirror was running; run the content check again'}
}

/** The address family to check over: IPv4 when the host has it, else IPv6; undefined when it does not resolve. */
async function familyOf(client: ProbeClient, baseUrl: string): Promise<Family | undefined> {
  try {
    const families = await client.families(new URL(baseUrl).hostname)
    return families.has('ipv4') ? 'ipv4' : families.has('ipv6') ? 'ipv6' : undefined
  } catch {
    return undefined
  }
}

/** What the requests of one span found: the verdict of the first request that was not `ok` (or `ok`), and the pieces that matched before it. */
interface SpanRead {
  verdict: ContentVerdict
  detail: string
  status: number | null
  bytes: number
  piecesOk: number
  badPiece?: number
}

/** Reads a planned span in requests of at most {@link MAX_REQUEST_BYTES}, one after another, stopping at the first that is not `ok`. */
async function checkSpan(client: ProbeClient, family: Family | undefined, url: string, check: PlannedCheck, expected: readonly string[], timeout: number): Promise<SpanRead> {
  const c = check.candidate
  const perRequest = Math.max(1, Math.floor(MAX_REQUEST_BYTES / c.pieceSize))
  const read: SpanRead = {verdict: 'ok', detail: '', status: null, bytes: 0, piecesOk: 0}
  for (let done = 0; done < check.pieces; ) {
    const pieces = Math.min(perRequest, check.pieces - done)
    const piece = check.piece + done
    const part = {piece, pieces, ...spanRange(c.size, c.pieceSize, piece, pieces)}
    const answer: PieceAnswer = family === undefined ? {status: null, bytes: 0, failure: 'dns'} : await fetchRange(client, family, url, part, c.pieceSize, timeout + part.length / MIN_RATE)
    const verdict = contentVerdict({...part, size: c.size}, expected.slice(done, done + pieces), answer)
    read.bytes += answer.bytes
    read.status = answer.status
    Object.assign(read, {verdict: verdict.verdict, detail: verdict.detail})
    if (verdict.verdict !== 'ok') return verdict.badPiece === undefined ? read : {...read, badPiece: verdict.badPiece}
    done += pieces
    read.piecesOk = done
  }
  if (check.pieces > 1) read.detail = `SHA-1 of pieces ${check.piece}-${check.piece + check.pieces - 1} match`
  return read
}

/**
 * Fetches bytes `range.start`-`range.end` of `url` over `family` and hashes each piece as it
 * streams: a `206` body is read up to the range's length, a `200` body (the whole file) is not
 * read at all. Redirects within the URL's own scheme, host and port are followed
 * (`probe.max_redirects`). Never throws: failures are a null status with a reason code.
 */
async function fetchRange(client: ProbeClient, family: Family, url: string, range: {start: number; end: number; length: number}, pieceSize: number, timeoutSeconds: number): Promise<PieceAnswer> {
  const answer = await getWithinOrigin(
    client,
    family,
    url,
    {range: `bytes=${range.start}-${range.end}`},
    async (response): Promise<PieceAnswer> => {
      const status = response.statusCode
      if (status !== 206) {
        response.body.destroy()
        return {status, bytes: 0}
      }
      const contentRange = parseContentRange(response.headers['content-range'] as string | undefined)
      const {bytes, sha1s} = await digestPieces(response.body, pieceSize, range.length)
      return {status, contentRange, bytes, sha1s}
    },
    timeoutSeconds,
  )
  return 'failure' in answer ? {status: null, bytes: 0, failure: answer.failure} : answer
}
