/**
 * Reading each mirror's copy of the sync trace file (`sync.trace_path`,
 * src/lib/sync/trace.ts) in a probe round, and recording what it says on the mirror row
 * (`synced_at`, `sync_error`, `sync_validator`; migration 0022).
 *
 * One small GET per mirror and round, conditional (`If-None-Match` or `If-Modified-Since`,
 * RFC 9110 §13.1) when an earlier answer gave a validator, so that an unchanged trace costs
 * a `304`. At most {@link TRACE_MAX_BYTES} bytes are read. Redirects within the mirror's own
 * scheme, host and port are followed (`probe.max_redirects`).
 */
import type {Kysely} from 'kysely'
import type {DB} from '../db/schema.js'
import {parseTrace, syncLagSeconds, TRACE_MAX_BYTES, type TraceError} from '../sync/trace.js'
import {trimLeadingSlashes, withTrailingSlash} from '../text.js'
import {type Family, getWithinOrigin, mirrorFileUrl, type ProbeClient} from './http.js'

/** What a mirror's trace said: a time, no change since the validator, or why it could not be read. */
export type TraceRead = {kind: 'time'; at: Date; validator: string | null} | {kind: 'unchanged'} | {kind: 'error'; error: string}

/** The mirror fields a trace read needs. */
export interface TraceTarget {
  http_url: string | null
  https_url: string | null
  base_path: string
  sync_validator: string | null
}

/**
 * The trace's URL on `mirror` (HTTPS first), or an error when the mirror has no HTTP(S) URL
 * or carries a subtree (`base_path`) that does not hold the trace.
 */
export function traceUrl(mirror: Pick<TraceTarget, 'http_url' | 'https_url' | 'base_path'>, tracePath: string): {url: string} | {error: string} {
  const base = mirror.https_url ?? mirror.http_url
  if (!base) return {error: 'no HTTP or HTTPS URL to read the trace from'}
  const subtree = trimLeadingSlashes(mirror.base_path ?? '')
  if (subtree && !trimLeadingSlashes(tracePath).startsWith(withTrailingSlash(subtree)))
    return {error: `the trace ${tracePath} lies outside the mirror's base_path ${subtree}: set sync.trace_path inside it, or read this mirror's syncs from its scans`}
  return {url: mirrorFileUrl(base, mirror.base_path ?? '', tracePath)}
}

function validatorHeaders(validator: string | null): Record<string, string> {
  if (validator?.startsWith('etag:')) return {'if-none-match': validator.slice(5)}
  if (validator?.startsWith('date:')) return {'if-modified-since': validator.slice(5)}
  return {}
}

function validatorOf(headers: Record<string, string | string[] | undefined>): string | null {
  const etag = headers.etag
  if (typeof etag === 'string' && etag) return `etag:${etag}`
  const modified = headers['last-modified']
  return typeof modified === 'string' && modified ? `date:${modified}` : null
}

/**
 * Reads the trace at `url` over `family`. Never throws: network failures, HTTP errors,
 * redirects off the mirror's host, oversized files and files that hold no time become
 * `{kind: 'error'}` with a message for `mb mirror show`.
 */
export async function readMirrorTrace(client: ProbeClient, family: Family, url: string, validator: string | null, now: Date = new Date()): Promise<TraceRead> {
  const read = await getWithinOrigin(client, family, url, validatorHeaders(validator), async (answer, finalUrl): Promise<TraceRead> => {
    const status = answer.statusCode
    if (status === 304) {
      await answer.body.dump().catch(() => {})
      return validator ? {kind: 'unchanged'} : {kind: 'error', error: 'HTTP 304 to an unconditional request'}
    }
    if (status !== 200) {
      await answer.body.dump({limit: 65536}).catch(() => {})
      return {kind: 'error', error: `HTTP ${status} for ${finalUrl.href}`}
    }
    const chunks: Buffer[] = []
    let received = 0
    for await (const chunk of answer.body) {
      chunks.push(chunk as Buffer)
      received += (chunk as Buffer).length
      if (received > TRACE_MAX_BYTES) {
        answer.body.destroy()
        return {kind: 'error', error: `the trace file has more than ${TRACE_MAX_BYTES} bytes: not a trace`}
      }
    }
    try {
      return {kind: 'time', at: parseTrace(Buffer.concat(chunks).toString('utf8'), now), validator: validatorOf(answer.headers)}
    } catch (error) {
      return {kind: 'error', error: (error as TraceError).message}
    }
  })
  if (!('failure' in read)) return read
  return {kind: 'error', error: read.failure.startsWith('redirect_offsite: ') ? `the trace redirects to another host: ${read.failure.slice(18)}` : read.failure}
}

/**
 * Records a trace read on the mirror row, writing only what changed (a mirror whose trace
 * did not move leaves its row untouched, so `mb serve` sees no change).
 */
export async function recordTrace(db: Kysely<DB>, mirrorId: number, read: TraceRead): Promise<void> {
  if (read.kind === 'unchanged') {
    await db.updateTable('mirror').set({sync_error: null}).where('id', '=', mirrorId).where('sync_error', 'is not', null).execute()
    return
  }
  if (read.kind === 'error') {
    // The validator goes with the error: the next read is unconditional and sees the file whole.
    await db
      .updateTable('mirror')
      .set({sync_error: read.error, sync_validator: null})
      .where('id', '=', mirrorId)
      .where((eb) => eb.or([eb('sync_error', 'is', null), eb('sync_error', '<>', read.error), eb('sync_validator', 'is not', null)]))
      .execute()
    return
  }
  await db
    .updateTable('mirror')
    .set({synced_at: read.at, sync_error: null, sync_validator: read.validator})
    .where('id', '=', mirrorId)
    .where((eb) =>
      eb.or([
        eb('synced_at', 'is', null),
        eb('synced_at', '<>', read.at),
        eb('sync_error', 'is not', null),
        read.validator === null ? eb('sync_validator', 'is not', null) : eb.or([eb('sync_validator', 'is', null), eb('sync_validator', '<>', read.validator)]),
      ]),
    )
    .execute()
}

/**
 * Seconds behind the origin (by traces, {@link syncLagSeconds}) of each of `mirrorIds` whose
 * trace was read and is not in error.
 * @param originTrace  the origin's own trace time (null: now)
 */
export async function mirrorLags(db: Kysely<DB>, mirrorIds: number[], originTrace: Date | null): Promise<Array<{name: string; seconds: number}>> {
  if (mirrorIds.length === 0) return []
  const rows = await db
    .selectFrom('mirror')
    .select(['identifier', 'synced_at'])
    .where('id', 'in', mirrorIds)
    .where('sync_error', 'is', null)
    .where('synced_at', 'is not', null)
    .orderBy('identifier')
    .execute()
  return rows.map((r) => ({name: r.identifier, seconds: syncLagSeconds(new Date(r.synced_at!), originTrace) ?? 0}))
}
