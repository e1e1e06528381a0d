/**
 * The dnf/yum routes of `mb serve`, answering as Fedora's MirrorManager does:
 *
 * - `GET /metalink?repo=R&arch=A` → the Metalink 3.0 document (`mm0` namespace,
 *   ./document.ts) of the repository's `repodata/repomd.xml`;
 * - `GET /mirrorlist?repo=R&arch=A` → the repository directory on each mirror, one per line;
 * - both also take `path=DIR` instead of repo and arch, and dnf's `countme=N` (1..4, counted
 *   in the statistics by repo; any other value is ignored) and `protocol=` (MirrorManager's
 *   filter by URL scheme: ./document.ts, `trimToProtocols`);
 * - `GET /DIR/repodata/repomd.xml.metalink` and `/DIR/repodata/repomd.xml?metalink` → the
 *   same document as `/metalink` for that directory.
 *
 * (repo, arch) pairs come from the `yum.repos` table (./config.ts); unknown ones get
 * MirrorManager's answers (404, `error: invalid repo or arch` and the list of known pairs,
 * in a comment of an empty metalink for `/metalink`).
 *
 * The mirrors listed are those selection ranks for the client among the mirrors holding the
 * current repomd.xml and those that held a version replaced inside the alternates window
 * (`yum.alternates_days`): a mirror that has not synced the newest metadata yet still serves
 * a repomd.xml that dnf accepts through `mm0:alternates`. The repository is selected as its
 * directory, so `select.origin_only` and `min_size` (which keep plain GETs of repomd.xml on
 * the origin) do not send every dnf to the origin. The origin comes last. The current version (read from disk) and the alternates (from the store) are kept
 * in memory per repomd.xml version for {@link STATE_TTL_MS}.
 */
import {readFile} from 'node:fs/promises'
import {sep} from 'node:path'
import type {Database} from '../db/index.js'
import {originUrlFor} from '../metalink/document.js'
import {isRepomdPath, type RepomdAlternate, type RepomdVersion, readRepomdAlternates, repomdVersion} from '../origin/repomd.js'
import {mirrorUrlOn, publicBase} from '../select/url.js'
import type {Selection, SelectMirror} from '../select/types.js'
import {hasQueryFlag} from '../serve/delivery/path.js'
import {BAD_COUNTRY_QUERY, type RequestContext, type Route, type RouteServices} from '../serve/delivery/route.js'
import {type FileEntry, fileWith} from '../serve/snapshot/file-entry.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import {BaseUrls} from '../serve/delivery/public-url.js'
import {repoKey} from './config.js'
import {
  BAD_REPO_NAME,
  isRepoName,
  METALINK_MEDIA_TYPE,
  metalinkFailure,
  oneLine,
  REPO_PROTOCOLS,
  type RepoSource,
  renderRepoMetalink,
  renderRepoMirrorList,
  requestedProtocols,
  unknownRepoMessage,
} from './document.js'

/** How long a repomd.xml version's details and alternates are reused before they are read again, ms. */
const STATE_TTL_MS = 30_000
const GENERATOR = 'mb/0.1.0'
const PRIVATE = 'private, no-store'
/** The base URLs when none are given: from the request's Host, the origin form. */
const DEFAULT_BASE_URLS = new BaseUrls()

export interface YumRouteOptions {
  /** For the alternates (`repomd_history`); without it the documents list none. */
  database?: Pick<Database, 'db'>
  /** (repo, arch) → repository directory (`repoTable()` of ./config.ts). */
  repos: ReadonlyMap<string, string>
  /** Days a replaced repomd.xml stays an alternate (default 3). */
  alternatesDays?: number
  /** `select.min_size` in bytes: the repository is selected as a file at least this large. */
  minSize: number
  /** Mirrors per answer at most (default 20). */
  maxMirrors?: number
  /** This server's URLs (`serve.public_url`, `serve.origin_url`; ../serve/delivery/public-url.ts); default: from the request's Host, the origin form. */
  baseUrls?: BaseUrls
}

/** What a request asks for: the document kind and, for `/DIR/repodata/repomd.xml.metalink`, the repomd.xml path. */
export interface YumTarget {
  kind: 'metalink' | 'mirrorlist'
  repomd?: string
}

/** dnf's `countme` bucket of a request (1..4), with the repo and arch it was sent for. */
export interface Countme {
  repo: string
  arch: string
  bucket: number
}

const METALINK_SUFFIX = 'repodata/repomd.xml.metalink'

function yumTarget(ctx: Pick<RequestContext, 'path' | 'slash' | 'query' | 'file' | 'snapshot'>): YumTarget | undefined {
  if (ctx.slash) return undefined
  const path = ctx.path
  if (ctx.file === undefined) {
    if (path === 'metalink' || path === 'mirrorlist') return {kind: path}
    if (path.endsWith(METALINK_SUFFIX)) {
      const repomd = path.slice(0, -'.metalink'.length)
      if (isRepomdPath(repomd) && ctx.snapshot.files.has(repomd)) return {kind: 'metalink', repomd}
    }
    return undefined
  }
  if (ctx.query.length > 0 && isRepomdPath(path) && hasQueryFlag(ctx.query, 'metalink')) return {kind: 'metalink', repomd: path}
  return undefined
}

/** A repomd.xml version's details and alternates, as read at `at` (ms). */
interface RepoState {
  size: number
  mtime: number
  at: number
  current: RepomdVersion
  alternates: RepomdAlternate[]
}

/** What a `/metalink` or `/mirrorlist` query resolved to. */
type Resolved = {repomd: string; header: string; countme?: Countme} | {status: number; message: string}

/** dnf's countme value: 1..4 (dnf's weekly age buckets); anything else is ignored. */
export function countmeBucket(value: string | null): number | undefined {
  return value !== null && value.length === 1 && value >= '1' && value <= '4' ? Number(value) : undefined
}

/** The routes, bound to one server. */
export class YumRoutes {
  private readonly states = new Map<string, RepoState>()
  private readonly loading = new Map<string, Promise<RepoState | undefined>>()

  constructor(
    private readonly server: RouteServices,
    private readonly options: YumRouteOptions,
  ) {}

  /** The route (see {@link Route}); register it before the metalink route, which would take `repomd.xml.metalink`. */
  readonly route: Route<YumTarget> = {
    name: 'yum',
    match: yumTarget,
    handle: (ctx, target) => this.handle(ctx, target),
  }

  /** MirrorManager's resolution of `repo=`/`arch=` (or `path=`) to a repomd.xml path, or its error answer. */
  private resolve(params: URLSearchParams, ctx: RequestContext): Resolved {
    const path = params.get('path')
    if (params.has('repo') && params.has('arch')) {
      const repo = params.get('repo')!
      if (!isRepoName(repo) || !isRepoName(params.get('arch')!)) return {status: 400, message: BAD_REPO_NAME}
      // MirrorManager: a source repo is always arch=source.
      const arch = repo.includes('source') ? 'source' : params.get('arch')!
      const header = `# repo = ${repo} arch = ${arch} `
      const dir = this.options.repos.get(repoKey(repo, arch))
      if (dir === undefined) {
        const pairs = [...this.options.repos.keys()].map((key) => key.split('\n') as [string, string])
        return {status: 404, message: unknownRepoMessage(header, pairs)}
      }
      const bucket = countmeBucket(params.get('countme'))
      return {repomd: dir ? `${dir}/repodata/repomd.xml` : 'repodata/repomd.xml', header, countme: bucket === undefined ? undefined : {repo, arch, bucket}}
    }
    if (path === null) return {status: 200, message: '# either path=, or repo= and arch= must be specified'}
    const dir = path.replace(/\/+/g, '/').replace(/^\/|\/$/g, '')
    const header = `# path = ${dir} `
    for (const candidate of [dir ? `${dir}/repodata/repomd.xml` : 'repodata/repomd.xml', `${dir}/repomd.xml`, dir]) {
      if (isRepomdPath(candidate) && ctx.snapshot.files.has(candidate)) return {repomd: candidate, header}
    }
    return {status: 404, message: 'error: invalid path'}
  }

  private async handle(ctx: RequestContext, target: YumTarget): Promise<void> {
    const metalink = target.kind === 'metalink'
    let repomd = target.repomd
    let header = `# path = ${repomd?.slice(0, -'/repodata/repomd.xml'.length) ?? ''} `
    let countme: Countme | undefined
    const params = new URLSearchParams(ctx.query)
    if (repomd === undefined) {
      const resolved = this.resolve(params, ctx)
      if ('status' in resolved) return this.fail(ctx, metalink, resolved.status, resolved.message)
      ;({repomd, header, countme} = resolved)
    }
    const protocols = requestedProtocols(params)
    if (protocols) header += `protocol = ${protocols.join(',')}`
    const file = ctx.snapshot.files.get(repomd)
    const state = file && (await this.state(file))
    if (!file || !state) return this.fail(ctx, metalink, 404, `${oneLine(repomd.slice(0, -'/repomd.xml'.length))}/repomd.xml not found or has not metalink`)
    const client = this.server.clientInfo(ctx)
    if (client === undefined) return this.fail(ctx, metalink, 400, BAD_COUNTRY_QUERY)
    const selection = this.server.selectMirrors(ctx, client, this.repositoryFile(ctx.snapshot, file, state), false)
    const origin = (this.options.baseUrls ?? DEFAULT_BASE_URLS).origin(ctx.req, client.https)
    const dir = repomd.slice(0, -'repodata/repomd.xml'.length)
    const body = metalink
      ? renderRepoMetalink({
          name: 'repomd.xml',
          current: state.current,
          alternates: state.alternates,
          sources: this.sources(selection, repomd, originUrlFor(origin, repomd), true, protocols),
          generator: GENERATOR,
        })
      : renderRepoMirrorList(header, this.sources(selection, dir, originUrlFor(origin, dir), false, protocols))
    const bytes = Buffer.from(body, 'utf8')
    ctx.res.writeHead(200, {'Content-Type': metalink ? METALINK_MEDIA_TYPE : 'text/plain; charset=utf-8', 'Cache-Control': PRIVATE, 'Content-Length': String(bytes.length)})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : bytes)
    this.server.finish(ctx, 200, metalink ? 'metalink' : 'mirrorlist', {
      path: repomd,
      fileSize: file.size,
      realm: selection.realm,
      bytesSent: ctx.req.method === 'HEAD' ? 0 : bytes.length,
      ...(countme && {countme}),
    })
  }

  /** An error answer in MirrorManager's form: the text, or for a metalink the failure document. */
  private fail(ctx: RequestContext, metalink: boolean, status: number, message: string): void {
    const body = Buffer.from(metalink ? metalinkFailure(message, GENERATOR) : message, 'utf8')
    ctx.res.writeHead(status, {'Content-Type': metalink ? METALINK_MEDIA_TYPE : 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', 'Content-Length': String(body.length)})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.server.finish(ctx, status, status === 200 ? 'other' : status === 400 ? 'bad_request' : 'not_found', {bytesSent: body.length})
  }

  /**
   * The repository as selection sees it: its directory (path ending in '/'), with the mirror
   * set of its repomd.xml plus the mirrors that held an alternate, at least `select.min_size`
   * bytes large, less the mirrors with a copy under the repository that content checks found
   * corrupt (as `mirrors.txt` leaves them out: dnf would download the bad package first).
   * `select.origin_only` patterns (`repomd.xml` by default) and `min_size` keep plain GETs of
   * the metadata on the origin; a metalink carries the hashes that make mirrors safe, so they
   * do not apply to the repository.
   */
  private repositoryFile(snapshot: Snapshot, file: FileEntry, state: RepoState): FileEntry {
    const ids = new Set<number>(file.mirrors)
    for (const alternate of state.alternates) for (const id of alternate.mirrors) ids.add(id)
    const dir = file.path.slice(0, -'repodata/repomd.xml'.length)
    return fileWith(file, {path: dir, size: Math.max(file.size, this.options.minSize), mirrors: snapshot.withoutBadCopiesUnder(ids, dir)})
  }

  /**
   * The ranked mirrors' URLs of `path` (a file, or a directory ending in '/'), then the
   * origin's. A metalink lists each mirror's https and http URL; a mirror list its https
   * URL, else its http one (MirrorManager's preference). With `protocols` (dnf's
   * `protocol=`), every URL of those protocols and only mirrors that have one, the origin
   * too only when its scheme is asked for; when nothing has one, the list as without
   * `protocols` (MirrorManager's answer to a protocol no mirror offers).
   */
  private sources(selection: Selection, path: string, originUrl: string, both: boolean, protocols?: readonly string[]): RepoSource[] {
    const origin: RepoSource = {urls: [originUrl], location: '', private: false}
    if (protocols) {
      const sources = this.mirrorSources(
        selection,
        path,
        REPO_PROTOCOLS.filter((p) => protocols.includes(p)),
        Number.POSITIVE_INFINITY,
      )
      if (protocols.includes(originUrl.slice(0, originUrl.indexOf(':')))) sources.push(origin)
      if (sources.length > 0) return sources
    }
    const sources = this.mirrorSources(selection, path, ['https', 'http'], both ? 2 : 1)
    sources.push(origin)
    return sources
  }

  /** The ranked mirrors with at least one URL of `schemes`, each with at most `perMirror` of them, `maxMirrors` at most. */
  private mirrorSources(selection: Selection, path: string, schemes: readonly string[], perMirror: number): RepoSource[] {
    const sources: RepoSource[] = []
    const max = this.options.maxMirrors ?? 20
    for (const candidate of selection.ranked) {
      if (sources.length >= max) break
      const urls = mirrorUrls(candidate.mirror, path, schemes)
      if (urls.length === 0) continue
      sources.push({urls: urls.slice(0, perMirror), location: candidate.mirror.country?.toUpperCase() ?? '', private: candidate.mirror.prefixOnly || candidate.mirror.asOnly})
    }
    return sources
  }

  /** The details of the repomd.xml version `file` names, read once per version and {@link STATE_TTL_MS}; undefined when it cannot be read. */
  private async state(file: FileEntry, now = Date.now()): Promise<RepoState | undefined> {
    const known = this.states.get(file.path)
    if (known && known.size === file.size && known.mtime === file.mtime && now - known.at < STATE_TTL_MS) return known
    let loading = this.loading.get(file.path)
    if (!loading) {
      loading = this.load(file, now).finally(() => this.loading.delete(file.path))
      this.loading.set(file.path, loading)
    }
    return loading
  }

  private async load(file: FileEntry, now: number): Promise<RepoState | undefined> {
    let bytes: Buffer
    try {
      bytes = await readFile(this.server.root + sep + file.path)
    } catch {
      this.states.delete(file.path)
      return undefined
    }
    const current = repomdVersion(bytes, file.mtime)
    let alternates: RepomdAlternate[] = []
    if (this.options.database) {
      try {
        alternates = await readRepomdAlternates(this.options.database.db, file.path, current.sha256, this.options.alternatesDays ?? 3)
      } catch {
        alternates = [] // the store is down: the current version alone still works
      }
    }
    const state = {size: file.size, mtime: file.mtime, at: now, current, alternates}
    if (this.states.size >= 10_000) this.states.clear()
    this.states.set(file.path, state)
    return state
  }
}

/** The URLs of `path` on `mirror` for each of `schemes` it has and probing has not found refused (`http_up`, `https_up` false), in that order; none when the path lies outside its subtree. */
function mirrorUrls(mirror: SelectMirror, path: string, schemes: readonly string[]): string[] {
  // dnf fetches the repository's files relative to these URLs: a per-file token cannot follow (../sign.ts).
  if (mirror.sign) return []
  const urls: string[] = []
  try {
    for (const scheme of schemes) {
      // A scheme that probing found refused is no source: dnf would spend a connection on it.
      if ((scheme === 'http' && mirror.httpUp === false) || (scheme === 'https' && mirror.httpsUp === false)) continue
      const base = publicBase(mirror, scheme)
      if (base) urls.push(mirrorUrlOn(mirror, base, path))
    }
  } catch {
    return []
  }
  return urls
}
