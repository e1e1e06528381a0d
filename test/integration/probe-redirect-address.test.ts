// @store-independent: DNS resolution of the probe
/**
 * The probe's `public` redirect check and the connection that follows use the same resolved
 * address: a redirect target whose name resolves to a public address when checked and to
 * loopback afterwards (DNS rebinding) is connected to at the checked address, never at the
 * second answer, and its name is resolved once.
 */
import {expect} from 'chai'
import type {LookupAddress} from 'node:dns'
import {ProbeClient} from '../../src/lib/probe/http.js'
import {httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

describe('probe redirect check and connection address', function () {
  this.timeout(30_000)
  const servers: TestServer[] = []
  after(async () => {
    for (const s of servers) await s.close()
  })

  it('connects to the address the redirect check accepted, not to a second lookup', async () => {
    const target = await httpServer(staticHandler({'pub/file.iso': 'secret-from-loopback'}))
    servers.push(target)
    const base = await httpServer((req, res) => res.writeHead(302, {location: `http://rebind.test:${target.port}${req.url}`}).end())
    servers.push(base)
    const lookups: string[] = []
    // 8.8.8.8 passes the public check; every later answer points at loopback.
    const resolver = async (host: string): Promise<LookupAddress[]> => {
      lookups.push(host)
      return lookups.filter((h) => h === host).length === 1 ? [{address: '8.8.8.8', family: 4}] : [{address: '127.0.0.1', family: 4}]
    }
    const client = new ProbeClient({connectTimeout: 1, timeout: 3, insecureTls: false, userAgent: 'mb-test', redirects: 'public', maxRedirects: 3, resolver})
    try {
      const outcome = await client.check(`http://127.0.0.1:${base.port}/pub/file.iso`, 'ipv4', `http://127.0.0.1:${base.port}/pub/`)
      expect(outcome.ok).to.equal(false)
      expect(outcome.finalUrl).to.equal(`http://rebind.test:${target.port}/pub/file.iso`)
      expect(['timeout', 'unreachable', 'refused', 'reset', 'error']).to.include(outcome.reason)
      expect(lookups).to.deep.equal(['rebind.test'])
      expect(target.requests).to.have.length(0)
      expect(base.requests).to.have.length(1)
    } finally {
      await client.close()
    }
  })
})
