/**
 * Local delivery: what the origin answers itself. Files with `send` (RFC 9110 Range and
 * conditional requests), directory indexes and their slash redirects, and 404s; a realpath
 * check keeps every byte inside the root, and a symlink is followed only as the index
 * recorded it.
 */
import {realpath, stat} from 'node:fs/promises'
import http from 'node:http'
import {sep} from 'node:path'
import send from 'send'
import {mtimeSeconds} from '../../origin/freshness.js'
import {resolveLinks} from '../../origin/links.js'
import {pathFilter} from '../../glob.js'
import {encodePath} from '../../select/url.js'
import {headerSafe} from '../../text.js'
import type {SnapshotKeeper} from '../snapshot/keeper.js'
import {listDirectory, renderIndex} from './autoindex.js'
import type {OnDisk, RequestContext, RouteServices} from './route.js'

/** The answers local delivery reports through: the server's, so that each request is reported once. */
export interface LocalAnswers extends Pick<RouteServices, 'plain' | 'finish'> {
  /** The catch-all: 500 with a log line. */
  fail(ctx: RequestContext, error: unknown): void
}

/** Files and directories of the origin tree, answered from disk. */
export class LocalDelivery {
  /** The realpath of the root ('' until {@link open}). */
  rootReal = ''

  /**
   * @param keeper the snapshot in effect (for the origin's symlinks)
   * @param serverHeader `mb/VERSION` for the `Server` header, or undefined for none
   * @param answers the server's plain answers and reports
   * @param exclude `index.exclude`: picomatch globs on root-relative paths never delivered nor listed (dotfiles, `.git/`), as if absent
   */
  constructor(
    private readonly keeper: Pick<SnapshotKeeper, 'current'>,
    private readonly serverHeader: string | undefined,
    private readonly answers: LocalAnswers,
    exclude: readonly string[] = [],
  ) {
    const shown = pathFilter([], [...exclude])
    this.hidden = (path) => !shown(path)
  }

  /** Whether root-relative `path` is left out by `index.exclude`. */
  private readonly hidden: (path: string) => boolean

  /** Resolves the root (absolute or relative) to its realpath. */
  async open(root: string): Promise<void> {
    this.rootReal = await realpath(root)
  }

  /** `{Server: 'mb/VERSION'}`, or nothing when no version was given. */
  private serverHeaders(): Record<string, string> {
    return this.serverHeader === undefined ? {} : {Server: this.serverHeader}
  }

  /** Not in the index: a directory, a file on disk not indexed yet, or 404. */
  async fromDisk(ctx: RequestContext): Promise<void> {
    const target = await this.resolveOnDisk(ctx.path)
    if (target === undefined) return this.answers.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}`)
    if (target.directory) return this.directory(ctx, target.real)
    if (ctx.slash) return this.answers.plain(ctx, 404, 'not_found', `Not found: /${ctx.path}/ (a file, not a directory)`)
    return this.deliver(ctx, 'not_indexed', target.real)
  }

  /**
   * Realpath of root-relative `path` when it exists inside the root and is not hidden, else
   * undefined; a path with a symlink on it only when the index's links lead it there
   * (`Snapshot.links`).
   */
  async resolveOnDisk(path: string): Promise<OnDisk | undefined> {
    if (path && this.hidden(path)) return undefined
    let real: string
    try {
      real = await realpath(path ? `${this.rootReal}${sep}${path}` : this.rootReal)
    } catch {
      return undefined
    }
    if (real !== this.rootReal && !real.startsWith(this.rootReal + sep)) return undefined
    // A symlink on the path is followed only as the index recorded it (origin/links.ts): one
    // that loops back into its own ancestry, or that the index has not seen, is not.
    if (path && real !== `${this.rootReal}${sep}${path}` && !this.linksTo(path, real)) return undefined
    try {
      const st = await stat(real)
      if (st.isDirectory()) return {real, directory: true, size: 0, mtime: mtimeSeconds(st)}
      if (st.isFile()) return {real, directory: false, size: st.size, mtime: mtimeSeconds(st)}
    } catch {
      /* vanished */
    }
    return undefined
  }

  /** True when the snapshot's symlinks lead from root-relative `path` to the realpath `real`. */
  private linksTo(path: string, real: string): boolean {
    const canonical = resolveLinks(this.keeper.current.links, path)
    return canonical !== undefined && real === `${this.rootReal}${sep}${canonical}`
  }

  private async directory(ctx: RequestContext, real: string): Promise<void> {
    if (!ctx.slash) {
      const q = ctx.query ? `?${ctx.query}` : ''
      const location = `/${encodePath(ctx.path)}/${q}`
      ctx.res.writeHead(301, {Location: location, 'Content-Length': '0', 'Cache-Control': 'public, max-age=300', ...this.serverHeaders()})
      ctx.res.end()
      this.answers.finish(ctx, 301, 'directory')
      return
    }
    const entries = (await listDirectory(real, this.rootReal)).filter((e) => !this.hidden(ctx.path ? `${ctx.path}/${e.name}` : e.name))
    const files = ctx.snapshot.files
    const body = Buffer.from(renderIndex(ctx.path, entries, (name) => files.has(ctx.path ? `${ctx.path}/${name}` : name)))
    ctx.res.writeHead(200, {'Content-Type': 'text/html; charset=utf-8', 'Content-Length': body.length, 'Cache-Control': 'public, max-age=60', ...this.serverHeaders()})
    ctx.res.end(ctx.req.method === 'HEAD' ? undefined : body)
    this.answers.finish(ctx, 200, 'directory', {bytesSent: ctx.req.method === 'HEAD' ? 0 : body.length})
  }

  /**
   * Delivers a file from the origin with `send` (Content-Length, Last-Modified, ETag,
   * Range -> 206/416, If-Modified-Since/If-None-Match -> 304, HEAD).
   * @param reason why the origin serves it (sent as `X-MB-Origin-Reason`)
   * @param knownReal the file's realpath when already resolved
   * @param detail why, in words (sent as `X-MB-Origin-Detail`; `no_mirror` says which rules excluded the mirrors holding it)
   */
  async deliver(ctx: RequestContext, reason: string, knownReal?: string, detail?: string): Promise<void> {
    let real = knownReal
    if (real === undefined) {
      const target = await this.resolveOnDisk(ctx.path)
      if (target === undefined || target.directory) return this.answers.plain(ctx, 404, 'not_found', `Not found: /${ctx.path} (indexed, but missing from the origin tree)`)
      real = target.real
    }
    const {req, res} = ctx
    // send() percent-decodes its path argument once; hand it the encoded real path.
    const stream = send(req, `/${encodePath(real.slice(1))}`, {dotfiles: 'allow', index: false, etag: true, lastModified: true, acceptRanges: true})
    stream.on('headers', (response: http.ServerResponse) => {
      response.setHeader('X-MB-Origin-Reason', reason)
      if (detail !== undefined) response.setHeader('X-MB-Origin-Detail', headerSafe(detail))
      if (this.serverHeader !== undefined) response.setHeader('Server', this.serverHeader)
    })
    stream.on('error', (error: Error & {status?: number; statusCode?: number}) => {
      const status = error.status ?? error.statusCode ?? 500
      if (status >= 500) return this.answers.fail(ctx, error)
      this.answers.plain(ctx, status, status === 404 ? 'not_found' : 'bad_request', `${http.STATUS_CODES[status] ?? 'Error'}: /${ctx.path}`)
    })
    res.once('finish', () => {
      const status = res.statusCode
      if (status >= 400) return // reported by the error handler
      const length = Number(res.getHeader('Content-Length') ?? 0)
      const range = status === 206 ? /bytes (\d+)-/.exec(String(res.getHeader('Content-Range') ?? '')) : null
      this.answers.finish(ctx, status, status === 304 ? 'not_modified' : 'local', {
        bytesSent: req.method === 'HEAD' || status === 304 ? 0 : length,
        fileSize: ctx.file?.size,
        rangeStart: range ? Number(range[1]) : undefined,
        originReason: reason,
      })
    })
    stream.pipe(res)
  }
}
