// @store-independent: the HTML report in Chromium
/**
 * `mb stats --html FILE`: the self-contained report opens in headless Chromium (Debian's
 * `chromium` package) without console errors or network access, and the downloads-per-day
 * chart is drawn: the screenshot is a non-blank PNG with the chart's bar colour in it.
 */
import {spawnSync} from 'node:child_process'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {expect} from 'chai'
import {PNG} from 'pngjs'
import {StatsCollector} from '../../src/lib/stats/collector.js'
import type {RequestOutcome} from '../../src/lib/serve/delivery/outcome.js'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

const DAY = 86_400_000

/** Opens `file` in headless Chromium; returns the screenshot and the console lines. */
function screenshot(dir: string, file: string): {png: PNG; console: string[]; stderr: string} {
  const shot = join(dir, `shot-${Date.now()}.png`)
  const res = spawnSync(
    'chromium',
    [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      `--user-data-dir=${join(dir, 'chromium-profile')}`,
      '--enable-logging=stderr',
      '--v=0',
      `--screenshot=${shot}`,
      '--window-size=1200,900',
      pathToFileURL(file).href,
    ],
    {encoding: 'utf8', timeout: 120_000},
  )
  const stderr = `${res.stdout}\n${res.stderr}`
  expect(res.status, stderr).to.equal(0)
  const console = stderr.split('\n').filter((l) => /:CONSOLE[:(]/.test(l))
  return {png: PNG.sync.read(readFileSync(shot)), console, stderr}
}

/** Pixels within 12 of the chart's bar colour #3b82f6. */
function barPixels(png: PNG): number {
  let n = 0
  for (let i = 0; i < png.data.length; i += 4) {
    if (Math.abs(png.data[i] - 0x3b) < 12 && Math.abs(png.data[i + 1] - 0x82) < 12 && Math.abs(png.data[i + 2] - 0xf6) < 12) n += 1
  }
  return n
}

function distinctColours(png: PNG): number {
  const seen = new Set<number>()
  for (let i = 0; i < png.data.length; i += 4) seen.add((png.data[i] << 16) | (png.data[i + 1] << 8) | png.data[i + 2])
  return seen.size
}

describe(`mb stats --html in headless Chromium (${backend})`, function () {
  let t: TestDatabase
  let dir: string

  before(function () {
    requireBinary(this, 'chromium', 'chromium')
  })

  beforeEach(async () => {
    t = await createTestDatabase()
    dir = mkdtempSync(join(tmpdir(), 'mb-stats-html-'))
  })

  afterEach(async () => {
    await t.drop()
    rmSync(dir, {recursive: true, force: true})
  })

  it('writes a self-contained report that renders without console errors and draws the chart', async () => {
    const database = await t.open()
    try {
      await database.db.insertInto('mirror').values({identifier: 'mirror.example.de', http_url: 'http://mirror.example.de/', country: 'DE', continent: 'EU'}).execute()
      const id = (await database.db.selectFrom('mirror').select('id').executeTakeFirstOrThrow()).id
      const c = new StatsCollector()
      const start = Date.UTC(2026, 10, 1, 12)
      const base: RequestOutcome = {time: start, method: 'GET', target: '/', httpVersion: '1.1', status: 302, outcome: 'redirect', clientIp: '192.0.2.1', bytesSent: 0, durationSeconds: 0}
      for (let d = 0; d < 14; d++) {
        for (let k = 0; k < 3 + ((d * 5) % 11); k++)
          c.observer({...base, time: start + d * DAY, path: `iso/release-${k % 3}.iso`, mirrorId: id, fileSize: 700_000_000, country: ['DE', 'FR', 'US'][k % 3]})
        c.observer({...base, time: start + d * DAY, path: 'README <b>&</b>.txt', outcome: 'local', status: 200, bytesSent: 100, country: 'SE'})
      }
      expect((await c.flush(database)).ok).to.equal(true)
    } finally {
      await database.close()
    }

    const report = join(dir, 'report.html')
    const res = await mb(['stats', '--since', '2026-11-01', '--until', '2026-11-14', '--html', report, '--json'], {env: t.env})
    expect(res.code, res.stderr).to.equal(0)
    expect(res.json().html).to.equal(report)
    const html = readFileSync(report, 'utf8')
    expect(html).to.match(/^<!DOCTYPE html>/)
    expect(html).to.not.match(/<(script|link|img|iframe)\b/i) // nothing to load
    expect(html).to.contain('README &lt;b&gt;&amp;&lt;/b&gt;.txt')
    expect(html).to.contain('mirror.example.de')
    expect(html.match(/<rect class="col"/g)).to.have.length(14)

    const {png, console, stderr} = screenshot(dir, report)
    expect(console, stderr).to.deep.equal([])
    expect(png.width).to.equal(1200)
    expect(png.height).to.equal(900)
    expect(distinctColours(png)).to.be.greaterThan(20) // not blank
    expect(barPixels(png)).to.be.greaterThan(2000) // the columns of the chart are drawn

    // the console check itself works: a page with an error is caught
    const bad = join(dir, 'bad.html')
    writeFileSync(bad, '<!DOCTYPE html><title>bad</title><script>console.error("broken report")</script>')
    expect(screenshot(dir, bad).console.join('\n')).to.contain('broken report')
  })
})
