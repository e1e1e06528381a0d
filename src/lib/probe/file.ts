/**
 * `mb probe file PATH`: ask every mirror that claims a file whether it really serves it, at
 * which size. "Claims" means the file's mirror set (`file.mirrors`, copies that matched at
 * the last scan) plus mirrors with a stale record (`mirror_file_stale`, copies that differed).
 *
 * Each mirror gets one `GET` with `Range: bytes=0-0`; the size comes from `Content-Range`
 * (206, RFC 9110 §14.4) or `Content-Length` (200). Redirects follow the probe policy.
 */
import pLimit from 'p-limit'
import {sql, type Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {MbError} from '../errors.js'
import type {ProbeConfig} from './config.js'
import {ProbeClient, type Family, type Resolver, classifyError} from './http.js'
import {requestUrl} from './probe.js'
import {clientOptions} from './run.js'
import {trimLeadingSlashes} from '../text.js'

/** How a mirror's copy compares to the origin. */
export type FileVerdict = 'ok' | 'stale' | 'missing' | 'unknown_size' | 'error'

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
}

/** The file and every claiming mirror's answer. */
export interface FileProbeResult {
  path: string
  size: number
  mtime: number
  mirrors: FileProbeRow[]
  counts: Record<FileVerdict, number>
}

/**
 * Probes `path` (origin-relative; a leading slash is ignored) on every claiming mirror.
 *
 * @param options.protocol  which base URL to use: `https` prefers HTTPS (default), `http`
 *                          prefers HTTP; the other is used when the preferred one is missing
 * @throws MbError FILE_NOT_FOUND when the origin index has no such file
 */
export async function probeFile(db: Kysely<DB>, config: ProbeConfig, path: string, options: {protocol?: 'http' | 'https'; jobs?: number; resolver?: Resolver} = {}): Promise<FileProbeResult> {
  const clean = trimLeadingSlashes(path)
  const file = await db.selectFrom('file').select(['id', 'path', 'size', 'mtime', 'mirrors']).where('path', '=', clean).executeTakeFirst()
  if (!file) throw new MbError(`The origin index has no file "${clean}". Check the path (relative to the origin root) or run \`mb index\` first.`, {code: 'FILE_NOT_FOUND'})
  const stale = await db.selectFrom('mirror_file_stale').select(['mirror_id', 'size']).where('file_id', '=', file.id).execute()
  const staleSize = new Map(stale.map((s) => [s.mirror_id, s.size]))
  const ids = [...new Set([...file.mirrors, ...staleSize.keys()])]
  const mirrors =
    ids.length === 0
      ? []
      : await db.selectFrom('mirror').select(['id', 'identifier', 'http_url', 'https_url', 'base_path']).where(sql<boolean>`id = ANY(${ids}::smallint[])`).orderBy('identifier').execute()
  const prefer = options.protocol ?? 'https'
  const limit = pLimit(options.jobs ?? config.jobs)
  const rows = await Promise.all(
    mirrors.map((m) =>
      limit(async (): Promise<FileProbeRow> => {
        const claim = file.mirrors.includes(m.id) ? 'held' : 'stale_record'
        const baseUrl = prefer === 'https' ? (m.https_url ?? m.http_url) : (m.http_url ?? m.https_url)
        const row: FileProbeRow = {
          mirror: m.identifier,
          mirror_id: m.id,
          claim,
          scanned_size: staleSize.get(m.id) ?? null,
          url: null,
          verdict: 'error',
          http_status: null,
          size: null,
          reason: 'no_url',
          latency_ms: null,
        }
        if (!baseUrl) return row
        row.url = requestUrl(baseUrl, m.base_path, {kind: 'file', path: file.path})
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
          const outcome = await client.check(row.url, family, baseUrl)
          row.http_status = outcome.httpStatus
          row.latency_ms = outcome.latencyMs
          row.size = outcome.size
          row.reason = outcome.reason
          if (outcome.ok) row.verdict = outcome.size === null ? 'unknown_size' : outcome.size === file.size ? 'ok' : 'stale'
          else if (outcome.httpStatus === 404 || outcome.httpStatus === 410) row.verdict = 'missing'
          else row.verdict = 'error'
          return row
        } finally {
          await client.close()
        }
      }),
    ),
  )
  const counts: Record<FileVerdict, number> = {ok: 0, stale: 0, missing: 0, unknown_size: 0, error: 0}
  for (const r of rows) counts[r.verdict]++
  return {path: file.path, size: file.size, mtime: file.mtime, mirrors: rows, counts}
}
