/**
 * Push sync, as OpenTTD's mirror balancer 2.0 does it (docs/push.md): for a mirror that does
 * not pull, mb uploads the origin tree to the mirror's `push_url` in three passes by size
 * (the small files, then the larger, then the largest), and after each pass lists the mirror
 * and reconciles that listing into the origin index exactly as `mb scan` does
 * (`../scan/reconcile.ts`). A file therefore starts redirecting to the mirror as soon as the
 * pass that carried it ends.
 *
 * Which files a mirror gets: the indexed origin files under its `base_path`, that pass its
 * `include_patterns` / `exclude_patterns` (what it carries) and, when set, its `push_include`
 * globs (the part of the tree pushed to it).
 *
 * A failed pass (refused, timed out, disk full, interrupted) stops the push and records why
 * on the mirror (`last_push_error`). mb still tries to list the mirror once: what the listing
 * confirms is held, and nothing else; when the mirror cannot be listed either, its records
 * stay as the last successful reconcile left them. Files the push did not confirm are thus
 * not served from the mirror (a changed origin file lost its mirrors when it was indexed,
 * and a copy at another size or mtime counts as stale), while its other files keep serving.
 *
 * Concurrency: the named lock `pushLock(mirror id)` (`db/named-locks.ts`) allows one push per
 * mirror at a time, across processes; a second is refused with PUSH_BUSY.
 */
import {join} from 'node:path'
import {sql} from 'kysely'
import picomatch from 'picomatch'
import type {Database} from '../db/index.js'
import {pushLock} from '../db/named-locks.js'
import type {MirrorRow} from '../db/schema.js'
import {inSubtree} from '../db/sql.js'
import {errorMessage, MbError} from '../errors.js'
import {redact} from '../redact.js'
import {type ReconcileResult, reconcileListing} from '../scan/reconcile.js'
import {rsyncLister} from '../scan/rsync.js'
import {trimSlashes} from '../text.js'
import {uploadFiles} from './rsync-push.js'

/** What {@link pushMirror} needs besides the mirror. */
export interface PushOptions {
  /** The origin tree (config `root`). */
  root: string
  /** Upper size bound in bytes of pass 1 (config push.small_max). */
  smallMax: number
  /** Upper size bound in bytes of pass 2 (config push.large_max); pass 3 takes the rest. */
  largeMax: number
  /** Budget in seconds for the whole push (config push.timeout). */
  timeoutSeconds?: number
  connectTimeoutSeconds?: number
  ioTimeoutSeconds?: number
  /** rsync `--password-file`. */
  passwordFile?: string
  env?: NodeJS.ProcessEnv
  /** Global scan.include / scan.exclude, applied as a scan applies them. */
  include?: string[]
  exclude?: string[]
  /** Aborts the push (Ctrl-C). */
  signal?: AbortSignal
  /** Called after each pass (and its reconcile) with its result. */
  onPass?: (mirror: string, pass: PushPass) => void
  /** Awaited between passes, after `onPass` (e.g. `mb push --pause-between`). */
  between?: (mirror: string, pass: PushPass) => Promise<void>
}

/** One pass: the files of a size band, uploaded, then confirmed by a listing. */
export interface PushPass {
  /** 1, 2 or 3. */
  pass: number
  /** Size band in bytes: min < size <= max (max null = no upper bound). */
  min: number
  max: number | null
  /** Files of the band sent (bytes in all). */
  files: number
  bytes: number
  ok: boolean
  /** Why the upload or the listing failed, or null. */
  error: string | null
  /** The reconcile after the pass (null when the mirror could not be listed). */
  matched: number | null
  stale: number | null
  missing: number | null
  added: number | null
  removed: number | null
  seconds: number
}

/** The outcome for one mirror, as `mb push --json` prints it. */
export interface PushMirrorResult {
  mirror: string
  ok: boolean
  error: string | null
  /** Files the push selected for the mirror (all passes). */
  files: number
  /** Origin files the mirror holds after the last reconcile (null when none ran). */
  matched: number | null
  passes: PushPass[]
  seconds: number
}

/** A file the push may send: its origin path and size in bytes. */
interface PushFile {
  path: string
  size: number
}

function secondsSince(started: number): number {
  return Math.round((performance.now() - started) / 10) / 100
}

/**
 * Pushes the origin tree to one mirror in three passes. Never throws for a push failure: the
 * result carries `ok: false` and the reason, recorded on the mirror (`last_push_error`),
 * except for PUSH_BUSY (another push of the mirror runs), which records nothing.
 * @throws MbError PUSH_NO_URL when the mirror has no push_url
 */
export async function pushMirror(database: Database, mirror: MirrorRow, options: PushOptions): Promise<PushMirrorResult> {
  if (!mirror.push_url)
    throw new MbError(`Mirror ${mirror.identifier} has no push URL. Give it one with \`mb mirror edit ${mirror.identifier} --push-url rsync://host/module/\`.`, {code: 'PUSH_NO_URL'})
  const started = performance.now()
  const busy = (): PushMirrorResult => ({
    mirror: mirror.identifier,
    ok: false,
    error: `another push to ${mirror.identifier} is running (in this or another process); this one was refused`,
    files: 0,
    matched: null,
    passes: [],
    seconds: secondsSince(started),
  })
  return database.withLock(pushLock(mirror.id), () => pushLocked(database, mirror, options, started), busy)
}

/** {@link pushMirror} under the mirror's push lock: the passes, then the outcome on the mirror. */
async function pushLocked(database: Database, mirror: MirrorRow, options: PushOptions, started: number): Promise<PushMirrorResult> {
  const budget = options.timeoutSeconds ?? 21600
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(new Error(`the push time budget of ${budget} s ran out`)), budget * 1000)
  const onOuterAbort = () => controller.abort(options.signal?.reason ?? new Error('interrupted'))
  options.signal?.addEventListener('abort', onOuterAbort, {once: true})
  const passes: PushPass[] = []
  let error: string | null = null
  let files = 0
  try {
    const selected = await filesToPush(database, mirror, options)
    files = selected.length
    for (const band of bands(options)) {
      const inBand = selected.filter((f) => f.size > band.min && (band.max === null || f.size <= band.max))
      if (inBand.length === 0 && !(band.pass === 3 && passes.length === 0)) continue
      const pass = await runPass(database, mirror, options, controller.signal, band, inBand)
      passes.push(pass)
      options.onPass?.(mirror.identifier, pass)
      if (!pass.ok) {
        error = `pass ${pass.pass}: ${pass.error}`
        break
      }
      if (band.pass < 3) await options.between?.(mirror.identifier, pass)
    }
  } catch (caught) {
    error = redact(errorMessage(caught))
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onOuterAbort)
  }
  await recordPush(database, mirror.id, error)
  const last = passes.filter((p) => p.matched !== null).pop()
  return {mirror: mirror.identifier, ok: error === null, error, files, matched: last?.matched ?? null, passes, seconds: secondsSince(started)}
}

/** The three size bands: (-1, small], (small, large], (large, ∞). */
function bands(options: Pick<PushOptions, 'smallMax' | 'largeMax'>): Array<{pass: number; min: number; max: number | null}> {
  const large = Math.max(options.smallMax, options.largeMax)
  return [
    {pass: 1, min: -1, max: options.smallMax},
    {pass: 2, min: options.smallMax, max: large},
    {pass: 3, min: large, max: null},
  ]
}

/**
 * The indexed origin files to push to `mirror`: under its base_path, passing the global and
 * the mirror's include/exclude globs and its push_include globs, ordered by path.
 */
async function filesToPush(database: Database, mirror: MirrorRow, options: PushOptions): Promise<PushFile[]> {
  const base = trimSlashes(mirror.base_path ?? '')
  const rows = await sql<{path: string; size: string | number}>`SELECT path, size FROM file WHERE ${inSubtree(base)} ORDER BY path COLLATE "C"`.execute(database.db)
  const lists = [options.include ?? [], mirror.include_patterns ?? [], mirror.push_include ?? []].filter((l) => l.length > 0).map((l) => picomatch(l, {dot: true}))
  const excludes = [...(options.exclude ?? []), ...(mirror.exclude_patterns ?? [])]
  const excluded = excludes.length > 0 ? picomatch(excludes, {dot: true}) : () => false
  return rows.rows.filter((r) => lists.every((m) => m(r.path)) && !excluded(r.path)).map((r) => ({path: r.path, size: Number(r.size)}))
}

/**
 * One pass: uploads the band's files, then lists the mirror and reconciles. When the upload
 * fails the listing is still tried, so that what did arrive is confirmed; a listing that fails
 * changes nothing.
 */
async function runPass(database: Database, mirror: MirrorRow, options: PushOptions, signal: AbortSignal, band: {pass: number; min: number; max: number | null}, files: PushFile[]): Promise<PushPass> {
  const started = performance.now()
  const base = trimSlashes(mirror.base_path ?? '')
  let error: string | null = null
  if (files.length > 0) {
    try {
      await uploadFiles({
        source: base ? join(options.root, base) : options.root,
        target: mirror.push_url!,
        paths: files.map((f) => (base ? f.path.slice(base.length + 1) : f.path)),
        connectTimeoutSeconds: options.connectTimeoutSeconds,
        ioTimeoutSeconds: options.ioTimeoutSeconds,
        passwordFile: options.passwordFile,
        env: options.env,
        signal,
      })
    } catch (caught) {
      error = redact(errorMessage(caught))
    }
  }
  let reconciled: ReconcileResult | undefined
  try {
    reconciled = await confirmListing(database, mirror, options, signal)
  } catch (caught) {
    const why = redact(errorMessage(caught))
    error = error ? `${error}; the listing after it failed too, so the mirror keeps the files confirmed before: ${why}` : `the listing after the upload failed: ${why}`
  }
  const bytes = files.reduce((n, f) => n + f.size, 0)
  const counts = reconciled ? {matched: reconciled.matched, stale: reconciled.stale, missing: reconciled.missing, added: reconciled.added, removed: reconciled.removed} : NO_COUNTS
  return {pass: band.pass, min: Math.max(0, band.min + 1), max: band.max, files: files.length, bytes, ok: error === null, error, ...counts, seconds: secondsSince(started)}
}

const NO_COUNTS = {matched: null, stale: null, missing: null, added: null, removed: null}

/**
 * Lists the mirror through its push target and reconciles the listing as a scan does
 * (protocol recorded as `push`). The push itself is what fills the mirror, so a listing
 * holding fewer files than before is the truth, not a broken scan: no min_ratio check.
 * @throws whatever the listing or the reconcile throws (nothing is written then)
 */
async function confirmListing(database: Database, mirror: MirrorRow, options: PushOptions, signal: AbortSignal): Promise<ReconcileResult> {
  if (signal.aborted) throw new MbError(`not listed: ${errorMessage(signal.reason)}`, {code: 'PUSH_FAILED'})
  const entries = rsyncLister.list(mirror.push_url!, {
    signal,
    connectTimeoutSeconds: options.connectTimeoutSeconds,
    ioTimeoutSeconds: options.ioTimeoutSeconds,
    passwordFile: options.passwordFile,
    env: options.env,
  })
  return reconcileListing(database, entries, {mirror, include: options.include, exclude: options.exclude, minRatio: 0, protocol: 'push'})
}

/** Records the push's outcome on the mirror: `last_push_at`, and `last_push_ok_at` or `last_push_error`. */
async function recordPush(database: Database, mirrorId: number, error: string | null): Promise<void> {
  await sql`
    UPDATE mirror SET last_push_at = now(), last_push_error = ${error === null ? null : error.slice(0, 2000)}
      ${error === null ? sql`, last_push_ok_at = now()` : sql``}
    WHERE id = ${mirrorId}::smallint`.execute(database.db)
}
