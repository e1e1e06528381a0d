import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {expect} from 'chai'
import {SelectConfigSchema} from '../../src/lib/select/config.js'
import type {MirrorRow} from '../../src/lib/db/schema.js'
import {compileMirror} from '../../src/lib/select/mirror.js'
import type {Candidate} from '../../src/lib/select/types.js'
import {compileVerifyOptions, escalationHeader, Verifier} from '../../src/lib/verify/verifier.js'

function selectConfig(select: Record<string, unknown>) {
  return SelectConfigSchema.parse(select)
}

describe('verify: settings', () => {
  it('is off without verify_paths and verify_recent_seconds', () => {
    expect(compileVerifyOptions(selectConfig({}))).to.equal(undefined)
  })

  it('matches paths on the full path and the basename, and statuses by code and class', () => {
    const o = compileVerifyOptions(selectConfig({verify_paths: ['latest/**', '*-current.iso'], verify_fail_statuses: [404, '5xx']}))!
    expect(['latest/a.iso', 'x/distro-current.iso', 'iso/distro-1.0.iso'].map(o.pathMatch)).to.deep.equal([true, true, false])
    expect([200, 403, 404, 500, 503, 302].map(o.failStatus)).to.deep.equal([false, false, true, true, true, false])
    expect([o.budgetMs, o.timeoutMs, o.cacheMs, o.connections]).to.deep.equal([300, 150, 10_000, 16])
  })

  it('refuses a bad status pattern', () => {
    expect(() => selectConfig({verify_paths: ['x'], verify_fail_statuses: ['4x4']})).to.throw('expected an HTTP status such as 404 or a class such as 5xx')
  })

  it('checks recently changed files', () => {
    const verifier = new Verifier(compileVerifyOptions(selectConfig({verify_recent_seconds: 600}))!)
    expect([verifier.applies({path: 'a', mtime: 1000}, 1500), verifier.applies({path: 'a', mtime: 1000}, 1601)]).to.deep.equal([true, false])
    void verifier.close()
  })
})

describe('verify: the chain of checks', () => {
  let server: http.Server
  let heads: string[]
  let base: string

  before(async () => {
    heads = []
    server = http.createServer((req, res) => {
      heads.push(`${req.method} ${req.url}`)
      // /404/... answers 404 after a short wait, so that concurrent checks overlap.
      setTimeout(() => {
        res.writeHead(req.url!.startsWith('/404/') ? 404 : 200)
        res.end()
      }, 50)
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`
  })

  after(() => new Promise<void>((resolve) => server.close(() => resolve())))

  function candidate(id: number, prefix: string, path: string): Candidate {
    const mirror = compileMirror({id, identifier: `m${id}`, http_url: `${base}${prefix}`, https_url: null, enabled: true, up: true, score: 100} as unknown as MirrorRow)
    return {mirror, realm: 'world', rank: id, url: `${base}${prefix}${path}`}
  }

  it('escalates past a 404, shares concurrent checks and caches the verdicts', async () => {
    heads.length = 0
    const verifier = new Verifier(compileVerifyOptions(selectConfig({verify_paths: ['**'], verify_budget_ms: 5000, verify_timeout_ms: 2000, verify_cache_seconds: 60}))!)
    try {
      const chain = [candidate(1, '404/', 'f.iso'), candidate(2, 'ok/', 'f.iso')]
      const results = await Promise.all([1, 2, 3, 4, 5].map(() => verifier.choose(chain, 'f.iso')))
      expect(results.map((r) => r.chosen?.mirror.identifier)).to.deep.equal(['m2', 'm2', 'm2', 'm2', 'm2'])
      expect(escalationHeader(results[0].failed)).to.equal('m1 404')
      expect(heads.sort()).to.deep.equal(['HEAD /404/f.iso', 'HEAD /ok/f.iso'])
      const again = await verifier.choose(chain, 'f.iso')
      expect([again.chosen?.mirror.identifier, escalationHeader(again.failed), heads.length, verifier.checks]).to.deep.equal(['m2', 'm1 404 (cached)', 2, 2])
    } finally {
      await verifier.close()
    }
  })

  it('reports a refused connection and gives up when every candidate fails', async () => {
    const verifier = new Verifier(compileVerifyOptions(selectConfig({verify_paths: ['**'], verify_budget_ms: 5000, verify_timeout_ms: 2000, verify_cache_seconds: 0}))!)
    try {
      const refused = candidate(3, '', 'f.iso')
      refused.url = 'http://127.0.0.1:1/f.iso'
      const result = await verifier.choose([candidate(1, '404/', 'g.iso'), refused], 'g.iso')
      expect([result.chosen, escalationHeader(result.failed)]).to.deep.equal([undefined, 'm1 404, m3 error: ECONNREFUSED'])
    } finally {
      await verifier.close()
    }
  })
})
