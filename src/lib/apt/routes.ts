/**
 * apt's `mirror+http://` method (apt-transport-mirror(1), apt >= 1.6): `GET /DIR/mirrors.txt`
 * answers the mirror list of the archive at DIR, in apt's mirror file format: one base URL
 * per line, best first, each with `priority:N` metadata after a tab (apt tries the lowest N
 * first; without priorities it would pick at random), the origin last, in a form it delivers
 * itself (`serve.origin_url`, else `BASE/_origin/DIR`, ../serve/delivery/origin-form.ts):
 * ```
 * http://ftp.example.de/debian/<TAB>priority:1
 * http://mirror.example.se/debian/<TAB>priority:2
 * http://download.example.org/_origin/debian/<TAB>priority:3
 * ```
 * `deb mirror+http://download.example.org/debian/mirrors.txt bookworm main` in sources.list
 * then sends every apt request to the first mirror, and to the next when one fails to answer
 * (apt 2.6 does not try another mirror after a hash mismatch: it stops with "Hash Sum
 * mismatch").
 *
 * The mirrors are those selection ranks for the client among the mirrors holding the current
 * `DIR/dists/SUITE/InRelease` or `Release` of any suite and no copy under DIR that a content
 * check found corrupt: the archive as a whole, selected as its directory. Which mirrors those are is read from the snapshot and kept per DIR for
 * {@link HOLDERS_TTL_MS}. A real `mirrors.txt` in the tree is delivered as itself.
 */
import type {SelectMirror} from '../select/types.js'
import {mirrorUrl} from '../select/url.js'
import {BAD_COUNTRY_QUERY, type RequestContext, type Route, type RouteServices} from '../serve/delivery/route.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import {BaseUrls} from '../serve/delivery/public-url.js'
import {originUrlFor} from '../metalink/document.js'

const NAME = 'mirrors.txt'
/** The base URLs when none are given: from the request's Host, the origin form. */
const DEFAULT_BASE_URLS = new BaseUrls()
/** How long the set of mirrors holding an archive's Release files is reused, ms. */
const HOLDERS_TTL_MS = 60_000

export interface AptRouteOptions {
  /** `select.min_size` in bytes: the archive is selected as a file at least this large. */
  minSize: number
  /** Mirrors per list at most (default 20). */
  maxMirrors?: number
  /** This server's URLs (`serve.public_url`, `serve.origin_url`; ../serve/delivery/public-url.ts); default: from the request's Host, the origin form. */
  baseUrls?: BaseUrls
}

/** The archive directory a `DIR/mirrors.txt` request names ('' = the root, else ending in '/'). */
export interface AptTarget {
  dir: string
}

function aptTarget(ctx: Pick<RequestContext, 'path' | 'slash' | 'file'>): AptTarget | undefined {
  if (ctx.slash || ctx.file !== undefined) return undefined
  const path = ctx.path
  if (path === NAME) return {dir: ''}
  if (path.endsWith(`/${NAME}`)) return {dir: path.slice(0, -NAME.length)}
  return undefined
}

/**
 * Ids of the mirrors holding the current `dists/*\/InRelease` or `dists/*\/Release` under
 * `dir`, less those with a copy under `dir` that content checks found corrupt
 * ({@link Snapshot.withoutBadCopiesUnder}): apt stops at a hash mismatch instead of trying the
 * next mirror, so one bad `.deb` makes the whole mirror bad for the archive's apt clients.
 */
export function releaseHolders(snapshot: Snapshot, dir: string): Int16Array {
  const prefix = `${dir}dists/`
  const ids = new Set<number>()
  for (const path of snapshot.files.keys(prefix)) {
    if (!(path.endsWith('/InRelease') || path.endsWith('/Release'))) continue
    // dists/SUITE/Release only (not dists/SUITE/main/binary-amd64/Release).
    if (path.indexOf('/', prefix.length) !== path.lastIndexOf('/')) continue
    for (const id of snapshot.files.get(path)?.mirrors ?? []) ids.add(id)
  }
  return snapshot.withoutBadCopiesUnder(ids, dir)
}

/**
 * The apt mirror-list body: each base URL (ending in '/') with `priority:N`, 1 first.
 * @param urls base URLs, best first
 */
function renderAptMirrorList(urls: readonly string[]): string {
  return urls.map((url, i) => `${url}\tpriority:${i + 1}\n`).join('')
}

/** The route, bound to one server. */
export class AptRoutes {
  private readonly holders = new Map<string, {at: number; snapshot: Snapshot; badCopies: Snapshot['badCopies']; ids: Int16Array}>()

  constructor(
    private readonly server: RouteServices,
    private readonly options: AptRouteOptions,
  ) {}

  /** The route (see {@link Route}). */
  readonly route: Route<AptTarget> = {
    name: 'apt',
    match: aptTarget,
    handle: (ctx, target) => this.handle(ctx, target),
  }

  private async handle(ctx: RequestContext, target: AptTarget): Promise<void> {
    const own = await this.server.resolveOnDisk(ctx.path)
    if (own && !own.directory) return this.server.deliver(ctx, 'not_indexed', own.real)
    const dir = await this.server.resolveOnDisk(target.dir.replace(/\/$/, ''))
    if (!dir?.directory) return this.server.plain(ctx, 404, 'not_found', `Not found: /${target.dir} is not a directory of this archive.\n`)
    const client = this.server.clientInfo(ctx)
    if (client === undefined) return this.server.plain(ctx, 400, 'bad_request', BAD_COUNTRY_QUERY)
    const archive = {path: target.dir, size: this.options.minSize, mtime: 0, mirrors: this.holdersOf(ctx.snapshot, target.dir), md5: null, sha1: null, sha256: null}
    const selection = this.server.selectMirrors(ctx, client, archive, false)
    const urls: string[] = []
    for (const candidate of selection.ranked) {
      if (urls.length >= (this.options.maxMirrors ?? 20)) break
      const url = baseOn(candidate.mirror, target.dir, client.https)
      if (url !== undefined) urls.push(url)
    }
    urls.push(originUrlFor((this.options.baseUrls ?? DEFAULT_BASE_URLS).origin(ctx.req, client.https), target.dir))
    const body = Buffer.from(renderAptMirrorList(urls), 'utf8')
    ctx.res.writeHead(200, {'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'private, no-store', 'Content-Length': String(body.length)})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.server.finish(ctx, 200, 'mirrorlist', {path: ctx.path, realm: selection.realm, bytesSent: ctx.req.method === 'HEAD' ? 0 : body.length})
  }

  /**
   * {@link releaseHolders}, kept per directory and snapshot for {@link HOLDERS_TTL_MS}, and
   * only while the snapshot's corrupt copies are the ones it was computed with (the keeper
   * replaces that map whole on every change): a copy found corrupt or cleared changes the list
   * at the next refresh, not a minute later.
   */
  private holdersOf(snapshot: Snapshot, dir: string, now = Date.now()): Int16Array {
    const known = this.holders.get(dir)
    if (known && known.snapshot === snapshot && known.badCopies === snapshot.badCopies && now - known.at < HOLDERS_TTL_MS) return known.ids
    const ids = releaseHolders(snapshot, dir)
    if (this.holders.size >= 100) this.holders.clear()
    this.holders.set(dir, {at: now, snapshot, badCopies: snapshot.badCopies, ids})
    return ids
  }
}

/**
 * The URL of directory `dir` ('' or ending in '/') on `mirror` for the client's scheme;
 * undefined outside its subtree, and for a mirror that signs its URLs (apt appends file names
 * to a base URL, which no per-file token can follow: ../sign.ts).
 */
function baseOn(mirror: SelectMirror, dir: string, https: boolean): string | undefined {
  if (mirror.sign) return undefined
  try {
    return mirrorUrl(mirror, dir, https)
  } catch {
    return undefined
  }
}
