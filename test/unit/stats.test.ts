/**
 * Pure parts of the statistics: what counts as a download, the order of a flush's rows and of
 * counts put back after a failed flush, day parsing for --since/--until, CSV, terminal bars
 * and the HTML report's escaping.
 */
import {expect} from 'chai'
import {classifyRequest} from '../../src/lib/stats/count.js'
import {inPathOrder, PendingCounts} from '../../src/lib/stats/pending.js'
import {parseDay} from '../../src/lib/stats/query.js'
import {takeDue} from '../../src/lib/stats/schedule.js'
import {barChart, fillDays, htmlReport, humanBytes, sparkline, statsCsv, svgDayChart} from '../../src/lib/stats/render.js'
import type {StatsResult} from '../../src/lib/stats/query.js'
import type {RequestOutcome} from '../../src/lib/serve/delivery/outcome.js'

const req = (over: Partial<RequestOutcome>): RequestOutcome => ({
  time: 0,
  method: 'GET',
  target: '/a',
  path: 'a',
  httpVersion: '1.1',
  status: 200,
  outcome: 'local',
  clientIp: '::1',
  bytesSent: 0,
  durationSeconds: 0,
  ...over,
})

describe('stats: counting rules', () => {
  it('a download is a GET answered by a redirect or local delivery, not a continuation', () => {
    expect(classifyRequest(req({}))).to.equal('download')
    expect(classifyRequest(req({outcome: 'redirect', status: 302}))).to.equal('download')
    expect(classifyRequest(req({rangeStart: 0, status: 206}))).to.equal('download')
    expect(classifyRequest(req({rangeStart: 1, status: 206}))).to.equal('other')
    expect(classifyRequest(req({method: 'HEAD'}))).to.equal('other')
    for (const outcome of ['meta4', 'metalink', 'hash', 'mirrorlist', 'not_modified'] as const) expect(classifyRequest(req({outcome})), outcome).to.equal('other')
    for (const outcome of ['not_found', 'bad_request', 'error', 'directory', 'other'] as const) expect(classifyRequest(req({outcome})), outcome).to.equal(undefined)
    expect(classifyRequest(req({path: undefined}))).to.equal(undefined)
  })
})

describe('stats: flush order', () => {
  /** Pending counts of paths c (first counted at 1 ms), a (2 ms) and b (3 ms), two keys each. */
  function pending(): PendingCounts {
    const p = new PendingCounts()
    for (const [path, since] of [
      ['c', 1],
      ['a', 2],
      ['b', 3],
    ] as const) {
      p.add('2026-11-20', path, 2, 'FR', since, {downloads: since, bytes: 0, otherRequests: 0})
      p.add('2026-11-20', path, 1, 'DE', since, {downloads: 10 * since, bytes: 0, otherRequests: 0})
    }
    return p
  }
  const keys = (entries: Array<{path: string; mirrorId: number; downloads: number}>) => entries.map((e) => `${e.path}${e.mirrorId}:${e.downloads}`)

  it('a flush writes path by path in path order, each path in the order its keys were counted', () => {
    expect(keys(inPathOrder(pending().takeAll().groups))).to.deep.equal(['a2:2', 'a1:20', 'b2:3', 'b1:30', 'c2:1', 'c1:10'])
  })

  it('counts put back after a failed flush go back oldest first, whatever order they were written in', () => {
    const p = pending()
    const taken = p.takeAll()
    p.add('2026-11-20', 'd', 1, 'DE', 4, {downloads: 100, bytes: 0, otherRequests: 0}) // arrived during the flush
    // Written in path order, the flush failed after path a: b and c go back.
    p.putBack(inPathOrder(taken.groups).slice(2), taken.groups)
    expect([...p.groups()].map(([path, g]) => [path, g.since])).to.deep.equal([
      ['c', 1],
      ['b', 3],
      ['d', 4],
    ])
    expect(p.keys).to.equal(5)
    // By age, c (counted at 1 ms) is due at 2 ms, although b, written before it, is not.
    expect(keys(takeDue(p, 2, 0).entries)).to.deep.equal(['c2:1', 'c1:10'])
  })
})

describe('stats: pending counts', () => {
  const one = (downloads: number, bytes: number, otherRequests = 0) => ({downloads, bytes, otherRequests})

  it('sums each (day, path, mirror, country) key apart and gives the keys back as rows', () => {
    const p = new PendingCounts()
    p.add('2026-11-30', 'a.iso', 3, 'DE', 10, one(1, 5_000_000_000))
    p.add('2026-11-30', 'a.iso', 3, 'DE', 11, one(1, 5_000_000_000))
    p.add('2026-11-30', 'a.iso', 3, 'FR', 12, one(1, 7))
    p.add('2026-11-30', 'a.iso', 4, 'DE', 13, one(0, 0, 1))
    p.add('2026-12-01', 'a.iso', 3, 'DE', 14, one(1, 1))
    p.add('2026-12-01', 'b.iso', 0, '--', 15, one(1, 2))
    expect(p.keys).to.equal(5)
    expect(p.totals()).to.deep.equal({downloads: 5, bytes: 10_000_000_010, otherRequests: 1})
    const taken = p.takeAll()
    expect(p.keys).to.equal(0)
    expect(taken.groups.get('a.iso')?.since).to.equal(10)
    expect(taken.entries).to.deep.equal([
      {day: '2026-11-30', path: 'a.iso', mirrorId: 3, country: 'DE', downloads: 2, bytes: 10_000_000_000, otherRequests: 0},
      {day: '2026-11-30', path: 'a.iso', mirrorId: 3, country: 'FR', downloads: 1, bytes: 7, otherRequests: 0},
      {day: '2026-11-30', path: 'a.iso', mirrorId: 4, country: 'DE', downloads: 0, bytes: 0, otherRequests: 1},
      {day: '2026-12-01', path: 'a.iso', mirrorId: 3, country: 'DE', downloads: 1, bytes: 1, otherRequests: 0},
      {day: '2026-12-01', path: 'b.iso', mirrorId: 0, country: '--', downloads: 1, bytes: 2, otherRequests: 0},
    ])
  })

  it('merges rows counted elsewhere into the keys pending, and drops whole paths oldest first', () => {
    const p = new PendingCounts()
    p.add('2026-12-01', 'a.iso', 1, 'US', 5, one(2, 20))
    p.merge([
      {since: 1, phase: -1, entries: [{day: '2026-12-01', path: 'a.iso', mirrorId: 1, country: 'US', downloads: 3, bytes: 30, otherRequests: 0}]},
      {since: 2, phase: -1, entries: [{day: '2026-12-01', path: 'b.iso', mirrorId: 2, country: 'JP', downloads: 1, bytes: 10, otherRequests: 4}]},
    ])
    expect(p.keys).to.equal(2)
    // A country that is not two capital letters (a malformed message) counts as unknown.
    const odd = new PendingCounts()
    odd.merge([{since: 1, phase: -1, entries: ['', 'x', 'de', 'DEU'].map((country) => ({day: '2026-12-01', path: 'c.iso', mirrorId: 1, country, downloads: 1, bytes: 0, otherRequests: 0}))}])
    expect(odd.takeAll().entries.map((e) => [e.country, e.downloads])).to.deep.equal([
      ['--', 3],
      ['DE', 1],
    ])
    expect([...p.groups()].map(([path, g]) => [path, g.since])).to.deep.equal([
      ['a.iso', 5],
      ['b.iso', 2],
    ])
    expect(p.dropOldest(1)).to.deep.equal({keys: 1, downloads: 5, bytes: 50, otherRequests: 0})
    expect(p.takeAll().entries).to.deep.equal([{day: '2026-12-01', path: 'b.iso', mirrorId: 2, country: 'JP', downloads: 1, bytes: 10, otherRequests: 4}])
  })
})

describe('stats: --since/--until', () => {
  const now = new Date(Date.UTC(2026, 2, 31, 23, 30))
  it('accepts dates and spans back from today (UTC)', () => {
    expect(parseDay('2026-02-28', '--since', now)).to.equal('2026-02-28')
    expect(parseDay('today', '--since', now)).to.equal('2026-03-31')
    expect(parseDay('0d', '--until', now)).to.equal('2026-03-31')
    expect(parseDay('yesterday', '--since', now)).to.equal('2026-03-30')
    expect(parseDay('7d', '--since', now)).to.equal('2026-03-24')
    expect(parseDay('2w', '--since', now)).to.equal('2026-03-17')
    expect(parseDay('1m', '--since', now)).to.equal('2026-03-03') // 31 Feb rolls over, as Date.UTC does
    expect(parseDay('1y', '--since', now)).to.equal('2025-03-31')
  })
  it('refuses anything else with a usage error', () => {
    for (const bad of ['2026-02-29', '2026-13-01', '26-01-01', '7', 'd7', '-7d', 'last week', '']) {
      expect(() => parseDay(bad, '--since', now), bad)
        .to.throw(/--since .* is not a date/)
        .with.property('exitCode', 2)
    }
  })
})

describe('stats: output', () => {
  const result: StatsResult = {
    by: 'file',
    since: null,
    until: null,
    rows: [
      {key: 'a,b "c".iso', downloads: 5, bytes: 2048, other_requests: 1},
      {key: '<script>x</script>', downloads: 3, bytes: 10, other_requests: 0},
    ],
    other: {key: '(other)', downloads: 2, bytes: 1, other_requests: 0, groups: 3},
    total: {downloads: 10, bytes: 2059, other_requests: 1},
    groups: 5,
  }
  it('CSV quotes per RFC 4180 and includes the remainder', () => {
    expect(statsCsv(result)).to.equal('file,downloads,bytes,other_requests\n"a,b ""c"".iso",5,2048,1\n<script>x</script>,3,10,0\n(other),2,1,0\n')
  })
  it('bars scale to the largest value; sparkline and bytes read well', () => {
    const bars = barChart(
      [
        {key: '2026-01-01', downloads: 8, bytes: 0, other_requests: 0},
        {key: '2026-01-02', downloads: 4, bytes: 0, other_requests: 0},
        {key: '2026-01-03', downloads: 0, bytes: 0, other_requests: 0},
      ],
      4,
    ).split('\n')
    expect(bars).to.deep.equal(['2026-01-01 ████ 8', '2026-01-02 ██   4', '2026-01-03      0'])
    expect(sparkline([0, 1, 2, 4, 8])).to.equal('▁▁▂▄█')
    expect(humanBytes(512)).to.equal('512 B')
    expect(humanBytes(1536)).to.equal('1.5 KiB')
    expect(humanBytes(5 * 1024 ** 3)).to.equal('5.0 GiB')
  })
  it('fills missing days with zeros for the charts', () => {
    const row = (key: string, downloads: number) => ({key, downloads, bytes: 0, other_requests: 0})
    expect(fillDays([row('2026-02', 9), row('2026-02-27', 1), row('2026-03-02', 2)]).map((r) => [r.key, r.downloads])).to.deep.equal([
      ['2026-02', 9],
      ['2026-02-27', 1],
      ['2026-02-28', 0],
      ['2026-03-01', 0],
      ['2026-03-02', 2],
    ])
  })
  it('the HTML report escapes names and draws one column per day', () => {
    const days: StatsResult = {
      ...result,
      by: 'day',
      other: undefined,
      rows: [
        {key: '2026-01-01', downloads: 1, bytes: 0, other_requests: 0},
        {key: '2026-01-02', downloads: 2, bytes: 0, other_requests: 0},
      ],
    }
    const html = htmlReport({title: 'T', generatedAt: new Date(0), filter: {since: null, until: null}, files: result, mirrors: result, countries: result, days})
    expect(html).to.not.contain('<script>')
    expect(html).to.contain('&lt;script&gt;')
    expect(html).to.not.match(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/) // no external resource
    expect(svgDayChart(days.rows).match(/<rect /g)).to.have.length(2)
  })
})
