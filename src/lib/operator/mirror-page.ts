/**
 * A page per mirror, `GET /mirrors/NAME` (the overview's next question: which files does it
 * lack?). Its public facts as the overview row shows them (./network.ts `overviewRow`), then
 * the files it lacks, holds stale or holds corrupt (`?files=missing|stale|bad`, default
 * `missing`; ./mirror-view.ts) per folder with counts, or one folder's files
 * (`?folder=DIR`, '' or `/` for the top of the tree). Both lists are paged with the
 * overview's `?page=N&page_size=M` (./network-page.ts `parsePaging`), by
 * {@link DEFAULT_PAGE_SIZE} rows when no `?page_size=` is given (`?page=2` alone included).
 *
 * HTML (self-contained, like the overview) or JSON with `Accept: application/json`:
 * `{mirror, files, total, bytes, page, page_size, pages, count, folders}` for the folders
 * (`count` folders), or `{…, folder, count, entries}` for one folder (`count` files, each
 * entry `{path, size, mtime}` with the mirror's `mirror_size` and `mirror_mtime` for stale
 * copies). `Cache-Control: public, max-age=60`.
 *
 * Only mirrors the overview lists ({@link listedMirror}) have a page: any other name,
 * disabled, `prefix_only`, `as_only` or limited to client networks included, is 404 as an
 * unknown one is, so that the page never reveals it; a path of the tree (a top directory
 * named `mirrors`) is served as it would be without this route. No credentials, prefixes, AS
 * numbers, admin names, e-mail addresses or comments are shown. Bad input is 400: a `?files=`
 * other than the three kinds, a `?folder=` that is not a folder of the tree (or with `..`,
 * NUL, backslash, or not percent-encoded UTF-8), a `?page=`/`?page_size=` out of range.
 */
import {acceptsJson} from '../metalink/http.js'
import type {Route, RouteServices} from '../serve/delivery/route.js'
import {escapeHtml} from '../serve/delivery/autoindex.js'
import type {Snapshot} from '../serve/snapshot/snapshot.js'
import type {SelectMirror} from '../select/types.js'
import {FILE_KINDS, type FileKind, type FolderCount, type MirrorFile} from '../lookup/mirror-files.js'
import {humanBytes} from '../stats/render.js'
import {listedMirror, type NetworkView, type OverviewRow, overviewRow} from './network.js'
import {OVERVIEW_HEADER, PAGE_STYLE, type Paging, overviewRowHtml, parsePaging, parseSubtree} from './network-page.js'
import {queryParam} from '../serve/delivery/path.js'
import {sendNetworkPage} from './page-response.js'
import type {MirrorFilesView} from './mirror-view.js'

/** Rows per page when no `?page_size=` is given. */
const DEFAULT_PAGE_SIZE = 100

/** One mirror's page (the JSON body; see the module doc). */
export interface MirrorPage {
  mirror: OverviewRow
  files: FileKind
  /** Files of that kind in all folders, and their bytes (origin sizes). */
  total: number
  bytes: number
  /** The folder listed ('' = the top), when one was asked for. */
  folder?: string
  page: number
  page_size: number
  pages: number
  /** Rows of the list being paged: folders, or the folder's files. */
  count: number
  folders?: FolderCount[]
  entries?: MirrorFile[]
}

/** The listed mirror named `name` in `snapshot`, or undefined (unknown, or not public). */
function publicMirror(snapshot: Snapshot, name: string): SelectMirror | undefined {
  for (const m of snapshot.mirrors.values()) if (m.identifier === name) return listedMirror(m) ? m : undefined
  return undefined
}

/** The request's `?files=`, `?folder=` and paging, or the 400 message. */
function parseQuery(query: string | undefined): {kind: FileKind; folder: string | undefined; paging: NonNullable<Paging>} | {error: string} {
  const files = query ? queryParam(query, 'files') : undefined
  if (files !== undefined && (files === null || !(FILE_KINDS as readonly string[]).includes(files))) return {error: `?files= must be one of ${FILE_KINDS.join(', ')}`}
  const folderValue = query ? queryParam(query, 'folder') : undefined
  let folder: string | undefined
  if (folderValue !== undefined) {
    const parsed = parseSubtree(folderValue)
    if ('error' in parsed) return {error: parsed.error.replace('?path=', '?folder=')}
    folder = parsed.subtree.replace(/\/$/, '')
  }
  const paged = query ? parsePaging(queryParam(query, 'page'), queryParam(query, 'page_size'), DEFAULT_PAGE_SIZE) : {paging: undefined}
  if ('error' in paged) return paged
  return {kind: (files ?? 'missing') as FileKind, folder, paging: paged.paging ?? {page: 1, size: DEFAULT_PAGE_SIZE}}
}

/** The query of another view of the same page. */
function href(kind: FileKind, folder: string | undefined, page?: number, size?: number): string {
  const parts = [`files=${kind}`]
  if (folder !== undefined) parts.push(`folder=${encodeURIComponent(folder)}`)
  if (page !== undefined) parts.push(`page=${page}`, `page_size=${size}`)
  return escapeHtml(`?${parts.join('&')}`)
}

/** "Page N of M" with links to the pages around it. */
function pager(p: MirrorPage): string {
  const last = Math.max(p.pages, 1)
  const links = [`Page ${p.page} of ${last}`]
  if (p.page > 1) links.push(`<a rel="prev" href="${href(p.files, p.folder, Math.min(p.page - 1, last), p.page_size)}">previous</a>`)
  if (p.page < p.pages) links.push(`<a rel="next" href="${href(p.files, p.folder, p.page + 1, p.page_size)}">next</a>`)
  return `<p class="pager">${links.join(' · ')}</p>`
}

/** The list part of the page: the folders with counts, or one folder's files. */
function renderList(p: MirrorPage): string {
  if (p.entries === undefined) {
    const rows = (p.folders ?? []).map(
      (f) => `<tr><td><a href="${href(p.files, f.folder)}">/${escapeHtml(f.folder)}</a></td><td class="num">${f.files}</td><td class="num">${humanBytes(f.bytes)}</td></tr>`,
    )
    return `<table id="folders"><thead><tr><th>Folder</th><th>Files</th><th>Size</th></tr></thead><tbody>\n${rows.join('\n')}\n</tbody></table>`
  }
  const stale = p.files === 'stale'
  const rows = p.entries.map(
    (f) =>
      `<tr><td>${escapeHtml(f.path)}</td><td class="num">${humanBytes(f.size)}</td><td>${escapeHtml(f.mtime)}</td>${stale ? `<td class="num">${humanBytes(f.mirror_size ?? 0)}</td><td>${escapeHtml(f.mirror_mtime ?? '-')}</td>` : ''}</tr>`,
  )
  const head = `<tr><th>File</th><th>Size</th><th>Modified (UTC)</th>${stale ? '<th>Mirror size</th><th>Mirror modified (UTC)</th>' : ''}</tr>`
  return `<p><a href="${href(p.files, undefined)}">All folders</a></p><table id="files"><thead>${head}</thead><tbody>\n${rows.join('\n')}\n</tbody></table>`
}

/** Words for each kind, in headings. */
const KIND_TEXT: Record<FileKind, string> = {missing: 'Files it lacks', stale: 'Files it holds stale', bad: 'Files it holds corrupt'}

/** The page as self-contained HTML. */
function renderHtml(p: MirrorPage): string {
  const name = escapeHtml(p.mirror.name)
  const tabs = FILE_KINDS.map((k) => (k === p.files ? `<strong>${k}</strong>` : `<a href="${href(k, p.folder)}">${k}</a>`)).join(' · ')
  const where = p.folder === undefined ? `${p.count} folder${p.count === 1 ? '' : 's'}` : `/${escapeHtml(p.folder)}: ${p.count} file${p.count === 1 ? '' : 's'}`
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<title>Mirror ${name}</title>
<style>
${PAGE_STYLE}
</style></head>
<body>
<h1>Mirror ${name}</h1>
<p><a href="../mirrors">All mirrors</a></p>
<table id="mirror"><thead>${OVERVIEW_HEADER}</thead><tbody>
${overviewRowHtml(p.mirror)}
</tbody></table>
<h2>${KIND_TEXT[p.files]}</h2>
<p class="kinds">${tabs}</p>
<p id="summary">${p.total} ${p.files} file${p.total === 1 ? '' : 's'} (${humanBytes(p.bytes)}); ${where}.</p>
${renderList(p)}
${pager(p)}
</body></html>
`
}

/**
 * The page of mirror `m` for `kind`, one folder or the folders, one page of `paging`.
 * @throws what the database driver throws
 */
export async function buildMirrorPage(
  view: NetworkView,
  files: MirrorFilesView,
  snapshot: Snapshot,
  m: SelectMirror,
  request: {kind: FileKind; folder: string | undefined; paging: NonNullable<Paging>},
): Promise<MirrorPage> {
  const [records, index] = await Promise.all([view.records(), files.index(snapshot, m, request.kind)])
  const holding = view.holdings('').get(m.id) ?? {files: 0, bytes: 0, originFiles: 0, originBytes: 0}
  const {page, size} = request.paging
  const head = {mirror: overviewRow(view, m, records.get(m.id), holding), files: request.kind, total: index.files, bytes: index.bytes}
  if (request.folder === undefined) {
    const count = index.folders.length
    return {...head, page, page_size: size, pages: Math.ceil(count / size), count, folders: index.folders.slice((page - 1) * size, page * size)}
  }
  const listed = files.folderPage(snapshot, index, request.folder, page, size)
  return {...head, folder: request.folder, page, page_size: size, pages: Math.ceil(listed.total / size), count: listed.total, entries: listed.files}
}

/** The `GET /mirrors/NAME` route (see the module doc). */
export function mirrorPageRoute(services: RouteServices, view: NetworkView, files: MirrorFilesView): Route<string> {
  return {
    name: 'mirror',
    match: (ctx) => {
      if (ctx.slash || ctx.file !== undefined || !ctx.path.startsWith('mirrors/')) return undefined
      const name = ctx.path.slice('mirrors/'.length)
      return name !== '' && !name.includes('/') ? name : undefined
    },
    async handle(ctx, name) {
      const m = publicMirror(ctx.snapshot, name)
      if (m === undefined) {
        if (await services.resolveOnDisk(ctx.path)) return services.serveDefault(ctx)
        return services.plain(ctx, 404, 'not_found', `Not found: no mirror named ${name} is listed on /mirrors.`)
      }
      const request = parseQuery(ctx.query)
      if ('error' in request) return services.plain(ctx, 400, 'bad_request', `Bad request: ${request.error}.`)
      if (request.folder !== undefined && request.folder !== '' && ctx.snapshot.files.counts.subtree(`${request.folder}/`).files === 0) {
        return services.plain(ctx, 400, 'bad_request', `Bad request: ?folder= must be a folder of the tree; /${request.folder} holds no file.`)
      }
      const json = acceptsJson(ctx.req.headers.accept)
      const page = await buildMirrorPage(view, files, ctx.snapshot, m, request)
      const body = Buffer.from(json ? `${JSON.stringify(page, null, 2)}\n` : renderHtml(page))
      sendNetworkPage(services, ctx, body, json)
    },
  }
}
