import {expect} from 'chai'
import {classifyError, classifyStatus, isNonGlobalAddress, mirrorFileUrl, sizeFromHeaders} from '../../src/lib/probe/http.js'
import {nagiosUnknown, nagiosVerdict} from '../../src/lib/probe/nagios.js'
import {nextState, type MirrorState, rangeSupport} from '../../src/lib/probe/state.js'
import type {CheckResult} from '../../src/lib/probe/probe.js'
import {ProbeConfigSchema} from '../../src/lib/probe/config.js'

const T0 = new Date('2026-01-01T00:00:00Z')
const config = {fail_threshold: 2, ok_threshold: 2, rescan_after_seconds: 3600}

function check(key: string, ok: boolean, reason = ok ? 'ok' : 'timeout'): CheckResult {
  const [protocol, family] = key.split('/') as ['http' | 'https', 'ipv4' | 'ipv6']
  return {key, protocol, family, address: null, url: 'http://m/x', ok, reason: reason as CheckResult['reason'], httpStatus: ok ? 206 : null, latencyMs: 1, at: T0, size: null}
}

const fresh: MirrorState = {up: true, http_up: null, https_up: null, ipv6: null, status: {checks: {}}, status_reason: null, status_changed_at: null, needs_rescan: false}

function apply(state: MirrorState, checks: CheckResult[], minutes: number, noIpv6 = false) {
  return nextState(state, checks, {noIpv6}, config, new Date(T0.getTime() + minutes * 60_000))
}

describe('probe: hysteresis (nextState)', () => {
  it('takes a first answer directly and records unknown -> up/down transitions', () => {
    const {state, transitions} = apply(fresh, [check('http/ipv4', false, 'refused'), check('https/ipv4', true)], 0)
    expect(state.status.checks['http/ipv4']).to.deep.equal({up: false, ok_count: 0, fail_count: 1, reason: 'refused', since: T0.toISOString()})
    expect(state.status.checks['https/ipv4']).to.include({up: true, ok_count: 1})
    expect(state.up).to.equal(true) // some IPv4 check is up
    expect(state.status_reason).to.equal('refused')
    expect(transitions.map((t) => `${t.scope}:${t.from_state}->${t.to_state}`)).to.deep.equal(['http/ipv4:unknown->down', 'https/ipv4:unknown->up'])
  })

  it('needs fail_threshold failures to go down and ok_threshold successes to come back, capping counts', () => {
    let s = apply(fresh, [check('http/ipv4', true)], 0).state
    s = apply(s, [check('http/ipv4', true)], 1).state
    expect(s.status.checks['http/ipv4'].ok_count).to.equal(2)
    s = apply(s, [check('http/ipv4', true)], 2).state
    expect(s.status.checks['http/ipv4'].ok_count).to.equal(2) // capped: a steady state writes nothing new
    s = apply(s, [check('http/ipv4', false)], 3).state
    expect([s.up, s.status.checks['http/ipv4'].fail_count]).to.deep.equal([true, 1])
    const down = apply(s, [check('http/ipv4', false)], 4)
    expect(down.state.up).to.equal(false)
    expect(down.state.status_changed_at).to.deep.equal(new Date(T0.getTime() + 4 * 60_000))
    expect(down.transitions.map((t) => `${t.scope}:${t.to_state}:${t.reason}`)).to.deep.equal(['http/ipv4:down:timeout', 'mirror:down:timeout'])
    s = apply(down.state, [check('http/ipv4', true)], 5).state
    expect(s.up).to.equal(false)
    const up = apply(s, [check('http/ipv4', true)], 6)
    expect(up.state.up).to.equal(true)
    expect(up.state.needs_rescan).to.equal(false) // down 2 minutes < 3600 s
    expect(up.state.status_reason).to.equal('ok')
  })

  it('a flapping check never changes state', () => {
    let s = apply(fresh, [check('http/ipv4', true)], 0).state
    for (let i = 1; i < 10; i++) s = apply(s, [check('http/ipv4', i % 2 === 0)], i).state
    expect(s.up).to.equal(true)
    expect(s.status_changed_at).to.equal(null)
  })

  it('sets needs_rescan when the mirror comes back after more than rescan_after_seconds', () => {
    let s = apply(fresh, [check('http/ipv4', false)], 0).state
    expect(s.up).to.equal(false)
    s = apply(s, [check('http/ipv4', true)], 90).state
    const back = apply(s, [check('http/ipv4', true)], 91)
    expect(back.state.up).to.equal(true)
    expect(back.state.needs_rescan).to.equal(true)
  })

  it('derives ipv6 from the IPv6 checks, or false when the hosts have no IPv6 address', () => {
    expect(apply(fresh, [check('http/ipv4', true)], 0, true).state.ipv6).to.equal(false)
    expect(apply(fresh, [check('http/ipv4', true)], 0, false).state.ipv6).to.equal(null)
    expect(apply(fresh, [check('http/ipv4', true), check('http/ipv6', true)], 0).state.ipv6).to.equal(true)
    expect(apply(fresh, [check('http/ipv4', true), check('http/ipv6', false)], 0).state.ipv6).to.equal(false)
  })

  it('summarises an IPv6-only mirror by its IPv6 checks, and keeps up when nothing was checked', () => {
    expect(apply(fresh, [check('http/ipv6', false)], 0).state.up).to.equal(false)
    const down = {...fresh, up: false}
    expect(apply(down, [], 0).state.up).to.equal(false)
  })

  it('drops keys no longer checked and keeps the cached probe path', () => {
    const s = nextState(
      {...fresh, status: {checks: {'ftp/ipv4': {up: true, ok_count: 1, fail_count: 0, reason: 'ok', since: T0.toISOString()}}, probe_path: 'a/b'}},
      [check('http/ipv4', true)],
      {noIpv6: false},
      config,
      T0,
    ).state
    expect(Object.keys(s.status.checks)).to.deep.equal(['http/ipv4'])
    expect(s.status.probe_path).to.equal('a/b')
  })
})

describe('probe: classification', () => {
  it('maps network and TLS errors to reason codes', () => {
    expect(classifyError(Object.assign(new Error('x'), {code: 'ECONNREFUSED'}))).to.equal('refused')
    expect(classifyError(Object.assign(new Error('x'), {code: 'UND_ERR_CONNECT_TIMEOUT'}))).to.equal('timeout')
    expect(classifyError(Object.assign(new Error('x'), {code: 'UND_ERR_HEADERS_TIMEOUT'}))).to.equal('timeout')
    expect(classifyError(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))).to.equal('timeout')
    expect(classifyError(Object.assign(new Error('self-signed certificate'), {code: 'DEPTH_ZERO_SELF_SIGNED_CERT'}))).to.equal('tls_error')
    expect(classifyError(Object.assign(new Error('x'), {code: 'ERR_TLS_CERT_ALTNAME_INVALID'}))).to.equal('tls_error')
    expect(classifyError(Object.assign(new Error('x'), {code: 'ENOTFOUND'}))).to.equal('dns')
    expect(classifyError(Object.assign(new Error('x'), {code: 'ECONNRESET'}))).to.equal('reset')
    expect(classifyError(Object.assign(new Error('fetch failed'), {cause: Object.assign(new Error('y'), {code: 'EHOSTUNREACH'})}))).to.equal('unreachable')
    expect(classifyError(new Error('something else'))).to.equal('error')
  })

  it('maps statuses: 2xx and 416 are ok, everything else http_<status>', () => {
    expect([200, 206, 416, 403, 404, 500].map(classifyStatus)).to.deep.equal(['ok', 'ok', 'ok', 'http_403', 'http_404', 'http_500'])
  })

  it('reads the total size from Content-Range (206) or Content-Length (200)', () => {
    expect(sizeFromHeaders(206, {'content-range': 'bytes 0-0/123456'})).to.equal(123456)
    expect(sizeFromHeaders(206, {'content-range': 'bytes 0-0/*'})).to.equal(null)
    expect(sizeFromHeaders(200, {'content-length': '42'})).to.equal(42)
    expect(sizeFromHeaders(404, {'content-length': '9'})).to.equal(null)
  })

  it('tells non-global addresses from global ones', () => {
    for (const a of ['127.0.0.1', '10.1.2.3', '192.168.0.1', '172.16.5.4', '169.254.1.1', '100.64.0.1', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '0.0.0.0'])
      expect(isNonGlobalAddress(a), a).to.equal(true)
    for (const a of ['81.2.69.142', '2a02:d180::1', '8.8.8.8']) expect(isNonGlobalAddress(a), a).to.equal(false)
  })

  it('builds file URLs below the base URL through base_path, percent-encoding segments', () => {
    expect(mirrorFileUrl('http://m.example/pub', '', 'iso/a b#1.iso')).to.equal('http://m.example/pub/iso/a%20b%231.iso')
    expect(mirrorFileUrl('http://m.example/pub/', 'distribution/', 'distribution/15.6/x.rpm')).to.equal('http://m.example/pub/15.6/x.rpm')
    expect(mirrorFileUrl('http://m.example/', 'distribution', 'distribution2/x')).to.equal('http://m.example/distribution2/x')
  })

  it('has the documented config defaults', () => {
    expect(ProbeConfigSchema.parse({})).to.include({fail_threshold: 2, ok_threshold: 2, rescan_after_seconds: 86400, insecure_tls: false, redirects: 'same_origin', history: 100, jobs: 8})
    expect(() => ProbeConfigSchema.parse({redirects: 'sometimes'})).to.throw()
  })
})

describe('probe: Nagios verdicts', () => {
  it('OK, WARNING, CRITICAL by the down share, UNKNOWN when nothing was probed', () => {
    expect(nagiosVerdict({up: 10, down: 0}, 10, 30)).to.deep.equal({state: 'OK', code: 0, line: 'MB PROBE OK - 10/10 mirrors up | up=10;;;0;10 down=0;;;0;10'})
    expect(nagiosVerdict({up: 9, down: 1, downNames: ['a']}, 10, 30)).to.include({state: 'WARNING', code: 1, line: 'MB PROBE WARNING - 9/10 mirrors up (down: a) | up=9;;;0;10 down=1;;;0;10'})
    expect(nagiosVerdict({up: 7, down: 3}, 10, 30)).to.include({state: 'CRITICAL', code: 2})
    expect(nagiosVerdict({up: 19, down: 1}, 10, 30)).to.include({state: 'OK', code: 0}) // 5% < 10%
    expect(nagiosVerdict({up: 5, down: 0}, 0, 0)).to.include({state: 'OK'}) // nothing down is never a problem
    expect(nagiosVerdict({up: 0, down: 0}, 10, 30)).to.deep.equal({state: 'UNKNOWN', code: 3, line: 'MB PROBE UNKNOWN - no mirror could be probed'})
    expect(nagiosUnknown('a|b\nc').line).to.equal('MB PROBE UNKNOWN - a/b c')
  })
})

describe('probe: Range support', () => {
  const answer = (httpStatus: number, size: number | null, ok = true): CheckResult => ({...check('http/ipv4', ok), httpStatus, size})
  const file = {kind: 'file', path: 'pub/a.iso'} as const
  it('206 to bytes=0-0 honours Range; 200 with the whole file does not', () => {
    expect(rangeSupport([answer(206, 5000)], file)).to.equal(true)
    expect(rangeSupport([answer(200, 5000)], file)).to.equal(false)
    expect(rangeSupport([answer(200, 5000), answer(206, 5000)], file), 'one family honours it').to.equal(true)
  })
  it('tells nothing from a base URL, a failed check, or a file of one byte or none', () => {
    expect(rangeSupport([answer(200, 5000)], {kind: 'base'})).to.equal(undefined)
    expect(rangeSupport([answer(404, null, false)], file)).to.equal(undefined)
    expect(rangeSupport([answer(200, 1)], file)).to.equal(undefined)
    expect(rangeSupport([answer(200, 0)], file)).to.equal(undefined)
  })
})
