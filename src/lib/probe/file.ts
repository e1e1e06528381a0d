/**
 * `mb probe file PATH`: ask every mirror that claims a file whether it really serves it, at
 * which size. "Claims" means the file's mirror set (`file.mirrors`, copies that matched at
 * the last scan) plus mirrors with a stale record (`mirror_file_stale`, copies that differed).
 *
 * Each mirror gets one `GET` with `Range: bytes=0-0`; the size comes from `Content-Range`
 * (206, RFC 9110 §14.4) or `Content-Length` (200). Redirects follow the probe policy.
 *
 * With `hash`, a copy of the right size is then fetched whole (one `GET`, redirects within the
 * mirror's own scheme, host and port, all within `probe.timeout`) and its bytes hashed with
 * the strongest digest the index holds for the file's current version (SHA-256, SHA-1, MD5),
 * by the reader the content checks use (./http.ts `digestBody`).
 */
import pLimit from 'p-limit'
import {sql, type Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {MbError} from '../errors.js'
import type {ProbeConfig} from './config.js'
import {ProbeClient, type Family, type Resolver, classifyError, digestBody, getWithinOrigin} from './http.js'
import {requestUrl} from './probe.js'
import {compileSigner} from '../sign.js'
import {clientOptions} from './run.js'
import {trimLeadingSlashes} from '../text.js'

/** How a mirror's copy compares to the origin. */
export type FileVerdict = 'ok' | 'stale' | 'missing' | 'unknown_size' | 'corrupt' | 'error'

/** One mirror's answer about the file. Sizes in bytes, latency in milliseconds. */
export interface FileProbeRow {
  mirror: string
  mirror_id: number
  /** Why the mirror is asked: `held` (in the file's mirror set) or `stale_record`. */
  claim: 'held' | 'stale_record'
  /** Size the last scan saw for a stale record. */
  scanned_size: number | null
  url: string | null
  verdict: FileVerdict
  http_status: number | null
  size: number | null
  reason: string
  latency_ms: number | null
  /** With `hash`: whether the copy's bytes match the index's digest (`corrupt` when not); null when not compared. */
  hash: 'match' | 'mismatch' | null
}

/** The file and every claiming mirror's answer. */
export interface FileProbeResult {
  path: string
  size: number
  mtime: number
  /** The digest the copies were compared with (`sha256`, `sha1`, `md5`), null without `hash`. */
  hash_algorithm: string | null
  mirrors: FileProbeRow[]
  counts: Record<FileVerdict, number>
}

/** The indexed file as the probe reads it. */
type IndexedRow = {
  id: number
  path: string
  size: number
  mtime: number
  mirrors: number[]
  md5: string | null
  sha1: string | null
  sha256: string | null
  hashed_size: number | null
  hashed_mtime: number | null
}
type MirrorRow = {
  id: number
  identifier: string
  http_url: string | null
  https_url: string | null
  base_path: string
  sign_scheme: string | null
  sign_secret: string | null
  sign_ttl_seconds: number
}
/** A digest to compare copies with: node:crypto's name and the index's hex value. */
type Digest = {algorithm: string; hex: string}

/** The strongest digest the index holds of the file's current version (origin/freshness.ts), or undefined. */
function currentDigest(file: IndexedRow): Digest | undefined {
  if (file.hashed_size !== file.size || file.hashed_mtime !== file.mtime) return undefined
  if (file.sha256) return {algorithm: 'sha256', hex: file.sha256}
  if (file.sha1) return {algorithm: 'sha1', hex: file.sha1}
  if (file.md5) return {algorithm: 'md5', hex: file.md5}
  return undefined
}

/**
 * Probes `path` (origin-relative; a leading slash is ignored) on every claiming mirror.
 *
 * @param options.protocol  which base URL to use: `https` prefers HTTPS (default), `http`
 *                          prefers HTTP; the other is used when the preferred one is missing
 * @param options.hash      also fetch each copy of the right size whole and compare its digest (see the module doc)
 * @throws MbError FILE_NOT_FOUND when the origin index has no such file; HASH_UNAVAILABLE with
 *   `hash` when the index holds no digest of the file's current version
 */
export async function probeFile(
  db: Kysely<DB>,
  config: ProbeConfig,
  path: string,
  options: {protocol?: 'http' | 'https'; jobs?: number; resolver?: Resolver; hash?: boolean} = {},
): Promise<FileProbeResult> {
  const clean = trimLeadingSlashes(path)
  const file = await db.selectFrom('file').select(['id', 'path', 'size', 'mtime', 'mirrors', 'md5', 'sha1', 'sha256', 'hashed_size', 'hashed_mtime']).where('path', '=', clean).executeTakeFirst()
  if (!file) throw new MbError(`The origin index has no file "${clean}". Check the path (relative to the origin root) or run \`mb index\` first.`, {code: 'FILE_NOT_FOUND'})
  const digest = options.hash ? currentDigest(file) : undefined
  if (options.hash && !digest) throw new MbError(`The index holds no hash of the current version of "${clean}". Run \`mb index --hashes\` first.`, {code: 'HASH_UNAVAILABLE'})
  const stale = await db.selectFrom('mirror_file_stale').select(['mirror_id', 'size']).where('file_id', '=', file.id).execute()
  const staleSize = new Map(stale.map((s) => [s.mirror_id, s.size]))
  const ids = [...new Set([...file.mirrors, ...staleSize.keys()])]
  const mirrors =
    ids.length === 0
      ? []
      : await db
          .selectFrom('mirror')
          .select(['id', 'identifier', 'http_url', 'https_url', 'base_path', 'sign_scheme', 'sign_secret', 'sign_ttl_seconds'])
          .where(sql<boolean>`id = ANY(${ids}::smallint[])`)
          .orderBy('identifier')
          .execute()
  const limit = pLimit(options.jobs ?? config.jobs)
  const rows = await Promise.all(mirrors.map((m) => limit(() => probeCopy(config, file, m, staleSize.get(m.id) ?? null, digest, options))))
  const counts: Record<FileVerdict, number> = {ok: 0, stale: 0, missing: 0, unknown_size: 0, corrupt: 0, error: 0}
  for (const r of rows) counts[r.verdict]++
  return {path: file.path, size: file.size, mtime: file.mtime, hash_algorithm: digest?.algorithm ?? null, mirrors: rows, counts}
}

/** One mirror's answer: its size by a one-byte ranged GET, then, with `digest`, its bytes. */
async function probeCopy(
  config: ProbeConfig,
  file: IndexedRow,
  m: MirrorRow,
  scannedSize: number | null,
  digest: Digest | undefined,
  options: {protocol?: 'http' | 'https'; resolver?: Resolver},
): Promise<FileProbeRow> {
  const claim = file.mirrors.includes(m.id) ? 'held' : 'stale_record'
  const baseUrl = (options.protocol ?? 'https') === 'https' ? (m.https_url ?? m.http_url) : (m.http_url ?? m.https_url)
  const row: FileProbeRow = {
    mirror: m.identifier,
    mirror_id: m.id,
    claim,
    scanned_size: scannedSize,
    url: null,
    verdict: 'error',
    http_status: null,
    size: null,
    reason: 'no_url',
    latency_ms: null,
    hash: null,
  }
  if (!baseUrl) return row
  const unsigned = requestUrl(baseUrl, m.base_path, {kind: 'file', path: file.path})
  const sign = compileSigner(m.sign_scheme, m.sign_secret, m.sign_ttl_seconds)
  const url = sign ? sign(unsigned) : unsigned
  row.url = url
  const client = new ProbeClient(clientOptions(config, options.resolver))
  try {
    let family: Family
    try {
      const families = await client.families(new URL(baseUrl).hostname)
      family = families.has('ipv4') ? 'ipv4' : 'ipv6'
      if (families.size === 0) throw Object.assign(new Error('no address'), {code: 'ENOTFOUND'})
    } catch (error) {
      const reason = classifyError(error)
      return {...row, reason: reason === 'error' ? 'dns' : reason}
    }
    const outcome = await client.check(url, family, baseUrl)
    row.http_status = outcome.httpStatus
    row.latency_ms = outcome.latencyMs
    row.size = outcome.size
    row.reason = outcome.reason
    if (outcome.ok) row.verdict = outcome.size === null ? 'unknown_size' : outcome.size === file.size ? 'ok' : 'stale'
    else if (outcome.httpStatus === 404 || outcome.httpStatus === 410) row.verdict = 'missing'
    else row.verdict = 'error'
    if (digest && row.verdict === 'ok') Object.assign(row, await compareBytes(client, family, url, file.size, digest))
    return row
  } finally {
    await client.close()
  }
}

/** Fetches the copy at `url` whole and compares its digest: `corrupt` when it differs, `error` when its bytes could not be read. */
async function compareBytes(client: ProbeClient, family: Family, url: string, size: number, digest: Digest): Promise<Pick<FileProbeRow, 'verdict' | 'reason' | 'hash'>> {
  const answer = await getWithinOrigin(client, family, url, {}, async (response): Promise<{status: number; bytes: number; digest?: string}> => {
    if (response.statusCode !== 200) {
      response.body.destroy()
      return {status: response.statusCode, bytes: 0}
    }
    return {status: 200, ...(await digestBody(response.body, digest.algorithm, size))}
  })
  if ('failure' in answer) return {verdict: 'error', reason: `hash read: ${answer.failure}`, hash: null}
  if (answer.status !== 200) return {verdict: 'error', reason: `hash read: HTTP ${answer.status}`, hash: null}
  if (answer.digest === undefined) return {verdict: 'error', reason: `hash read: a body of ${answer.bytes > size ? `more than ${size}` : answer.bytes} bytes, origin ${size}`, hash: null}
  if (answer.digest !== digest.hex.toLowerCase()) return {verdict: 'corrupt', reason: `${digest.algorithm} ${answer.digest}, index ${digest.hex}`, hash: 'mismatch'}
  return {verdict: 'ok', reason: `${digest.algorithm} matches`, hash: 'match'}
}
