/**
 * The curves benchmark's arithmetic (bench/growth.ts): log-log slopes, their classification
 * as linear / sub-linear / worse, and the SVG chart (parsed back as XML).
 */
import {expect} from 'chai'
import {XMLParser} from 'fast-xml-parser'
import {type Chart, classifyGrowth, logLogSlope, renderChartSvg, segmentSlopes} from '../../bench/growth.js'
import {median, verdict} from '../../bench/lib.js'

const close = (a: number, b: number) => expect(Math.abs(a - b), `${a} vs ${b}`).to.be.below(1e-9)

describe('bench growth: slopes and their verdict', () => {
  it('gives slope 1 for a cost proportional to the work, 2 for a square, 0 for a constant', () => {
    close(logLogSlope([1, 10, 100].map((x) => ({x, y: 3 * x}))), 1)
    close(logLogSlope([1e5, 1e6, 5e6].map((x) => ({x, y: x * x}))), 2)
    close(logLogSlope([10, 40, 200].map((x) => ({x, y: 7}))), 0)
    close(logLogSlope([1, 4].map((x) => ({x, y: Math.sqrt(x)}))), 0.5)
  })

  it('fits the least-squares slope over every point and lists the slope of each segment in x order', () => {
    // (1,1) (10,10) (100,1000): segments 1 and 2; least squares through log points (0,0) (1,1) (2,3) is 1.5.
    const points = [
      {x: 100, y: 1000},
      {x: 1, y: 1},
      {x: 10, y: 10},
    ]
    const segments = segmentSlopes(points)
    expect(segments).to.have.length(2)
    close(segments[0], 1)
    close(segments[1], 2)
    close(logLogSlope(points), 1.5)
  })

  it('skips points without a logarithm and has no slope below two distinct x', () => {
    close(
      logLogSlope([
        {x: 0, y: 5},
        {x: 2, y: 0},
        {x: 10, y: 10},
        {x: 100, y: 100},
      ]),
      1,
    )
    expect(logLogSlope([{x: 10, y: 1}])).to.be.NaN
    expect(
      logLogSlope([
        {x: 10, y: 1},
        {x: 10, y: 2},
      ]),
    ).to.be.NaN
    expect(
      segmentSlopes([
        {x: 10, y: 1},
        {x: 10, y: 2},
      ]),
    ).to.deep.equal([])
  })

  it('classifies below 0.9 as sub-linear, 0.9 to 1.1 as linear, above 1.1 as worse', () => {
    expect(classifyGrowth(-0.3)).to.equal('sub-linear')
    expect(classifyGrowth(0)).to.equal('sub-linear')
    expect(classifyGrowth(0.89)).to.equal('sub-linear')
    expect(classifyGrowth(0.9)).to.equal('linear')
    expect(classifyGrowth(1)).to.equal('linear')
    expect(classifyGrowth(1.1)).to.equal('linear')
    expect(classifyGrowth(1.11)).to.equal('worse than linear')
    expect(classifyGrowth(2)).to.equal('worse than linear')
    expect(() => classifyGrowth(Number.NaN)).to.throw(RangeError)
  })

  it('takes the median of odd and even counts', () => {
    expect(median([5, 1, 3])).to.equal(3)
    expect(median([4, 1, 3, 2])).to.equal(2.5)
    expect(median([])).to.be.NaN
  })
})

describe('bench growth: SVG chart', () => {
  const chart: Chart = {
    title: 'Redirect <CPU> & "mirrors"',
    xLabel: 'mirrors holding the file',
    yLabel: 'CPU (µs)',
    points: [
      {x: 200, y: 60, xText: '200', yText: '60.0'},
      {x: 10, y: 30, xText: '10', yText: '30.0'},
      {x: 40, y: 35, xText: '40', yText: '35.0'},
      {x: 100, y: 45, xText: '100', yText: '45.0'},
    ],
  }
  const parse = (svg: string) => new XMLParser({ignoreAttributes: false, attributeNamePrefix: '', parseTagValue: false}).parse(svg)

  it('is well-formed XML with one circle per point, x increasing on a log scale, y growing upwards', () => {
    const svg = renderChartSvg(chart)
    const doc = parse(svg).svg
    expect(doc.xmlns).to.equal('http://www.w3.org/2000/svg')
    expect(doc.viewBox).to.equal('0 0 640 360')
    expect(doc.title).to.equal('Redirect <CPU> & "mirrors"')
    const circles = doc.circle as Array<{cx: string; cy: string}>
    expect(circles).to.have.length(4)
    const cx = circles.map((c) => Number(c.cx))
    const cy = circles.map((c) => Number(c.cy))
    // sorted by x: 10, 40, 100, 200; log scale: 10→40 is as wide as 50→200 would be, wider than 100→200
    expect(cx[0]).to.be.below(cx[1])
    expect(cx[1]).to.be.below(cx[2])
    expect(cx[2]).to.be.below(cx[3])
    close(Math.round(((cx[1] - cx[0]) / (cx[3] - cx[2])) * 1000) / 1000, Math.round((Math.log(4) / Math.log(2)) * 1000) / 1000)
    // SVG y grows downwards: the largest cost is highest
    expect(cy[3]).to.be.below(cy[2])
    expect(cy[0]).to.be.above(cy[1])
    const points = (doc.polyline.points as string).split(' ')
    expect(points).to.have.length(4)
  })

  it('labels the axes, every x and every point, and escapes markup in the texts', () => {
    const svg = renderChartSvg(chart)
    expect(svg).to.include('Redirect &lt;CPU&gt; &amp; &quot;mirrors&quot;')
    const texts = (parse(svg).svg.text as Array<string | {'#text': string}>).map((t) => (typeof t === 'string' ? t : String(t['#text'])))
    expect(texts).to.include('Redirect <CPU> & "mirrors"')
    expect(texts).to.include('mirrors holding the file (log scale)')
    expect(texts).to.include('CPU (µs)')
    for (const p of chart.points) {
      expect(texts).to.include(p.xText)
      expect(texts).to.include(p.yText)
    }
    // y ticks: 60 x 1.1 = 66 over about five ticks is 13.2, rounded up to a step of 20, so 0..80
    const ticks = (parse(svg).svg.text as unknown[]).filter((t): t is {'text-anchor': string; '#text': string} => typeof t === 'object' && (t as {'text-anchor'?: string})['text-anchor'] === 'end')
    expect(ticks.map((t) => t['#text'])).to.deep.equal(['0', '20', '40', '60', '80'])
  })

  it('refuses an empty chart and points that a log axis cannot place', () => {
    expect(() => renderChartSvg({...chart, points: []})).to.throw(RangeError)
    expect(() => renderChartSvg({...chart, points: [{x: 0, y: 1, xText: '0', yText: '1'}]})).to.throw(RangeError)
  })
})

describe('bench lib: verdict lines', () => {
  it('passes a lower-is-better value at or under the target and fails one over it or not measured', () => {
    const log = console.log
    const printed: string[] = []
    console.log = (line: string) => printed.push(line)
    try {
      expect(verdict('snapshot load', 42.14, 60, 's', 'lower')).to.deep.equal({
        line: `  ${'snapshot load'.padEnd(44)} ${'target <= 60.0 s'.padEnd(32)} ${'measured 42.1 s'.padEnd(30)} PASS`,
        pass: true,
      })
      expect(verdict('snapshot load', 60, 60, 's', 'lower').pass).to.equal(true)
      expect(verdict('snapshot load', 61, 60, 's', 'lower').pass).to.equal(false)
      expect(verdict('meta4 rate', 2999, 3000, '/s', 'higher').line).to.match(/target >= 3000 \/s +measured 2999 \/s +FAIL$/)
      expect(verdict('meta4 rate', 3000, 3000, '', 'higher').line).to.match(/target >= 3000 +measured 3000 +PASS$/)
      expect(verdict('RSS', Number.NaN, 400, 'MB', 'lower').pass).to.equal(false)
    } finally {
      console.log = log
    }
    expect(printed).to.have.length(6)
  })
})
