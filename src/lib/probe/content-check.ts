/**
 * `mb probe --content`: a round of content checks over many mirrors. For each mirror, plan
 * the checks within the byte budget (./content.ts), fetch each planned piece with one ranged
 * `GET` (`Range: bytes=start-end`, RFC 9110 §14.2) over the probe's connection pools
 * (./http.ts), compare its SHA-1 with the index's, and record the verdicts
 * (./content-store.ts) under the mirror's scan lock.
 *
 * The mirror's `https_url` is used when it has one, else its `http_url`; the path goes below
 * the base URL as redirects write it (base path applied, segments percent-encoded). Redirects
 * are followed within the mirror's own scheme, host and port only: a content check vouches
 * for the mirror's own bytes. A mirror that probing found answers a ranged request with the
 * whole file (`mirror.range_ok = false`) is skipped, and so is one that is down; a `200`
 * answer is not read (`no_range`).
 */
import pLimit from 'p-limit'
import type {Database} from '../db/index.js'
import {scanLock} from '../db/named-locks.js'
import type {ProbeConfig} from './config.js'
import {type ContentVerdict, contentVerdict, type PieceAnswer, parseContentRange, type PlannedCheck, planContentChecks} from './content.js'
import {contentCandidates, type CopyVerdict, pieceDigests, type RoundSample, recordContentVerdicts, removeMissingCopies, roundSample, updateBadCopiesSuspect} from './content-store.js'
import {digestBody, type Family, getWithinOrigin, ProbeClient, type Resolver} from './http.js'
import {requestUrl} from './probe.js'
import {clientOptions} from './run.js'
import {MbError} from '../errors.js'

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
  /** Random numbers in [0, 1) for the piece choice (tests). */
  random?: () => number
}

/** One check, as `--json` shows it. Bytes; times UTC. */
export interface ContentCheckResult {
  path: string
  /** 0-based piece index and its byte range (inclusive). */
  piece: number
  start: number
  end: number
  url: string
  verdict: ContentVerdict
  detail: string
  http_status: number | null
  /** The copy had been found corrupt before this check. */
  was_bad: boolean
}

/** One mirror's part of the round. */
export interface MirrorContentResult {
  id: number
  identifier: string
  /** Why the mirror was not checked (down, no range, no URL, nothing to check). */
  skipped?: string
  /** Bytes of the pieces fetched (planned ranges). */
  bytes: number
  checks: ContentCheckResult[]
  /** Copies newly found corrupt (taken out of the mirror's sets), and corrupt copies that pass now (put back). */
  marked_bad: number
  cleared: number
  /** Copies the mirror answered 404/410 for, taken out of their files' mirror sets until a scan lists them again. */
  removed_missing: number
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
  marked_bad: number
  cleared: number
  mirrors: MirrorContentResult[]
}

type MirrorRow = {id: number; identifier: string; http_url: string | null; https_url: string | null; base_path: string; up: boolean; range_ok: boolean | null}

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
  const results = await Promise.all(mirrors.map((m) => limit(() => checkOneMirror(database, config, m, budget, sampled, options))))
  const checks = results.flatMap((r) => r.checks)
  return {
    at: at.toISOString(),
    budget_bytes: budget,
    checked: checks.filter((c) => c.verdict === 'ok' || c.verdict === 'corrupt').length,
    corrupt: checks.filter((c) => c.verdict === 'corrupt').length,
    marked_bad: results.reduce((n, r) => n + r.marked_bad, 0),
    cleared: results.reduce((n, r) => n + r.cleared, 0),
    mirrors: results,
  }
}

async function chooseMirrors(database: Database, names: string[]): Promise<MirrorRow[]> {
  let query = database.db.selectFrom('mirror').select(['id', 'identifier', 'http_url', 'https_url', 'base_path', 'up', 'range_ok']).orderBy('identifier')
  query = names.length > 0 ? query.where('identifier', 'in', names) : query.where('enabled', '=', true)
  const mirrors = await query.execute()
  const missing = names.filter((n) => !mirrors.some((m) => m.identifier === n))
  if (missing.length > 0) throw new MbError(`No mirror named ${missing.map((n) => `"${n}"`).join(', ')}. See \`mb mirror list\` for the registered identifiers.`, {code: 'MIRROR_NOT_FOUND'})
  return mirrors
}

/** Plans, fetches and records one mirror's checks. */
async function checkOneMirror(database: Database, config: ProbeConfig, m: MirrorRow, budget: number, sample: () => Promise<RoundSample>, options: ContentRoundOptions): Promise<MirrorContentResult> {
  const result: MirrorContentResult = {id: m.id, identifier: m.identifier, bytes: 0, checks: [], marked_bad: 0, cleared: 0, removed_missing: 0}
  const baseUrl = m.https_url ?? m.http_url
  if (!baseUrl) return {...result, skipped: 'no HTTP or HTTPS URL'}
  if (!m.up) return {...result, skipped: 'down'}
  if (m.range_ok === false) return {...result, skipped: 'no range: probing found it answers a ranged request with the whole file'}
  const plan = planContentChecks(await contentCandidates(database.db, m.id, budget, await sample()), budget, options.random)
  if (plan.length === 0) return {...result, skipped: 'no held file with SHA-1 pieces (`mb index --hashes`) fits the budget'}
  const digests = await pieceDigests(
    database.db,
    plan.map((p) => ({fileId: p.candidate.fileId, piece: p.piece, size: p.candidate.size, mtime: p.candidate.mtime})),
  )
  const client = new ProbeClient(clientOptions(config, options.resolver))
  const corrupt: CopyVerdict[] = []
  const passed: CopyVerdict[] = []
  const missing: CopyVerdict[] = []
  try {
    const family = await familyOf(client, baseUrl)
    for (const check of plan) {
      const expected = digests.get(`${check.candidate.fileId}:${check.piece}`)
      if (expected === undefined) continue // the index changed the file since the plan
      const url = requestUrl(baseUrl, m.base_path ?? '', {kind: 'file', path: check.candidate.path})
      const answer = family === undefined ? {status: null, bytes: 0, failure: 'dns'} : await fetchPiece(client, family, url, check)
      const {verdict, detail} = contentVerdict({...check, size: check.candidate.size}, expected, answer)
      result.bytes += answer.bytes
      const wasBad = check.candidate.badPiece !== undefined
      result.checks.push({path: check.candidate.path, piece: check.piece, start: check.start, end: check.end, url, verdict, detail, http_status: answer.status, was_bad: wasBad})
      const copy = {fileId: check.candidate.fileId, size: check.candidate.size, mtime: check.candidate.mtime, piece: check.piece}
      if (verdict === 'corrupt') corrupt.push(copy)
      else if (verdict === 'ok' && wasBad) passed.push(copy)
      else if (verdict === 'missing') missing.push(copy)
    }
  } finally {
    await client.close()
  }
  // Recorded even when nothing changed: the suspect mark follows the count of corrupt copies,
  // which scans change too.
  const recorded = await database.withLock(
    scanLock(m.id),
    () =>
      database.db.transaction().execute(async (trx) => ({
        ...(await recordContentVerdicts(trx, m.id, corrupt, passed)),
        removed: await removeMissingCopies(trx, m.id, missing),
        suspect: (await updateBadCopiesSuspect(trx, m.id, config.suspect_bad_copies)).suspect,
      })),
    () => undefined,
  )
  if (recorded === undefined) return corrupt.length + passed.length + missing.length === 0 ? result : {...result, not_recorded: 'a scan of this mirror was running; run the content check again'}
  return {...result, marked_bad: recorded.marked, cleared: recorded.cleared, removed_missing: recorded.removed, suspect: recorded.suspect}
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

/**
 * Fetches bytes `check.start`-`check.end` of `url` over `family` and hashes them: a `206`
 * body is read up to the piece's length, a `200` body (the whole file) is not read at all.
 * Redirects within the URL's own scheme, host and port are followed (`probe.max_redirects`).
 * Never throws: failures are a null status with a reason code.
 */
async function fetchPiece(client: ProbeClient, family: Family, url: string, check: PlannedCheck): Promise<PieceAnswer> {
  const answer = await getWithinOrigin(client, family, url, {range: `bytes=${check.start}-${check.end}`}, async (response): Promise<PieceAnswer> => {
    const status = response.statusCode
    if (status !== 206) {
      response.body.destroy()
      return {status, bytes: 0}
    }
    const contentRange = parseContentRange(response.headers['content-range'] as string | undefined)
    const {bytes, digest} = await digestBody(response.body, 'sha1', check.length)
    return {status, contentRange, bytes, ...(digest === undefined ? {} : {sha1: digest})}
  })
  return 'failure' in answer ? {status: null, bytes: 0, failure: answer.failure} : answer
}
