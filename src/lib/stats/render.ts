/**
 * Presenting statistics: CSV (RFC 4180, through `csv-stringify`), a terminal bar chart for a
 * series, byte counts in human units, and the self-contained HTML report (inline CSS and an
 * inline SVG chart drawn here; no script, no network).
 */
import {stringify} from 'csv-stringify/sync'
import type {StatsResult, StatsRow} from './query.js'
import {isoDay, isoSeconds} from '../time.js'

/** Bytes in binary units, e.g. 1536 -> '1.5 KiB'. */
export function humanBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit += 1
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(value >= 100 ? 0 : 1)} ${units[unit]}`
}

/**
 * CSV for spreadsheets (RFC 4180, header line, CRLF-free `\n` records): one line per row,
 * then the `(other)` remainder when `--limit` cut groups. Columns: the grouping, downloads,
 * bytes, other_requests.
 */
export function statsCsv(result: StatsResult): string {
  const rows = result.other ? [...result.rows, result.other] : result.rows
  return stringify(
    rows.map((r) => [r.key, r.downloads, r.bytes, r.other_requests]),
    {header: true, columns: [result.by, 'downloads', 'bytes', 'other_requests']},
  )
}

const DAY_KEY = /^\d{4}-\d{2}-\d{2}$/

/**
 * A day series with the missing days (no downloads) filled in as zero rows, so charts show
 * gaps as gaps. Rows whose key is not a day (monthly rollups, 'YYYY-MM') stay where they are.
 */
export function fillDays(rows: StatsRow[]): StatsRow[] {
  const out: StatsRow[] = []
  let prev: number | undefined
  for (const row of rows) {
    if (DAY_KEY.test(row.key)) {
      const ms = Date.parse(`${row.key}T00:00:00Z`)
      if (prev !== undefined) for (let d = prev + 86_400_000; d < ms && out.length < 100_000; d += 86_400_000) out.push({key: isoDay(d), downloads: 0, bytes: 0, other_requests: 0})
      prev = ms
    }
    out.push(row)
  }
  return out
}

const EIGHTHS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉']

/**
 * A horizontal bar chart of downloads per row for a terminal, one line per row:
 * `2026-11-28 ████▌ 123`. Bars are scaled to `width` cells at the largest value, in
 * eighth-cell steps (Unicode block elements).
 */
export function barChart(rows: StatsRow[], width = 40): string {
  const max = Math.max(0, ...rows.map((r) => r.downloads))
  const keyWidth = Math.max(0, ...rows.map((r) => r.key.length))
  return rows
    .map((r) => {
      const eighths = max === 0 ? 0 : Math.round((r.downloads / max) * width * 8)
      const bar = '█'.repeat(Math.floor(eighths / 8)) + EIGHTHS[eighths % 8]
      return `${r.key.padEnd(keyWidth)} ${bar.padEnd(width)} ${r.downloads}`
    })
    .join('\n')
}

/** A one-line sparkline of downloads, e.g. '▁▂▅▇█▃'. */
export function sparkline(values: number[]): string {
  const ticks = '▁▂▃▄▅▆▇█'
  const max = Math.max(0, ...values)
  return values.map((v) => (max === 0 ? ticks[0] : ticks[Math.min(7, Math.floor((v / max) * 7.999))])).join('')
}

function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'})[c]!)
}

/** What the HTML report shows; each part is a {@link StatsResult} over the same filter. */
export interface ReportData {
  title: string
  generatedAt: Date
  filter: {since: string | null; until: string | null; path?: string; mirror?: string}
  files: StatsResult
  mirrors: StatsResult
  countries: StatsResult
  days: StatsResult
}

function table(result: StatsResult, label: string): string {
  const total = result.total.downloads
  const pct = (n: number) => (total === 0 ? '0.0' : ((100 * n) / total).toFixed(1))
  const rows = result.other ? [...result.rows, result.other] : result.rows
  const body = rows
    .map(
      (r) =>
        `<tr><td>${esc(r.key)}</td><td class="n">${r.downloads}</td><td class="n">${pct(r.downloads)}%<span class="bar" style="width:${pct(r.downloads)}%"></span></td><td class="n">${esc(humanBytes(r.bytes))}</td><td class="n">${r.other_requests}</td></tr>`,
    )
    .join('\n')
  return `<table><thead><tr><th>${esc(label)}</th><th>downloads</th><th>share</th><th>bytes</th><th>other requests</th></tr></thead>
<tbody>
${body || '<tr><td colspan="5">no data</td></tr>'}
</tbody>
<tfoot><tr><td>total</td><td class="n">${result.total.downloads}</td><td class="n">100%</td><td class="n">${esc(humanBytes(result.total.bytes))}</td><td class="n">${result.total.other_requests}</td></tr></tfoot></table>`
}

/**
 * An SVG column chart of downloads per day (id `downloads-chart`), with a y axis and
 * a few date labels. Self-contained; sizes in CSS pixels.
 */
export function svgDayChart(rows: StatsRow[], width = 900, height = 260): string {
  const left = 56
  const bottom = 28
  const top = 12
  const plotW = width - left - 12
  const plotH = height - top - bottom
  const max = Math.max(1, ...rows.map((r) => r.downloads))
  const step = rows.length > 0 ? plotW / rows.length : plotW
  const barW = Math.max(1, step * 0.8)
  const bars = rows
    .map((r, i) => {
      const h = (r.downloads / max) * plotH
      const x = left + i * step + (step - barW) / 2
      return `<rect class="col" x="${x.toFixed(1)}" y="${(top + plotH - h).toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}"><title>${esc(r.key)}: ${r.downloads} downloads</title></rect>`
    })
    .join('')
  const labelEvery = Math.max(1, Math.ceil(rows.length / 8))
  const labels = rows.map((r, i) => (i % labelEvery === 0 ? `<text x="${(left + i * step + step / 2).toFixed(1)}" y="${height - 8}" text-anchor="middle">${esc(r.key)}</text>` : '')).join('')
  const ticks = [0, 0.5, 1]
    .map((f) => {
      const y = top + plotH - f * plotH
      return `<line x1="${left}" x2="${width - 12}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" class="grid"/><text x="${left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end">${Math.round(f * max)}</text>`
    })
    .join('')
  return `<svg id="downloads-chart" xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="Downloads per day">${ticks}${bars}${labels}</svg>`
}

/**
 * The self-contained HTML report (UTF-8, inline CSS and SVG, no script, no external
 * resource): totals, downloads per day (chart), top files, each mirror's share, countries.
 */
export function htmlReport(data: ReportData): string {
  const f = data.filter
  const range = `${f.since ?? 'the beginning'} – ${f.until ?? 'today'} (UTC)`
  const scope = [f.path ? `path ${esc(f.path)}*` : '', f.mirror ? `mirror ${esc(f.mirror)}` : ''].filter(Boolean).join(', ')
  const t = data.days.total
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(data.title)}</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:960px;color:#222;background:#fff;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
.meta{color:#666}.totals{display:flex;gap:2em;margin:1em 0}.totals div{background:#f4f6f8;padding:.6em 1em;border-radius:6px}
.totals b{display:block;font-size:1.4em}
table{border-collapse:collapse;width:100%}th,td{padding:.25em .5em;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
td.n,th:not(:first-child){text-align:right}td:first-child{word-break:break-all}tfoot td{font-weight:bold;border-top:2px solid #ccc}
.bar{display:block;height:4px;background:#3b82f6;margin-left:auto;min-width:1px}
svg text{font-size:11px;fill:#555}svg .col{fill:#3b82f6}svg .grid{stroke:#ddd;stroke-width:1}
</style>
</head>
<body>
<h1>${esc(data.title)}</h1>
<p class="meta">${esc(range)}${scope ? ` · ${scope}` : ''} · generated ${esc(isoSeconds(data.generatedAt))}</p>
<div class="totals"><div><b>${t.downloads}</b>downloads</div><div><b>${esc(humanBytes(t.bytes))}</b>delivered</div><div><b>${t.other_requests}</b>other requests</div></div>
<h2>Downloads per day</h2>
${svgDayChart(fillDays(data.days.rows))}
<h2>Top files</h2>
${table(data.files, 'file')}
<h2>Mirrors</h2>
${table(data.mirrors, 'mirror')}
<h2>Countries</h2>
${table(data.countries, 'country')}
</body>
</html>
`
}
