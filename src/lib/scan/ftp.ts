/**
 * The FTP lister: walks a mirror's FTP tree over one control connection (basic-ftp) and yields
 * the {@link ListingEntry} stream the reconciler consumes.
 *
 * - Listing: MLSD where the server announces MLST in FEAT (RFC 3659), LIST otherwise (RFC 959;
 *   Unix `ls -l` and DOS/IIS formats), always after a CWD into the directory, so names with
 *   spaces, `#`, `*` or `[` never reach the server as LIST arguments.
 * - URL paths follow RFC 1738 section 3.2.2: relative to the login directory; a path starting
 *   with `%2F` is absolute.
 * - FTPS: `ftps://` (or `tls: 'explicit'`) upgrades with AUTH TLS (RFC 4217); `tls: 'implicit'`
 *   speaks TLS from the first byte (port 990). Certificates are verified unless
 *   `allowSelfSigned` is set.
 * - Symlinks are reported the way the mirror serves them: a link the server can SIZE is a file
 *   of the target's size (mtime from MDTM when offered); a link it can CWD into is a directory
 *   whose contents are listed under the link's path (loops, detected by the physical path PWD
 *   reports or the link text, are skipped); a link that resolves to neither is yielded as
 *   `type: 'symlink'` (size 0) and a warning.
 * - rsync's `.~tmp~` directories are skipped.
 * - Credentials in the URL are used for USER/PASS and never appear in messages.
 */
import {posix} from 'node:path'
import {Client, FTPError, type FileInfo} from 'basic-ftp'
import {MbError} from '../errors.js'
import {redact} from '../redact.js'
import {toFtpListItem, type FtpListItem} from './ftp-listing.js'
import type {ListOptions, Lister, ListingEntry} from './types.js'

export interface FtpListerOptions {
  /** `auto` (default): TLS for `ftps://` (explicit, AUTH TLS), none for `ftp://`. */
  tls?: 'auto' | 'none' | 'explicit' | 'implicit'
  /**
   * Accept any server certificate (self-signed, expired, other name) on FTPS. Off by default;
   * with it, FTPS protects against eavesdropping but not against a man in the middle.
   */
  allowSelfSigned?: boolean
  /** Deepest directory level walked below the base (default 64); deeper ones are skipped with a warning. */
  maxDepth?: number
  /** Called with non-fatal findings (unreadable subdirectory, broken symlink, symlink loop). */
  onWarning?: (message: string) => void
  /** The clock used to give year-less Unix LIST dates a year (default: now). */
  now?: () => Date
}

/** Default connect and idle timeouts, seconds. */
const FTP_DEFAULT_CONNECT_TIMEOUT = 30
const FTP_DEFAULT_IO_TIMEOUT = 60

/** rsync's in-progress directory: never part of a mirror. */
const TMP_DIR = '.~tmp~'

/** Creates the FTP lister (protocol `ftp`). */
export function createFtpLister(options: FtpListerOptions = {}): Lister {
  return {
    protocol: 'ftp',
    list: (baseUrl, listOptions) => listFtp(baseUrl, listOptions, options),
  }
}

/** The parts of an ftp:// or ftps:// URL the lister needs. `display` carries no credentials. */
export interface FtpTarget {
  host: string
  port: number
  user: string
  password: string
  secure: boolean | 'implicit'
  /** Path segments after the host, percent-decoded. */
  segments: string[]
  /** True when the path starts with %2F (absolute, RFC 1738); otherwise relative to the login directory. */
  absolute: boolean
  /** `ftp://host:port/path` without user or password, for messages. */
  display: string
}

/**
 * Parses an FTP base URL. Anonymous login (user `anonymous`, password `mb@`) when the URL has no
 * user. Throws MbError (code SCAN_BAD_URL) for other schemes or a malformed URL; the message
 * never repeats the credentials.
 */
export function parseFtpUrl(baseUrl: string, tls: FtpListerOptions['tls'] = 'auto'): FtpTarget {
  let url: URL
  try {
    url = new URL(baseUrl)
  } catch {
    throw new MbError(`Not a valid FTP URL: ${redact(baseUrl)}; expected ftp://host[:port]/path`, {code: 'SCAN_BAD_URL'})
  }
  if (url.protocol !== 'ftp:' && url.protocol !== 'ftps:') {
    throw new MbError(`Not an FTP URL: ${redact(baseUrl)}; expected ftp:// or ftps://`, {code: 'SCAN_BAD_URL'})
  }
  const implicitDefault = tls === 'implicit'
  const port = url.port ? Number(url.port) : implicitDefault ? 990 : 21
  let secure: boolean | 'implicit' = url.protocol === 'ftps:'
  if (tls === 'none') secure = false
  else if (tls === 'explicit') secure = true
  else if (tls === 'implicit') secure = 'implicit'
  // RFC 1738: ";type=X" may end the path; an empty segment list is the login directory.
  const rawPath = url.pathname.replace(/;type=[aid]$/i, '')
  const rawSegments = rawPath.split('/').slice(1)
  const absolute = rawSegments.length > 0 && /^%2f/i.test(rawSegments[0])
  if (absolute) rawSegments[0] = rawSegments[0].slice(3)
  const segments = rawSegments
    .filter((s) => s !== '')
    .map((s) => {
      try {
        return decodeURIComponent(s)
      } catch {
        throw new MbError(`FTP URL ${redact(baseUrl)} has a malformed percent-escape in "${s}"`, {code: 'SCAN_BAD_URL'})
      }
    })
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  return {
    host,
    port,
    user: url.username ? decodeURIComponent(url.username) : 'anonymous',
    password: url.password ? decodeURIComponent(url.password) : url.username ? '' : 'mb@',
    secure,
    segments,
    absolute,
    display: `${url.protocol}//${url.host}${url.pathname}`,
  }
}

interface DirTask {
  /** Path relative to the base, '' for the base itself. */
  rel: string
  /** Absolute path on the server. */
  abs: string
  /** Physical path (symlinks resolved) where known, for loop detection. */
  phys: string
  /** Physical paths of the ancestors (base first). */
  ancestors: string[]
  depth: number
}

/** What the steps of one FTP walk share: the connection, the server's name for messages, and how they report. */
interface FtpWalk {
  client: Client
  /** `host:port`, for messages. */
  where: string
  warn: (message: string) => void
  fail: (error: unknown, doing: string) => MbError
  maxDepth: number
  /** The server answers MDTM (RFC 3659), so a symlinked file's mtime can be asked for. */
  hasMdtm: boolean
}

/** Walks the tree breadth-first over one control connection: connect, enter the start directory, then list each queued directory. */
async function* listFtp(baseUrl: string, listOptions: ListOptions, options: FtpListerOptions): AsyncGenerator<ListingEntry> {
  const target = parseFtpUrl(baseUrl, options.tls)
  const where = `${target.host}:${target.port}`
  const connectTimeout = (listOptions.connectTimeoutSeconds ?? FTP_DEFAULT_CONNECT_TIMEOUT) * 1000
  const ioTimeout = (listOptions.ioTimeoutSeconds ?? FTP_DEFAULT_IO_TIMEOUT) * 1000
  const signal = listOptions.signal
  const now = options.now ?? (() => new Date())
  const client = new Client(ioTimeout)
  const onAbort = () => client.close()
  signal?.addEventListener('abort', onAbort, {once: true})
  const fail = (error: unknown, doing: string): MbError => mapFtpError(error, {where, doing, target, ioTimeout, aborted: signal?.aborted === true})

  try {
    signal?.throwIfAborted()
    await connectWithTimeout(client, target, options, connectTimeout, fail)
    const start = await enterStartDirectory(client, target, listOptions.subdir, where, fail)
    const hasMdtm = (await client.features().catch(() => new Map<string, string>())).has('MDTM')
    const walk: FtpWalk = {client, where, warn: options.onWarning ?? (() => {}), fail, maxDepth: listOptions.recursive === false ? 0 : (options.maxDepth ?? 64), hasMdtm}
    const queue: DirTask[] = [start]
    for (let head = 0; head < queue.length; head++) {
      const dir = queue[head]
      queue[head] = undefined as unknown as DirTask // let finished tasks be collected
      signal?.throwIfAborted()
      const infos = await readDirectory(walk, dir)
      if (infos !== undefined) yield* directoryEntries(walk, dir, infos, now(), queue)
    }
  } catch (error) {
    if (error instanceof MbError) throw error
    throw fail(error, 'listing')
  } finally {
    signal?.removeEventListener('abort', onAbort)
    client.close()
  }
}

/**
 * Resolves the base directory (the login directory from PWD, or `/` for an absolute URL) and the
 * `--dir` below it, and changes into it. Throws SCAN_BAD_SUBDIR for a `..` in `subdir` and
 * SCAN_BASE_MISSING when the server answers 550, or SCAN_DIR_ABSENT when only the `--dir` folder
 * is missing (the base directory can be entered).
 */
async function enterStartDirectory(client: Client, target: FtpTarget, subdirOption: string | undefined, where: string, fail: FtpWalk['fail']): Promise<DirTask> {
  let loginDir: string
  try {
    loginDir = target.absolute ? '/' : await client.pwd()
  } catch (error) {
    throw fail(error, 'reading the login directory (PWD)')
  }
  const baseDir = posix.join(target.absolute ? '/' : loginDir, ...target.segments)
  const subdir = (subdirOption ?? '').split('/').filter((s) => s !== '' && s !== '.')
  if (subdir.includes('..')) throw new MbError(`Subdirectory "${subdirOption}" must not contain ".."`, {code: 'SCAN_BAD_SUBDIR'})
  const startDir = posix.join(baseDir, ...subdir)
  try {
    await client.cd(startDir)
  } catch (error) {
    if (error instanceof FTPError && error.code === 550) {
      if (subdir.length > 0 && (await enters(client, baseDir)))
        throw new MbError(`FTP directory ${startDir} does not exist on ${where} (550${serverText(error)}): the folder is not on the mirror`, {code: 'SCAN_DIR_ABSENT', cause: error})
      const what = subdir.length ? `FTP directory ${startDir} (--dir ${subdir.join('/')})` : `FTP base directory ${startDir}`
      throw new MbError(`${what} does not exist on ${where} (550${serverText(error)}); check the mirror's FTP URL`, {code: 'SCAN_BASE_MISSING', cause: error})
    }
    throw fail(error, `changing to ${startDir}`)
  }
  const startPhys = await physicalPath(client, startDir)
  return {rel: subdir.join('/'), abs: startDir, phys: startPhys, ancestors: [], depth: 0}
}

/** Whether the server lets us change into `dir`: the one check telling an absent `--dir` folder from a wrong base. */
async function enters(client: Client, dir: string): Promise<boolean> {
  try {
    await client.cd(dir)
    return true
  } catch (error) {
    if (error instanceof FTPError) return false
    throw error
  }
}

/**
 * Changes into a queued directory (the start directory is entered already) and lists it. A
 * subdirectory the server refuses to enter or list (5xx) is warned about and skipped
 * (undefined); any other failure throws.
 */
async function readDirectory(walk: FtpWalk, dir: DirTask): Promise<FileInfo[] | undefined> {
  const {client, where, warn, fail} = walk
  if (dir.depth > 0) {
    try {
      await client.cd(dir.abs)
    } catch (error) {
      if (error instanceof FTPError && error.code === 550) {
        warn(`FTP directory ${dir.abs} on ${where} cannot be entered (550${serverText(error)}); skipped`)
        return undefined
      }
      throw fail(error, `changing to ${dir.abs}`)
    }
  }
  try {
    let infos = await client.list()
    if (infos.length === 0 && dir.depth === 0 && client.availableListCommands.length === 1 && client.availableListCommands[0] === 'LIST -a') {
      // A server that takes "-a" for a file name answers "LIST -a" with nothing: check with plain LIST.
      client.availableListCommands = ['LIST']
      infos = await client.list()
      if (infos.length === 0) client.availableListCommands = ['LIST -a']
    }
    return infos
  } catch (error) {
    if (error instanceof FTPError && error.code >= 500 && error.code < 600 && dir.depth > 0) {
      warn(`FTP directory ${dir.abs} on ${where} cannot be listed (${error.code}${serverText(error)}); skipped`)
      return undefined
    }
    throw fail(error, `listing ${dir.abs}`)
  }
}

/**
 * The entries of one listed directory, `at` being the time it was listed (for year-less dates).
 * Subdirectories, and symlinks that resolve to one outside their own ancestry, are queued.
 */
async function* directoryEntries(walk: FtpWalk, dir: DirTask, infos: FileInfo[], at: Date, queue: DirTask[]): AsyncGenerator<ListingEntry> {
  const {client, where, warn, fail, maxDepth, hasMdtm} = walk
  for (const info of infos) {
    const item = toFtpListItem(info, at)
    if (item.name === '.' || item.name === '..' || item.name === TMP_DIR || item.name.includes('/')) continue
    const rel = dir.rel === '' ? item.name : `${dir.rel}/${item.name}`
    const abs = posix.join(dir.abs, item.name)
    if (item.type === 'file') {
      yield entry(rel, 'file', item.size, item)
    } else if (item.type === 'dir') {
      yield entry(rel, 'dir', 0, item)
      enqueue(queue, dir, rel, abs, posix.join(dir.phys, item.name), maxDepth, warn)
    } else if (item.type === 'symlink') {
      const resolved = await resolveSymlink(client, item, abs, dir, hasMdtm, fail)
      if (resolved.kind === 'file') {
        yield {path: rel, type: 'file', size: resolved.size, ...(resolved.mtime === undefined ? {} : {mtime: resolved.mtime, mtimePrecision: 1})}
      } else if (resolved.kind === 'dir') {
        const phys = resolved.phys
        if (phys === dir.phys || dir.ancestors.includes(phys) || dir.phys.startsWith(phys === '/' ? '/' : phys + '/')) {
          warn(`FTP symlink ${abs} on ${where} points to ${phys}, an ancestor of itself (a loop); skipped`)
          continue
        }
        yield entry(rel, 'dir', 0, item)
        enqueue(queue, dir, rel, abs, phys, maxDepth, warn)
      } else {
        warn(`FTP symlink ${abs}${item.link ? ` -> ${item.link}` : ''} on ${where} leads to nothing the server serves; reported as a symlink`)
        yield entry(rel, 'symlink', 0, item)
      }
    }
  }
}

function entry(path: string, type: ListingEntry['type'], size: number, item: FtpListItem): ListingEntry {
  const out: ListingEntry = {path, type, size}
  if (item.mtime !== undefined) {
    out.mtime = item.mtime
    out.mtimePrecision = item.mtimePrecision
  }
  return out
}

function enqueue(queue: DirTask[], parent: DirTask, rel: string, abs: string, phys: string, maxDepth: number, warn: (m: string) => void): void {
  if (parent.depth + 1 > maxDepth) {
    // maxDepth 0 is a one-folder listing (ListOptions.recursive false): nothing is skipped by surprise.
    if (maxDepth > 0) warn(`FTP directory ${abs} is deeper than ${maxDepth} levels; skipped`)
    return
  }
  queue.push({rel, abs, phys, ancestors: [...parent.ancestors, parent.phys], depth: parent.depth + 1})
}

async function connectWithTimeout(client: Client, target: FtpTarget, options: FtpListerOptions, timeoutMs: number, fail: (e: unknown, doing: string) => MbError): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  let timedOut = false
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = true
      client.close()
      reject(
        new MbError(
          `FTP server ${target.host}:${target.port} did not complete the connection and login within ${timeoutMs / 1000} s (connect timeout); is the host reachable and the FTP server answering?`,
          {code: 'SCAN_TIMEOUT'},
        ),
      )
    }, timeoutMs)
  })
  try {
    await Promise.race([
      client.access({
        host: target.host,
        port: target.port,
        user: target.user,
        password: target.password,
        secure: target.secure,
        secureOptions: target.secure ? {rejectUnauthorized: !options.allowSelfSigned, servername: isIp(target.host) ? undefined : target.host} : undefined,
      }),
      timeout,
    ])
  } catch (error) {
    if (error instanceof MbError) throw error
    if (timedOut) return
    if (error instanceof FTPError && error.code === 530) {
      throw new MbError(`FTP login to ${target.host}:${target.port} refused (530${serverText(error)}); check the user and password in the mirror's FTP URL`, {code: 'SCAN_AUTH', cause: error})
    }
    throw fail(error, 'connecting')
  } finally {
    clearTimeout(timer)
  }
}

function isIp(host: string): boolean {
  return /^[\d.]+$/.test(host) || host.includes(':')
}

/** The physical path of a directory (PWD after CWD), or `fallback` when PWD fails. */
async function physicalPath(client: Client, fallback: string): Promise<string> {
  try {
    return posix.normalize(await client.pwd())
  } catch {
    return fallback
  }
}

type Resolved = {kind: 'file'; size: number; mtime?: number} | {kind: 'dir'; phys: string} | {kind: 'none'}

/**
 * Resolves a symlink line the way the server serves it: SIZE succeeds -> a file; CWD succeeds ->
 * a directory (physical path from PWD, or from the link text when PWD echoes the logical path).
 */
async function resolveSymlink(client: Client, item: FtpListItem, abs: string, dir: DirTask, hasMdtm: boolean, fail: (e: unknown, doing: string) => MbError): Promise<Resolved> {
  try {
    const size = await client.size(abs)
    let mtime: number | undefined
    if (hasMdtm) {
      try {
        mtime = Math.floor((await client.lastMod(abs)).getTime() / 1000)
      } catch (error) {
        if (!(error instanceof FTPError)) throw error
      }
    }
    return {kind: 'file', size, ...(mtime === undefined || Number.isNaN(mtime) ? {} : {mtime})}
  } catch (error) {
    if (!(error instanceof FTPError)) throw fail(error, `resolving symlink ${abs} (SIZE)`)
  }
  try {
    await client.cd(abs)
  } catch (error) {
    if (error instanceof FTPError) return {kind: 'none'}
    throw fail(error, `resolving symlink ${abs} (CWD)`)
  }
  let phys = await physicalPath(client, abs)
  if (phys === posix.normalize(abs) && item.link) {
    // The server reports logical paths: resolve the link text against the parent's physical path.
    phys = posix.normalize(item.link.startsWith('/') ? item.link : posix.join(dir.phys, item.link))
  }
  return {kind: 'dir', phys}
}

function serverText(error: FTPError): string {
  const text = error.message.replace(/^\d{3}[ -]?/, '').trim()
  return text ? ` ${text}` : ''
}

/** Turns a socket, TLS or FTP error into an MbError an operator can act on; never shows credentials. */
function mapFtpError(error: unknown, ctx: {where: string; doing: string; target: FtpTarget; ioTimeout: number; aborted: boolean}): MbError {
  if (error instanceof MbError) return error
  const {where, doing} = ctx
  const scrub = (s: string) => redact(s, [ctx.target.password])
  const code = (error as {code?: unknown})?.code
  const message = scrub(error instanceof Error ? error.message : String(error))
  if (ctx.aborted) return new MbError(`FTP listing of ${ctx.target.display} aborted while ${doing}`, {code: 'SCAN_ABORTED', cause: error})
  if (code === 'ECONNREFUSED') return new MbError(`FTP connection to ${where} refused (ECONNREFUSED); is an FTP server running there?`, {code: 'SCAN_CONNECT', cause: error})
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return new MbError(`FTP host ${ctx.target.host} not found (${code}); check the mirror's FTP URL`, {code: 'SCAN_CONNECT', cause: error})
  if (code === 'EHOSTUNREACH' || code === 'ENETUNREACH' || code === 'ECONNRESET' || code === 'EPIPE') {
    return new MbError(`FTP connection to ${where} failed while ${doing} (${code})`, {code: 'SCAN_CONNECT', cause: error})
  }
  if (/^Timeout/.test(message)) {
    return new MbError(`FTP server ${where} did not answer within ${ctx.ioTimeout / 1000} s while ${doing} (idle timeout)`, {code: 'SCAN_TIMEOUT', cause: error})
  }
  if (typeof code === 'string' && /CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) {
    return new MbError(`FTPS certificate of ${where} is not trusted (${code}); fix the certificate or allow self-signed certificates for this mirror`, {code: 'SCAN_TLS', cause: error})
  }
  if (error instanceof FTPError) {
    return new MbError(`FTP server ${where} answered ${error.code}${serverText(error)} while ${doing}`, {code: 'SCAN_FTP', cause: error})
  }
  return new MbError(`FTP listing of ${ctx.target.display} failed while ${doing}: ${message}`, {code: 'SCAN_FAILED', cause: error})
}

/**
 * The FTP lister `mb scan` uses (listers.ts): anonymous
 * unless the URL carries credentials, certificates verified on ftps://.
 */
export const ftpLister: Lister = createFtpLister()
