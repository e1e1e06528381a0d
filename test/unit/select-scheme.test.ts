import {expect} from 'chai'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {baseOutcome, type CheckResult} from '../../src/lib/probe/probe.js'
import {type MirrorState, nextState} from '../../src/lib/probe/state.js'
import {probeStateText, probeSummaryJson} from '../../src/lib/probe/history.js'
import {describeProbe} from '../../src/lib/probe/once.js'
import type {MirrorRoundResult} from '../../src/lib/probe/run.js'
import {type ClientInfo, compileMirror, compileSelectOptions, MirrorTable, type Selection, type SelectMirror, select} from '../../src/lib/select/index.js'
import {mirrorRow, ROW_NOW} from '../helpers/mirror-row.js'

/**
 * Probe health per scheme and the two rules that read it: `scheme_down` (the scheme the
 * client would be sent over failed its probes) and `unprobed` (`select.unprobed: skip`).
 */
const NOW = ROW_NOW
const T0 = new Date(NOW * 1000)

const row = mirrorRow

const GB: ClientInfo = {ip: '81.2.69.142', https: false, country: 'GB', continent: 'EU'}
const GB_HTTPS: ClientInfo = {...GB, https: true}
const FILE = {path: 'iso/distro-1.0.iso', size: 1_000_000, mtime: NOW - 86_400, mirrors: [1, 2, 3]}

function table(...rows: MirrorRow[]): MirrorTable {
  return new MirrorTable(rows.map((r) => compileMirror(r)))
}

/** The explained selection, after checking that the redirect path (explain false) ranks the same mirrors. */
function choose(client: ClientInfo, mirrors: MirrorTable, unprobed?: 'use' | 'skip'): Selection {
  const options = compileSelectOptions({unprobed})
  options.now = () => NOW
  const explained = select(client, FILE, mirrors, options, true)
  const lean = select(client, FILE, mirrors, options, false)
  expect(
    lean.ranked.map((c) => c.mirror.identifier),
    'redirect path',
  ).to.deep.equal(explained.ranked.map((c) => c.mirror.identifier))
  return explained
}

const ranked = (s: Selection) => s.ranked.map((c) => c.mirror.identifier).sort()
const excluded = (s: Selection) => Object.fromEntries(s.excluded.map((e) => [e.mirror.identifier, [e.reason, e.detail]]))

describe('select(): scheme health (scheme_down)', () => {
  const mirrors = table(row(1, {https_up: false}), row(2), row(3, {http_up: false}))

  it('sends an HTTPS client only to mirrors whose HTTPS is up, and says why', () => {
    const s = choose(GB_HTTPS, mirrors)
    expect(ranked(s)).to.deep.equal(['m2', 'm3'])
    expect(excluded(s)).to.deep.equal({m1: ['scheme_down', "HTTPS client and the mirror's HTTPS failed its probes (its HTTP works); `mb probe m1` shows why"]})
    expect(s.ranked.every((c) => c.url.startsWith('https://'))).to.equal(true)
  })

  it('sends an HTTP client only to mirrors whose HTTP is up', () => {
    const s = choose(GB, mirrors)
    expect(ranked(s)).to.deep.equal(['m1', 'm2'])
    expect(excluded(s).m3[0]).to.equal('scheme_down')
  })

  it("judges an HTTP client of an HTTPS-only mirror by the mirror's HTTPS", () => {
    const s = choose(GB, table(row(1, {http_url: null, http_up: null, https_up: false}), row(2, {http_url: null, http_up: null})))
    expect(ranked(s)).to.deep.equal(['m2'])
    expect(excluded(s).m1).to.deep.equal(['scheme_down', "HTTP client and the mirror's HTTPS failed its probes; `mb probe m1` shows why"])
  })

  it('a mirror down on both schemes is `down`, and no_https wins over scheme health', () => {
    const s = choose(GB_HTTPS, table(row(1, {up: false, http_up: false, https_up: false}), row(2, {https_url: null, https_up: null}), row(3)))
    expect(ranked(s)).to.deep.equal(['m3'])
    expect(Object.fromEntries(Object.entries(excluded(s)).map(([k, v]) => [k, v[0]]))).to.deep.equal({m1: 'down', m2: 'no_https'})
  })
})

describe('select(): never-probed mirrors (unprobed)', () => {
  const mirrors = table(row(1, {http_up: null, https_up: null}), row(2), row(3, {https_up: null}))

  it('use: counts a scheme not probed as up', () => {
    expect(ranked(choose(GB_HTTPS, mirrors, 'use'))).to.deep.equal(['m1', 'm2', 'm3'])
  })

  it('skip: passes over a mirror never probed, and a scheme not probed yet, for the clients of that scheme', () => {
    const https = choose(GB_HTTPS, mirrors, 'skip')
    expect(ranked(https)).to.deep.equal(['m2'])
    expect(excluded(https)).to.deep.equal({
      m1: ['unprobed', 'never probed, and select.unprobed is skip (`mb probe m1` probes it)'],
      m3: ['unprobed', 'its HTTPS was not probed yet, and select.unprobed is skip (`mb probe m3` probes it)'],
    })
    expect(ranked(choose(GB, mirrors, 'skip'))).to.deep.equal(['m2', 'm3'])
  })

  it('defaults to skip once a probe loop is configured (serve.probe_interval), else use; an explicit value wins', () => {
    expect(ConfigSchema.parse({}).select.unprobed).to.equal('use')
    expect(ConfigSchema.parse({serve: {probe_interval: 300}}).select.unprobed).to.equal('skip')
    expect(ConfigSchema.parse({serve: {probe_interval: 300}, select: {unprobed: 'use'}}).select.unprobed).to.equal('use')
    expect(ConfigSchema.parse({select: {unprobed: 'skip'}}).select.unprobed).to.equal('skip')
    expect(ConfigSchema.safeParse({select: {unprobed: 'maybe'}}).success).to.equal(false)
  })

  it('compiles null per-scheme health from rows without the columns', () => {
    const m: SelectMirror = compileMirror({...row(1), http_up: undefined, https_up: undefined} as unknown as MirrorRow)
    expect([m.httpUp, m.httpsUp]).to.deep.equal([null, null])
  })
})

describe('probe: per-scheme summaries (nextState)', () => {
  const fresh: MirrorState = {up: true, http_up: null, https_up: null, ipv6: null, status: {checks: {}}, status_reason: null, status_changed_at: null, needs_rescan: false}
  const config = {fail_threshold: 2, ok_threshold: 2, rescan_after_seconds: 3600}
  function check(key: string, ok: boolean, reason = ok ? 'ok' : 'tls_error'): CheckResult {
    const [protocol, family] = key.split('/') as ['http' | 'https', 'ipv4' | 'ipv6']
    return {key, protocol, family, address: null, url: 'http://m/x', ok, reason: reason as CheckResult['reason'], httpStatus: ok ? 206 : null, latencyMs: 1, at: T0, size: null}
  }
  const apply = (state: MirrorState, checks: CheckResult[]) => nextState(state, checks, {noIpv6: false}, config, T0).state

  it('summarises each scheme like the mirror: HTTP up and HTTPS down leave the mirror up', () => {
    const s = apply(fresh, [check('http/ipv4', true), check('https/ipv4', false)])
    expect([s.up, s.http_up, s.https_up]).to.deep.equal([true, true, false])
  })

  it('a scheme without checks (no URL) is null; an IPv6-only scheme goes by its IPv6 checks', () => {
    expect(apply(fresh, [check('https/ipv6', true)])).to.include({http_up: null, https_up: true})
    expect(apply(fresh, [check('http/ipv4', false), check('http/ipv6', true)])).to.include({http_up: false})
  })

  it('keeps hysteresis per scheme, and keeps the summaries when a round had no checks', () => {
    let s = apply(fresh, [check('https/ipv4', true)])
    s = apply(s, [check('https/ipv4', false)])
    expect(s.https_up).to.equal(true) // 1 of fail_threshold 2
    s = apply(s, [check('https/ipv4', false)])
    expect(s.https_up).to.equal(false)
    expect(apply(s, []).https_up).to.equal(false)
  })
})

describe('probe: the base URL check before any scan', () => {
  const outcome = (httpStatus: number | null, reason: string) => ({ok: false, reason, httpStatus, latencyMs: 3, finalUrl: 'http://m/pub/', size: null}) as Parameters<typeof baseOutcome>[0]
  it('passes a 401/403 (no directory listing), and nothing else that failed', () => {
    expect(baseOutcome(outcome(403, 'http_403'))).to.include({ok: true, reason: 'ok', httpStatus: 403})
    expect(baseOutcome(outcome(403, 'http_403')).detail).to.match(/^the base URL answers 403 \(no directory listing\)/)
    expect(baseOutcome(outcome(401, 'http_401'))).to.include({ok: true})
    for (const [status, reason] of [
      [404, 'http_404'],
      [500, 'http_500'],
      [null, 'tls_error'],
      [null, 'refused'],
    ] as const)
      expect(baseOutcome(outcome(status, reason))).to.include({ok: false, reason})
  })
})

describe('probe: reporting per scheme', () => {
  it('mirror list: the probe cell names the schemes that are down or unprobed and what selection does', () => {
    const summary = {state: 'up' as const, http: 'up' as const, https: 'down' as const, last_probe_at: T0, reason: 'tls_error (https/ipv4)'}
    expect(probeStateText(probeSummaryJson(summary, 'skip'))).to.equal('up, https down')
    expect(probeSummaryJson(summary, 'skip').unprobed).to.equal(null)
    expect(probeStateText(probeSummaryJson(undefined, 'skip'))).to.equal('unprobed (skipped)')
    expect(probeStateText(probeSummaryJson({...summary, state: 'unknown', http: 'unprobed', https: null}, 'use'))).to.equal('unprobed (used)')
    expect(probeStateText(probeSummaryJson({...summary, https: 'unprobed'}, 'skip'))).to.equal('up, https unprobed (skipped)')
  })

  it('mirror add: says what the probe found, and that a failed probe leaves the mirror registered', () => {
    const result = {
      up: true,
      http_up: true,
      https_up: false,
      needs_rescan: false,
      checks: [
        {key: 'http/ipv4', ok: true, reason: 'ok'},
        {key: 'https/ipv4', ok: false, reason: 'tls_error'},
      ],
    } as MirrorRoundResult
    expect(describeProbe('m1', {probed: true, result}, 'use')).to.equal('Probe: up (http up, https down; tls_error on https/ipv4). HTTPS clients are not sent to it while its HTTPS fails.')
    expect(describeProbe('m1', {probed: true, result: {...result, up: false, http_up: false, checks: [{key: 'http/ipv4', ok: false, reason: 'refused'}]} as MirrorRoundResult}, 'use')).to.match(
      /^Probe: down \(http down, https down; refused on http\/ipv4\)\. The mirror is registered but gets no redirects/,
    )
    expect(describeProbe('m1', null, 'skip')).to.equal('Not probed (--no-probe): it gets no redirects until a probe finds it up (select.unprobed: skip; `mb probe m1` probes it).')
  })
})
