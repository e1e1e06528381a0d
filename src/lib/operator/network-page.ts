/**
 * The network overview page, `GET /mirrors` (MirrorBrain's `mirrorlist` and `markers`,
 * MirrorManager's public mirror lists): one row per mirror a client could be sent to, with
 * its country, continent, protocols, probe state per scheme, whether it honours Range, last successful scan, share of
 * the tree it holds in the current version and score ({@link buildOverview}), above a world
 * map with a marker per mirror coloured by health. `?path=SUBDIR/` narrows it to a subtree:
 * the mirrors carrying part of it, and their share of it.
 *
 * HTML (self-contained: inline CSS and SVG, no script, no external asset or request), or
 * JSON with `Accept: application/json` (`Vary: Accept`). The body is computed from the
 * snapshot and the cached network view (./network.ts) and kept for {@link PAGE_TTL_MS} per
 * subtree and format, so a burst of requests costs one computation; `Cache-Control:
 * public, max-age=60`. A directory named `mirrors` at the top of the tree stays reachable at
 * `/mirrors/`.
 *
 * `?page=N&page_size=M` gives one page of the rows (JSON: `total`, `page`, `page_size`,
 * `pages`; HTML: links to the pages around it). Each row carries the mirror's public base
 * URLs by protocol, and its name links to its own page (`/mirrors/NAME`, ./mirror-page.ts).
 *
 * Bad input: a `?path=` longer than 1024 bytes (`MAX_FOLDER_BYTES`, ../text.ts), with `..`, `.` or empty
 * segments, NUL, a backslash, or not percent-encoded UTF-8 is 400; one that is not a directory of the tree is 404; a
 * `?page=` or `?page_size=` that is not a whole number in range is 400.
 */
import type {Route, RouteServices} from '../serve/delivery/route.js'
import {queryParam} from '../serve/delivery/path.js'
import {sendNetworkPage} from './page-response.js'
import {escapeHtml} from '../serve/delivery/autoindex.js'
import {acceptsJson} from '../metalink/http.js'
import {buildOverview, type NetworkView, type Overview, type OverviewRow, overviewPage} from './network.js'
import {shortDuration} from '../time.js'
import type {OriginShareRow} from '../stats/origin.js'
import {humanBytes} from '../stats/render.js'
import {folderProblem, trimSlashes} from '../text.js'

/** How long a computed page is answered again (ms). */
const PAGE_TTL_MS = 30_000
/** Pages kept at once (subtree x format x page). */
const MAX_PAGES = 128
/** Rows per page when `?page=` comes without `?page_size=`, and the most one page may hold. */
const DEFAULT_PAGE_SIZE = 50
const MAX_PAGE_SIZE = 1000

/** A mirror's protocols, each linked to its public base URL where it has one. */
function protocolLinks(r: OverviewRow): string {
  if (r.protocols.length === 0) return '-'
  return r.protocols
    .map((p) => {
      const url = r.urls[p as keyof OverviewRow['urls']]
      return url ? `<a href="${escapeHtml(url)}">${escapeHtml(p)}</a>` : escapeHtml(p)
    })
    .join(' ')
}

/** The page's query for page `page`, keeping the subtree. */
function pageHref(overview: Overview, page: number): string {
  return `?${overview.path ? `path=${encodeURIComponent(overview.path)}&` : ''}page=${page}&page_size=${overview.page_size}`
}

/** "Page N of M" with links to the pages before and after, for a paged overview; '' otherwise. */
function renderPager(overview: Overview): string {
  if (overview.page === undefined || overview.pages === undefined) return ''
  const links = [`Page ${overview.page} of ${Math.max(overview.pages, 1)}`]
  if (overview.page > 1) links.push(`<a rel="prev" href="${escapeHtml(pageHref(overview, Math.min(overview.page - 1, Math.max(overview.pages, 1))))}">previous</a>`)
  if (overview.page < overview.pages) links.push(`<a rel="next" href="${escapeHtml(pageHref(overview, overview.page + 1))}">next</a>`)
  return `<p class="pager">${links.join(' · ')}</p>\n`
}

/** Map size in SVG units: 2 per degree, equirectangular (plate carrée). */
const MAP_WIDTH = 720
const MAP_HEIGHT = 360

/** Marker colours by health (the screenshot test reads them). */
const HEALTH_COLOURS = {up: '#1a9641', down: '#d7191c', unprobed: '#888888'} as const

/** The marker colour of a mirror that is up but behind the origin by its sync trace (`sync.lag_warning_seconds`). */
const LAGGING_COLOUR = '#fdae61'

/**
 * Rough land outlines as [longitude, latitude] rings: a simple coastline for orientation,
 * not a survey (a few dozen points per continent).
 */
const LAND: number[][][] = [
  // North America
  [
    [-168, 66],
    [-156, 71],
    [-128, 70],
    [-95, 72],
    [-80, 73],
    [-62, 60],
    [-55, 52],
    [-66, 44],
    [-76, 35],
    [-81, 25],
    [-97, 26],
    [-97, 19],
    [-87, 15],
    [-83, 9],
    [-78, 8],
    [-92, 15],
    [-105, 20],
    [-112, 29],
    [-117, 33],
    [-124, 40],
    [-124, 48],
    [-135, 58],
    [-150, 60],
    [-165, 60],
  ],
  // Greenland
  [
    [-73, 78],
    [-60, 82],
    [-30, 83],
    [-20, 75],
    [-22, 70],
    [-42, 60],
    [-52, 64],
    [-58, 75],
  ],
  // South America
  [
    [-80, 9],
    [-60, 11],
    [-50, 0],
    [-35, -5],
    [-39, -15],
    [-48, -26],
    [-58, -38],
    [-65, -42],
    [-68, -52],
    [-74, -52],
    [-73, -40],
    [-71, -18],
    [-76, -14],
    [-81, -5],
    [-80, 1],
  ],
  // Eurasia
  [
    [-10, 36],
    [-9, 43],
    [-1, 46],
    [-4, 48],
    [2, 51],
    [8, 54],
    [10, 58],
    [5, 61],
    [14, 67],
    [25, 71],
    [40, 67],
    [60, 69],
    [80, 73],
    [100, 77],
    [112, 74],
    [140, 72],
    [160, 70],
    [180, 68],
    [180, 65],
    [170, 60],
    [163, 58],
    [156, 51],
    [140, 54],
    [135, 43],
    [128, 35],
    [122, 40],
    [121, 31],
    [117, 24],
    [108, 21],
    [106, 10],
    [100, 13],
    [103, 1],
    [98, 8],
    [97, 17],
    [92, 22],
    [80, 15],
    [77, 8],
    [72, 20],
    [67, 25],
    [57, 25],
    [56, 27],
    [50, 30],
    [48, 29],
    [56, 24],
    [59, 22],
    [52, 16],
    [43, 13],
    [39, 21],
    [35, 28],
    [33, 31],
    [35, 36],
    [27, 37],
    [26, 40],
    [23, 37],
    [21, 39],
    [19, 42],
    [13, 45],
    [12, 44],
    [16, 40],
    [16, 38],
    [10, 44],
    [3, 43],
    [-1, 37],
    [-5, 36],
  ],
  // Africa
  [
    [-17, 21],
    [-10, 30],
    [-6, 36],
    [10, 37],
    [11, 33],
    [20, 31],
    [32, 31],
    [34, 28],
    [38, 18],
    [43, 12],
    [51, 12],
    [40, -3],
    [39, -10],
    [40, -16],
    [35, -24],
    [32, -29],
    [27, -34],
    [19, -35],
    [12, -18],
    [13, -5],
    [9, 3],
    [4, 6],
    [-8, 4],
    [-13, 8],
    [-17, 14],
  ],
  // Australia
  [
    [114, -22],
    [123, -17],
    [131, -12],
    [137, -12],
    [142, -11],
    [146, -19],
    [153, -25],
    [151, -34],
    [146, -39],
    [140, -38],
    [131, -31],
    [115, -34],
  ],
  // Great Britain, Japan, the Sunda islands, New Zealand, Madagascar
  [
    [-6, 50],
    [1, 51],
    [2, 53],
    [-2, 56],
    [-2, 58],
    [-5, 58],
    [-5, 55],
    [-3, 54],
    [-5, 52],
  ],
  [
    [130, 31],
    [135, 34],
    [141, 36],
    [142, 40],
    [141, 45],
    [145, 44],
    [140, 41],
    [136, 36],
    [132, 34],
  ],
  [
    [95, 5],
    [106, -6],
    [115, -8],
    [120, -9],
    [110, -2],
    [104, 2],
  ],
  [
    [172, -35],
    [178, -38],
    [174, -41],
    [170, -46],
    [166, -46],
    [172, -40],
  ],
  [
    [44, -25],
    [47, -25],
    [50, -15],
    [49, -12],
    [44, -17],
  ],
  // Antarctica
  [
    [-180, -72],
    [180, -72],
    [180, -90],
    [-180, -90],
  ],
]

/** SVG x, y of a position (degrees) on the equirectangular map. */
function project(longitude: number, latitude: number): [number, number] {
  return [Math.round((longitude + 180) * (MAP_WIDTH / 360) * 10) / 10, Math.round((90 - latitude) * (MAP_HEIGHT / 180) * 10) / 10]
}

/** The world map: land, a 30° graticule, and a marker per mirror with known coordinates. */
function renderMap(rows: readonly OverviewRow[]): string {
  const parts: string[] = [
    `<svg id="map" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${MAP_WIDTH} ${MAP_HEIGHT}" width="${MAP_WIDTH}" height="${MAP_HEIGHT}" role="img" aria-label="World map of the mirrors">`,
  ]
  parts.push(`<rect width="${MAP_WIDTH}" height="${MAP_HEIGHT}" fill="#dbe9f6"/>`)
  for (const ring of LAND) parts.push(`<polygon class="land" fill="#f4f1e8" stroke="#b9b29c" stroke-width="0.6" points="${ring.map(([lon, lat]) => project(lon, lat).join(',')).join(' ')}"/>`)
  const lines: string[] = []
  for (let lon = -150; lon <= 150; lon += 30) lines.push(`M${project(lon, 90)[0]},0V${MAP_HEIGHT}`)
  for (let lat = -60; lat <= 60; lat += 30) lines.push(`M0,${project(0, lat)[1]}H${MAP_WIDTH}`)
  parts.push(`<path class="graticule" d="${lines.join('')}" stroke="#9fb6cc" stroke-width="0.5" fill="none"/>`)
  for (const r of rows) {
    if (r.latitude === null || r.longitude === null) continue
    const [x, y] = project(r.longitude, r.latitude)
    parts.push(
      r.health === 'up' && r.lagging
        ? `<circle class="marker up lagging" cx="${x}" cy="${y}" r="6" fill="${LAGGING_COLOUR}" stroke="#ffffff" stroke-width="1.5"><title>${escapeHtml(r.name)}: up, ${shortDuration(r.sync_lag ?? 0)} behind the origin</title></circle>`
        : `<circle class="marker ${r.health}" cx="${x}" cy="${y}" r="6" fill="${HEALTH_COLOURS[r.health]}" stroke="#ffffff" stroke-width="1.5"><title>${escapeHtml(r.name)}: ${r.health}</title></circle>`,
    )
  }
  parts.push('</svg>')
  return parts.join('')
}

function percent(share: number | null): string {
  return share === null ? '-' : `${(Math.round(share * 1000) / 10).toFixed(1)}%`
}

function scheme(state: OverviewRow['http']): string {
  return state === null ? '<td class="na">-</td>' : `<td class="${state}">${state}</td>`
}

/** Whether a mirror honours Range: `yes`, `no` (it answers with the whole file: resumes are not sent there), or `-` while unknown. */
function rangeCell(range: boolean | null): string {
  if (range === null) return '<td class="na">-</td>'
  return range ? '<td class="up">yes</td>' : '<td class="down" title="answers a ranged request with the whole file: resumed downloads are not sent here">no</td>'
}

/** How far behind the origin a mirror's sync trace is: `in sync`, `3h12m`, or `-` while unknown (traces off, or not read). */
function syncCell(r: OverviewRow): string {
  if (r.sync_lag === null) return '<td class="na">-</td>'
  const text = r.sync_lag < 60 ? 'in sync' : shortDuration(r.sync_lag)
  return `<td class="${r.lagging ? 'lagging' : 'up'}">${text}</td>`
}

/** The CSS the overview and the mirror pages (./mirror-page.ts) share. */
export const PAGE_STYLE = `body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
#map{max-width:100%;height:auto;border:1px solid #9fb6cc}
table{border-collapse:collapse;margin-top:1em}
th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:left}
td.num{text-align:right}
td.up{color:${HEALTH_COLOURS.up}}td.down{color:${HEALTH_COLOURS.down}}td.lagging{color:#b35806}td.unprobed,td.na{color:#777}`

/** The header row of the overview table. */
export const OVERVIEW_HEADER =
  '<tr><th>Mirror</th><th>Country</th><th>Continent</th><th>Protocols</th><th>HTTP</th><th>HTTPS</th><th>Range</th><th>Behind</th><th>Last scan (UTC)</th><th>Share of the tree</th><th>Score</th></tr>'

/** One mirror's row of the overview table, its name linked to `href` when given. */
export function overviewRowHtml(r: OverviewRow, href?: string): string {
  const name = href === undefined ? escapeHtml(r.name) : `<a href="${escapeHtml(href)}">${escapeHtml(r.name)}</a>`
  return `<tr><td>${name}</td><td>${escapeHtml(r.country ?? '-')}</td><td>${escapeHtml(r.continent ?? '-')}</td><td>${protocolLinks(r)}</td>${scheme(r.http)}${scheme(r.https)}${rangeCell(r.range)}${syncCell(r)}<td>${escapeHtml(r.last_scan ?? 'never')}</td><td class="num">${percent(r.share)}</td><td class="num">${r.score}</td></tr>`
}

/** The overview as a self-contained HTML page (see the module doc). */
/** Today's origin share as one line: what the origin delivered itself and why (src/lib/stats/origin.ts). */
function renderOrigin(origin: OriginShareRow | null): string {
  if (origin === null) return ''
  const reasons = Object.entries(origin.byReason)
    .filter(([, bytes]) => bytes > 0)
    .map(([reason, bytes]) => `${escapeHtml(reason)} ${escapeHtml(humanBytes(bytes))}`)
  const why = reasons.length > 0 ? `: ${reasons.join(', ')}` : ''
  return `<p id="origin">The origin today (${origin.day}, UTC): ${escapeHtml(humanBytes(origin.originBytes))} of ${escapeHtml(humanBytes(origin.downloadBytes))} downloaded, ${(origin.share * 100).toFixed(1)}%${why}.</p>\n`
}

function renderOverviewHtml(overview: Overview): string {
  const title = overview.path ? `Mirrors of /${overview.path}` : 'Mirrors'
  const rows = overview.mirrors
  const up = rows.filter((r) => r.health === 'up').length
  const body = rows.map((r) => overviewRowHtml(r, `mirrors/${encodeURIComponent(r.name)}`))
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">
<title>${escapeHtml(title)}</title>
<style>
${PAGE_STYLE}
.legend span{display:inline-block;width:.8em;height:.8em;border-radius:50%;margin:0 .3em 0 1em;vertical-align:middle}
</style></head>
<body>
<h1>${escapeHtml(title)}</h1>
<p>${overview.total} mirror${overview.total === 1 ? '' : 's'}${overview.page === undefined ? `, ${up} up` : ''}.<span class="legend"><span style="background:${HEALTH_COLOURS.up}"></span>up<span style="background:${HEALTH_COLOURS.down}"></span>down<span style="background:${HEALTH_COLOURS.unprobed}"></span>not probed yet</span></p>
${renderOrigin(overview.origin)}${renderMap(rows)}
<table id="mirrors">
<thead>${OVERVIEW_HEADER}</thead>
<tbody>
${body.join('\n')}
</tbody></table>
${renderPager(overview)}<p>Share: files of ${overview.path ? `/${escapeHtml(overview.path)}` : 'the tree'} the mirror holds in their current version, of those it carries.</p>
</body></html>
`
}

/**
 * The subtree a `?path=` value names: '' for none or the root, else the path with one
 * trailing '/'.
 * @returns an error message (answer 400) for a value that can never name a directory of the tree
 */
export function parseSubtree(value: string | null | undefined): {subtree: string} | {error: string} {
  if (value === undefined) return {subtree: ''}
  if (value === null) return {error: '?path= is not percent-encoded UTF-8'}
  const problem = folderProblem(value)
  if (problem !== undefined) return {error: `?path= ${problem}`}
  const trimmed = trimSlashes(value)
  return {subtree: trimmed === '' ? '' : `${trimmed}/`}
}

/** Which rows of the overview a request asks for: all, or one page. */
export type Paging = {page: number; size: number} | undefined

/**
 * `?page=N` (1-based) and `?page_size=M` of `/mirrors`: neither gives every row; `page`
 * alone pages by `defaultSize` (the overview's {@link DEFAULT_PAGE_SIZE}; a mirror's page
 * passes its own), `page_size` alone gives page 1.
 * @returns an error message (answer 400) for a value that is not a whole number in range
 */
export function parsePaging(page: string | null | undefined, size: string | null | undefined, defaultSize = DEFAULT_PAGE_SIZE): {paging: Paging} | {error: string} {
  if (page === undefined && size === undefined) return {paging: undefined}
  const n = page === undefined ? 1 : /^[1-9]\d{0,5}$/.test(page ?? '') ? Number(page) : Number.NaN
  if (Number.isNaN(n)) return {error: '?page= must be a whole number from 1 to 999999'}
  const m = size === undefined ? defaultSize : /^[1-9]\d{0,3}$/.test(size ?? '') && Number(size) <= MAX_PAGE_SIZE ? Number(size) : Number.NaN
  if (Number.isNaN(m)) return {error: `?page_size= must be a whole number from 1 to ${MAX_PAGE_SIZE}`}
  return {paging: {page: n, size: m}}
}

/** The `GET /mirrors` route (see the module doc). */
export function networkRoute(services: RouteServices, view: NetworkView): Route<true> {
  const pages = new Map<string, {at: number; body: Promise<Buffer>}>()
  const page = (ctx: Parameters<Route<true>['handle']>[0], subtree: string, json: boolean, paging: Paging): Promise<Buffer> => {
    const key = `${json ? 'j' : 'h'}:${paging ? `${paging.page}/${paging.size}` : ''}:${subtree}`
    const cached = pages.get(key)
    if (cached && Date.now() - cached.at < PAGE_TTL_MS) return cached.body
    if (pages.size >= MAX_PAGES) pages.delete(pages.keys().next().value!)
    const body = buildOverview(view, ctx.snapshot, subtree).then((all) => {
      const o = paging ? overviewPage(all, paging.page, paging.size) : all
      return Buffer.from(json ? `${JSON.stringify(o, null, 2)}\n` : renderOverviewHtml(o))
    })
    pages.set(key, {at: Date.now(), body})
    body.catch(() => pages.delete(key))
    return body
  }
  return {
    name: 'mirrors',
    match: (ctx) => (ctx.path === 'mirrors' && !ctx.slash && ctx.file === undefined ? true : undefined),
    async handle(ctx) {
      const parsed = parseSubtree(ctx.query ? queryParam(ctx.query, 'path') : undefined)
      if ('error' in parsed) return services.plain(ctx, 400, 'bad_request', `Bad request: ${parsed.error}.`)
      const paged = ctx.query ? parsePaging(queryParam(ctx.query, 'page'), queryParam(ctx.query, 'page_size')) : {paging: undefined}
      if ('error' in paged) return services.plain(ctx, 400, 'bad_request', `Bad request: ${paged.error}.`)
      if (parsed.subtree !== '') {
        const target = await services.resolveOnDisk(parsed.subtree.slice(0, -1))
        if (target === undefined || !target.directory) return services.plain(ctx, 404, 'not_found', `Not found: /${parsed.subtree} is not a directory of the tree.`)
      }
      const json = acceptsJson(ctx.req.headers.accept)
      const body = await page(ctx, parsed.subtree, json, paged.paging)
      sendNetworkPage(services, ctx, body, json)
    },
  }
}
