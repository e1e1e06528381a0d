import {mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {isTraceFile, parseTrace, readOriginTrace, syncLagSeconds, TRACE_MAX_BYTES, TraceError, writeOriginTrace} from '../../src/lib/sync/trace.js'
import {nagiosVerdict} from '../../src/lib/probe/nagios.js'
import {shortDuration} from '../../src/lib/time.js'

const NOW = new Date('2026-12-06T12:00:00Z')
const at = (iso: string) => new Date(iso).getTime()

describe('sync trace files', () => {
  describe('parseTrace', () => {
    it('reads Unix seconds (Mirrorbits, Arch lastsync, mb), with or without a newline', () => {
      expect(parseTrace('1796558400\n', NOW).getTime()).to.equal(1_796_558_400_000)
      expect(parseTrace('  1796558400', NOW).getTime()).to.equal(1_796_558_400_000)
    })
    it("reads Debian's ftpsync trace by its Date: line", () => {
      const debian = [
        'Sun Dec  6 09:01:35 UTC 2026',
        'Date: Sun, 06 Dec 2026 09:01:35 +0000',
        'Date-Started: Sun, 06 Dec 2026 08:58:24 +0000',
        'Archive serial: 2026120602',
        'Creator: ftpsync 20180513',
        'Running on host: mirror.example.org',
        '',
      ].join('\n')
      expect(parseTrace(debian, NOW).toISOString()).to.equal('2026-12-06T09:01:35.000Z')
    })
    it("reads an old Debian trace that is only `date -u`'s line", () => {
      expect(parseTrace('Sun Dec  6 09:01:35 UTC 2026\n', NOW).toISOString()).to.equal('2026-12-06T09:01:35.000Z')
    })
    it('refuses garbage, an HTML page, an empty file, times before 2000 and oversized files with a clear message', () => {
      expect(() => parseTrace('hello world', NOW)).to.throw(TraceError, /no time in a known format.*hello world/)
      expect(() => parseTrace('<html><body>Not here</body></html>', NOW)).to.throw(TraceError, /no time/)
      expect(() => parseTrace('', NOW)).to.throw(TraceError, /no time/)
      expect(() => parseTrace('12345', NOW)).to.throw(TraceError, /before 2000/)
      expect(() => parseTrace('1'.repeat(TRACE_MAX_BYTES + 1), NOW)).to.throw(TraceError, /more than 65536 bytes/)
    })
    it('refuses a time more than five minutes in the future, and tolerates small clock skew', () => {
      expect(() => parseTrace(String(at('2026-12-06T13:00:00Z') / 1000), NOW)).to.throw(TraceError, /3600 s in the future/)
      expect(parseTrace(String(at('2026-12-06T12:04:00Z') / 1000), NOW).toISOString()).to.equal('2026-12-06T12:04:00.000Z')
    })
  })

  describe('the origin trace', () => {
    let root: string
    beforeEach(() => {
      root = mkdtempSync(join(tmpdir(), 'mb-trace-'))
    })
    afterEach(() => rmSync(root, {recursive: true, force: true}))

    it('is written as Unix seconds, in a directory created on demand, at most once a minute', async () => {
      expect(await writeOriginTrace(root, 'project/trace/origin', NOW)).to.deep.equal(NOW)
      expect(readFileSync(join(root, 'project/trace/origin'), 'utf8')).to.equal(`${NOW.getTime() / 1000}\n`)
      expect(await writeOriginTrace(root, 'project/trace/origin', new Date(NOW.getTime() + 30_000))).to.equal(null)
      const later = new Date(NOW.getTime() + 61_400)
      const whole = new Date(NOW.getTime() + 61_000)
      expect(await writeOriginTrace(root, 'project/trace/origin', later)).to.deep.equal(whole)
      expect(await readOriginTrace(root, 'project/trace/origin', later)).to.deep.equal(whole)
    })
    it('replaces a trace that is garbage or in the future', async () => {
      writeFileSync(join(root, 'TIME'), 'garbage')
      expect(await writeOriginTrace(root, 'TIME', NOW)).to.deep.equal(NOW)
      writeFileSync(join(root, 'TIME'), String(NOW.getTime() / 1000 + 7200))
      expect(await writeOriginTrace(root, 'TIME', NOW)).to.deep.equal(NOW)
    })
    it('reads as null when unset, missing or unreadable', async () => {
      expect(await readOriginTrace(undefined, 'TIME')).to.equal(null)
      expect(await readOriginTrace(root, undefined)).to.equal(null)
      expect(await readOriginTrace(root, 'TIME')).to.equal(null)
      mkdirSync(join(root, 'TIME'))
      expect(await readOriginTrace(root, 'TIME')).to.equal(null)
    })
    it('tells its own partial writes apart from the tree', () => {
      expect(isTraceFile('project/trace/origin', 'project/trace/origin')).to.equal(true)
      expect(isTraceFile('project/trace/.0a1b2c3d4e5f.mb-trace', 'project/trace/origin')).to.equal(true)
      expect(isTraceFile('.0a1b2c3d4e5f.mb-trace', 'TIME')).to.equal(true)
      expect(isTraceFile('project/trace/other', 'project/trace/origin')).to.equal(false)
      expect(isTraceFile('project/x.mb-trace', 'project/trace/origin')).to.equal(false)
    })
  })

  it("measures a mirror's lag against the origin's trace, or against now without one", () => {
    const mirror = new Date('2026-12-06T09:00:00Z')
    expect(syncLagSeconds(mirror, new Date('2026-12-06T11:00:00Z'), NOW)).to.equal(7200)
    expect(syncLagSeconds(mirror, null, NOW)).to.equal(10_800)
    expect(syncLagSeconds(new Date('2026-12-06T11:30:00Z'), new Date('2026-12-06T11:00:00Z'), NOW)).to.equal(0)
    expect(syncLagSeconds(null, NOW, NOW)).to.equal(null)
  })

  it('prints durations at a glance', () => {
    expect([shortDuration(45), shortDuration(600), shortDuration(3 * 3600 + 12 * 60), shortDuration(2 * 86_400 + 4 * 3600), shortDuration(86_400)]).to.deep.equal(['45s', '10m', '3h12m', '2d4h', '1d'])
  })

  it('turns a Nagios verdict WARNING or CRITICAL on lag, naming the mirrors behind, with max_lag perfdata', () => {
    const counts = {up: 3, down: 0}
    const sync = (lags: number[]) => ({lags: lags.map((seconds, i) => ({name: `m${i}`, seconds})), warning: 3600, critical: 86_400})
    expect(nagiosVerdict(counts, 10, 30, sync([0, 60, 120])).line).to.equal('MB PROBE OK - 3/3 mirrors up | up=3;;;0;3 down=0;;;0;3 max_lag=120s;3600;86400;0;')
    const warn = nagiosVerdict(counts, 10, 30, sync([0, 7200, 120]))
    expect([warn.state, warn.code]).to.deep.equal(['WARNING', 1])
    expect(warn.line).to.contain('(behind: m1 7200s)')
    expect(nagiosVerdict(counts, 10, 30, sync([90_000, 7200])).state).to.equal('CRITICAL')
    expect(nagiosVerdict({up: 1, down: 2}, 10, 30, sync([0])).state).to.equal('CRITICAL')
  })
})
