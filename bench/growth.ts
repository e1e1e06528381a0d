/**
 * How a measured cost grows with its work, for `npm run bench -- curves`: log-log slopes,
 * their classification (linear, sub-linear, worse than linear) and a small SVG line chart
 * (log-scaled x axis, linear y axis from 0, labelled axes and points) that GitHub renders.
 */

/** One measured point: `x` the work (files, mirrors, bytes), `y` the cost; both > 0 to have a slope. */
export interface Point {
  x: number
  y: number
}

/** How a cost grows with its work. */
export type Growth = 'sub-linear' | 'linear' | 'worse than linear'

/**
 * Slopes of log(y) against log(x) between consecutive points (sorted by x): 1 where the cost
 * doubles when the work doubles, 0 where it stays flat, 2 where it quadruples. Points with
 * a non-positive x or y are skipped (no logarithm).
 */
export function segmentSlopes(points: Point[]): number[] {
  const usable = points.filter((p) => p.x > 0 && p.y > 0).sort((a, b) => a.x - b.x)
  const slopes: number[] = []
  for (let i = 1; i < usable.length; i++) {
    const a = usable[i - 1]
    const b = usable[i]
    if (b.x !== a.x) slopes.push(Math.log(b.y / a.y) / Math.log(b.x / a.x))
  }
  return slopes
}

/**
 * Least-squares slope of log(y) against log(x) over every usable point (x, y > 0): the
 * exponent k of y ~ x^k. NaN with fewer than two distinct x.
 */
export function logLogSlope(points: Point[]): number {
  const usable = points.filter((p) => p.x > 0 && p.y > 0)
  const lx = usable.map((p) => Math.log(p.x))
  const ly = usable.map((p) => Math.log(p.y))
  const n = usable.length
  const mx = lx.reduce((a, b) => a + b, 0) / n
  const my = ly.reduce((a, b) => a + b, 0) / n
  let sxx = 0
  let sxy = 0
  for (let i = 0; i < n; i++) {
    sxx += (lx[i] - mx) ** 2
    sxy += (lx[i] - mx) * (ly[i] - my)
  }
  return sxx > 0 ? sxy / sxx : Number.NaN
}

/**
 * The growth a log-log slope stands for: above 1.1 worse than linear, from 0.9 to 1.1
 * linear, below 0.9 sub-linear (a flat or falling cost included). NaN (no slope) throws.
 */
export function classifyGrowth(slope: number): Growth {
  if (Number.isNaN(slope)) throw new RangeError('no slope: a curve needs two points with distinct x and positive values')
  if (slope > 1.1) return 'worse than linear'
  if (slope >= 0.9) return 'linear'
  return 'sub-linear'
}

/** A line chart: the points of one curve, its axis titles, and the labels printed under each x and beside each point. */
export interface Chart {
  title: string
  xLabel: string
  yLabel: string
  points: Array<Point & {xText: string; yText: string}>
}

const WIDTH = 640
const HEIGHT = 360
const LEFT = 80
const RIGHT = 24
const TOP = 44
const BOTTOM = 56

/** Escapes text for an XML text node or a double-quoted attribute. */
function xml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
}

/** A round step for about five y ticks up to `max` (1, 2 or 5 times a power of ten). */
function tickStep(max: number): number {
  const raw = max / 5
  const power = 10 ** Math.floor(Math.log10(raw))
  const m = raw / power
  return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * power
}

/** A tick value without float noise (0.30000000000000004 → 0.3). */
function tickText(v: number): string {
  return String(Number(v.toPrecision(6)))
}

/**
 * Renders `chart` as a standalone SVG document (640 x 360, titled, no scripts, no external
 * references): x on a log scale with a tick and label at every point, y linear from 0 with
 * round ticks, one polyline through the points (sorted by x), one `<circle>` per point and
 * its `yText` beside it. Points need x > 0 (log scale); an empty chart throws.
 */
export function renderChartSvg(chart: Chart): string {
  const points = [...chart.points].sort((a, b) => a.x - b.x)
  if (points.length === 0) throw new RangeError(`chart "${chart.title}" has no points`)
  if (points.some((p) => !(p.x > 0) || !Number.isFinite(p.y))) throw new RangeError(`chart "${chart.title}": x must be > 0 and y finite`)
  const lo = Math.log10(points[0].x)
  const hi = Math.log10(points.at(-1)!.x)
  const pad = hi > lo ? (hi - lo) * 0.08 : 0.5
  const x0 = lo - pad
  const x1 = hi + pad
  const plotW = WIDTH - LEFT - RIGHT
  const plotH = HEIGHT - TOP - BOTTOM
  const yMaxData = Math.max(...points.map((p) => p.y), 0)
  const step = tickStep(yMaxData > 0 ? yMaxData * 1.1 : 1)
  const yMax = Math.ceil((yMaxData > 0 ? yMaxData * 1.1 : 1) / step) * step
  const px = (x: number) => LEFT + ((Math.log10(x) - x0) / (x1 - x0)) * plotW
  const py = (y: number) => TOP + plotH - (Math.max(0, y) / yMax) * plotH
  const f = (n: number) => n.toFixed(1)
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" role="img" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" font-family="sans-serif" font-size="12">`,
    `<title>${xml(chart.title)}</title>`,
    `<rect x="0" y="0" width="${WIDTH}" height="${HEIGHT}" fill="#ffffff"/>`,
    `<text x="${WIDTH / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${xml(chart.title)}</text>`,
  ]
  for (let v = 0; v <= yMax + step / 1e6; v += step) {
    const y = f(py(v))
    out.push(
      `<line x1="${LEFT}" y1="${y}" x2="${WIDTH - RIGHT}" y2="${y}" stroke="#e0e0e0"/>`,
      `<text x="${LEFT - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${xml(tickText(v))}</text>`,
    )
  }
  for (const p of points) {
    const x = f(px(p.x))
    out.push(`<line x1="${x}" y1="${TOP + plotH}" x2="${x}" y2="${TOP + plotH + 5}" stroke="#333333"/>`, `<text x="${x}" y="${TOP + plotH + 18}" text-anchor="middle">${xml(p.xText)}</text>`)
  }
  out.push(
    `<line x1="${LEFT}" y1="${TOP + plotH}" x2="${WIDTH - RIGHT}" y2="${TOP + plotH}" stroke="#333333"/>`,
    `<line x1="${LEFT}" y1="${TOP}" x2="${LEFT}" y2="${TOP + plotH}" stroke="#333333"/>`,
    `<text x="${LEFT + plotW / 2}" y="${HEIGHT - 12}" text-anchor="middle">${xml(chart.xLabel)} (log scale)</text>`,
    `<text x="18" y="${TOP + plotH / 2}" text-anchor="middle" transform="rotate(-90 18 ${TOP + plotH / 2})">${xml(chart.yLabel)}</text>`,
    `<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="${points.map((p) => `${f(px(p.x))},${f(py(p.y))}`).join(' ')}"/>`,
  )
  for (const p of points) {
    const x = f(px(p.x))
    const y = f(py(p.y))
    out.push(`<circle cx="${x}" cy="${y}" r="4" fill="#1f77b4"/>`, `<text x="${x}" y="${f(py(p.y) - 10)}" text-anchor="middle">${xml(p.yText)}</text>`)
  }
  out.push('</svg>', '')
  return out.join('\n')
}
