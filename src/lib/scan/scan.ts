/**
 * Scanning one mirror end to end: pick the protocols from the URLs the mirror has
 * (rsync → FTP → HTTP), list with the first that works within the per-mirror time budget,
 * reconcile the listing into the origin index, and record the outcome on the mirror.
 *
 * A failed attempt falls back to the next protocol; when all fail, the mirror's records stay as
 * they were and only last_scan_at / last_scan_error change, plus `scan_refused_at` (the mirror
 * is suspect) when the safety check refused an attempt. A one-folder scan (`recursive: false`)
 * records nothing on the mirror, success or failure: it only updates that folder's files. A
 * `--dir` folder the mirror answers as absent (its base answers) is an empty folder, not a
 * failure: see {@link withAbsentFolder}.
 */
import {compileSigner} from '../sign.js'
import type {Database} from '../db/index.js'
import type {MirrorRow} from '../db/schema.js'
import {MbError, UsageError, errorMessage} from '../errors.js'
import {redact} from '../redact.js'
import {LISTERS, PROTOCOL_ORDER, type Protocol} from './listers.js'
import {planScope, reconcileListing, type ReconcileResult, recordScanFailure, type ScanScope} from './reconcile.js'
import type {RsyncListOptions} from './rsync.js'
import type {Lister, ListingEntry} from './types.js'
import type {ScanConfigSchema} from './config.js'
import type {z} from 'zod'

export interface ScanMirrorOptions {
  /** Only this protocol (no fallback). */
  protocol?: Protocol
  /** Origin-relative subtree to rescan. */
  subdir?: string
  /** False: scan only the files directly in `subdir` (one folder, no subfolder; default true). */
  recursive?: boolean
  /** Per-mirror budget in seconds, all attempts together (default 3600). */
  timeoutSeconds?: number
  connectTimeoutSeconds?: number
  ioTimeoutSeconds?: number
  /** Largest HTTP index page read, bytes (default 64 MiB). */
  maxIndexBytes?: number
  include?: string[]
  exclude?: string[]
  minRatio?: number
  /** Enable the mirror after a successful scan that matched files. */
  enable?: boolean
  /** rsync `--password-file`. */
  rsyncPasswordFile?: string
  /** Environment for listers (RSYNC_PASSWORD); default process.env. */
  env?: NodeJS.ProcessEnv
  /** Aborts the scan (Ctrl-C). */
  signal?: AbortSignal
  /** Progress: protocol in use and entries seen so far. */
  onProgress?: (protocol: Protocol, entries: number) => void
  /** Listers to use instead of the built-in ones ({@link LISTERS}), per protocol; for tests. */
  listers?: Partial<Record<Protocol, Lister>>
}

/**
 * The {@link ScanMirrorOptions} the `scan:` settings give (time budgets in seconds, the index
 * page limit in bytes, patterns, the safety ratio, the rsync password file): what `mb scan`
 * and `mb mirror edit --rescan` both scan with.
 */
export function scanSettings(config: z.infer<typeof ScanConfigSchema>): ScanMirrorOptions {
  return {
    timeoutSeconds: config.timeout,
    connectTimeoutSeconds: config.connect_timeout,
    ioTimeoutSeconds: config.io_timeout,
    maxIndexBytes: config.max_index_bytes,
    include: config.include,
    exclude: config.exclude,
    minRatio: config.min_ratio,
    rsyncPasswordFile: config.rsync_password_file,
  }
}

/** One protocol tried. */
export interface ScanAttempt {
  protocol: Protocol
  url: string
  error?: string
}

/** The outcome for one mirror, as `mb scan --json` prints it. */
export interface ScanMirrorResult extends Pick<ReconcileResult, 'mirror' | 'files' | 'matched' | 'stale' | 'missing' | 'previous' | 'added' | 'removed' | 'enabled' | 'enabledByScan' | 'seconds'> {
  ok: boolean
  /** Protocol whose listing was used (null when all failed). */
  protocol: Protocol | null
  error: string | null
  attempts: ScanAttempt[]
  /** True when the `--dir` folder is not on the mirror (its base answers): reconciled as an empty folder. */
  absent?: boolean
  /** True when another scan of the mirror held its scan lock (SCAN_BUSY): nothing was listed or recorded. */
  busy?: boolean
}

/** The URLs a mirror can be listed through, in scan order. */
export function scanUrls(mirror: Pick<MirrorRow, 'rsync_url' | 'ftp_url' | 'http_url' | 'https_url'>): Array<{protocol: Protocol; url: string}> {
  const urls: Record<Protocol, string | null> = {rsync: mirror.rsync_url, ftp: mirror.ftp_url, http: mirror.http_url ?? mirror.https_url}
  return PROTOCOL_ORDER.filter((p) => urls[p]).map((p) => ({protocol: p, url: urls[p]!}))
}

const NO_RETRY = new Set(['SCAN_BUSY', 'USAGE'])

/**
 * Scans one mirror. Never throws for a scan failure: the result carries `ok: false` and the
 * reason, and the failure is recorded on the mirror. Throws only for a usage error (bad
 * `subdir`, unusable `protocol`) before anything is listed.
 */
export async function scanMirror(database: Database, mirror: MirrorRow, options: ScanMirrorOptions = {}): Promise<ScanMirrorResult> {
  const started = performance.now()
  const plan = planScope(mirror.base_path, options.subdir, options.recursive !== false) // validates --dir before any listing
  let candidates = scanUrls(mirror)
  if (options.protocol) {
    candidates = candidates.filter((c) => c.protocol === options.protocol)
    if (candidates.length === 0)
      throw new UsageError(
        `Mirror ${mirror.identifier} has no ${options.protocol} URL to scan. Add one with \`mb mirror edit ${mirror.identifier} --${options.protocol === 'http' ? 'http' : options.protocol}-url URL\`.`,
      )
  }
  const budget = (options.timeoutSeconds ?? 3600) * 1000
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(new Error(`the per-mirror time budget of ${options.timeoutSeconds ?? 3600} s ran out`)), budget)
  const onOuterAbort = () => controller.abort(options.signal?.reason ?? new Error('interrupted'))
  options.signal?.addEventListener('abort', onOuterAbort, {once: true})
  const attempts: ScanAttempt[] = []
  let busy = false
  /** Some attempt was refused by the safety check (SCAN_TOO_FEW): the mirror becomes suspect unless another attempt succeeds. */
  let refused = false
  /** The last protocol whose lister ran (skipped attempts do not count). */
  let tried: Protocol | null = null
  /** The lister found the `--dir` folder absent while the mirror's base answers (SCAN_DIR_ABSENT). */
  let absent = false
  const seconds = () => Math.round((performance.now() - started) / 10) / 100
  try {
    if (candidates.length === 0) {
      const reason = 'the mirror has no rsync, FTP or HTTP URL to scan'
      if (plan.recursive) await recordScanFailure(database.db, mirror.id, reason, null)
      return failed(mirror, reason, attempts, seconds())
    }
    for (const {protocol, url} of candidates) {
      const display = redact(url)
      if (controller.signal.aborted) {
        attempts.push({protocol, url: display, error: `skipped: ${errorMessage(controller.signal.reason)}`})
        continue
      }
      const lister = options.listers?.[protocol] ?? LISTERS[protocol]
      tried = protocol
      absent = false
      try {
        const entries = withAbsentFolder(
          lister.list(url, {...listOptions(plan, controller.signal, options), sign: compileSigner(mirror.sign_scheme, mirror.sign_secret, mirror.sign_ttl_seconds) ?? undefined}),
          plan,
          () => (absent = true),
        )
        const result = await listAndReconcile(database, mirror, plan, protocol, entries, options)
        attempts.push({protocol, url: display})
        return {...succeeded(mirror, protocol, result, attempts, seconds()), ...(absent ? {absent} : {})}
      } catch (error) {
        let message = redact(errorMessage(error))
        const why = controller.signal.aborted ? errorMessage(controller.signal.reason) : ''
        if (why && !message.includes(why)) message = `${message} (${why})`
        attempts.push({protocol, url: display, error: message})
        if (error instanceof MbError && error.code === 'SCAN_TOO_FEW') refused = true
        if (error instanceof MbError && NO_RETRY.has(error.code)) {
          busy = error.code === 'SCAN_BUSY'
          break
        }
      }
    }
    // A scan refused for another one under way says so alone: no protocol failed.
    const reason = busy ? attempts.at(-1)!.error! : attempts.map((a) => `${a.protocol}: ${a.error}`).join('; ')
    // A refused concurrent scan leaves the running one to record its own outcome.
    if (!busy && plan.recursive) await recordScanFailure(database.db, mirror.id, reason, tried, refused)
    return busy ? {...failed(mirror, reason, attempts, seconds()), busy} : failed(mirror, reason, attempts, seconds())
  } finally {
    clearTimeout(timer)
    options.signal?.removeEventListener('abort', onOuterAbort)
  }
}

/**
 * The listing, or an empty one when the lister reports the `--dir` folder absent while the
 * mirror's base answers (SCAN_DIR_ABSENT). On release day a mirror that has not synced a new
 * folder yet is the normal state, not a broken mirror: it holds no file there, so its copies in
 * that scope leave their mirror sets (the min_ratio check still guards a folder that held many).
 * A whole-tree scan has no `--dir`, so its missing base stays SCAN_BASE_MISSING, a failure.
 */
async function* withAbsentFolder(entries: AsyncIterable<ListingEntry>, plan: ScanScope, onAbsent: () => void): AsyncGenerator<ListingEntry> {
  try {
    yield* entries
  } catch (error) {
    if (!(error instanceof MbError && error.code === 'SCAN_DIR_ABSENT' && plan.listSubdir)) throw error
    onAbsent()
  }
}

/** The lister options for one attempt: the plan's subtree, the scan's signal, timeouts and credentials. */
function listOptions(plan: ScanScope, signal: AbortSignal, options: ScanMirrorOptions): RsyncListOptions {
  return {
    subdir: plan.listSubdir || undefined,
    recursive: plan.recursive,
    signal,
    connectTimeoutSeconds: options.connectTimeoutSeconds,
    ioTimeoutSeconds: options.ioTimeoutSeconds,
    maxIndexBytes: options.maxIndexBytes,
    passwordFile: options.rsyncPasswordFile,
    env: options.env,
  }
}

/** Reconciles one attempt's listing into the index, with the scan's plan and filters. */
function listAndReconcile(database: Database, mirror: MirrorRow, plan: ScanScope, protocol: Protocol, entries: AsyncIterable<ListingEntry>, options: ScanMirrorOptions): Promise<ReconcileResult> {
  return reconcileListing(database, entries, {
    mirror,
    plan,
    include: options.include,
    exclude: options.exclude,
    minRatio: options.minRatio,
    protocol,
    enable: options.enable,
    onProgress: (n) => options.onProgress?.(protocol, n),
  })
}

function succeeded(mirror: MirrorRow, protocol: Protocol, result: ReconcileResult, attempts: ScanAttempt[], seconds: number): ScanMirrorResult {
  const {files, matched, stale, missing, previous, added, removed, enabled, enabledByScan} = result
  return {mirror: mirror.identifier, ok: true, protocol, files, matched, stale, missing, previous, added, removed, enabled, enabledByScan, seconds, error: null, attempts}
}

function failed(mirror: MirrorRow, reason: string, attempts: ScanAttempt[], seconds: number): ScanMirrorResult {
  return {
    mirror: mirror.identifier,
    ok: false,
    protocol: null,
    files: 0,
    matched: 0,
    stale: 0,
    missing: 0,
    previous: 0,
    added: 0,
    removed: 0,
    enabled: mirror.enabled,
    enabledByScan: false,
    seconds,
    error: reason,
    attempts,
  }
}
