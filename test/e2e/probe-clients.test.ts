// @store-independent: the probe against nginx mirrors
/**
 * Probes that see what clients see, against real nginx mirrors on loopback through the
 * compiled CLI: a mirror that 302s every request to another host is recorded as such
 * (`redirect_offsite`, "no (redirects off-host)") and gets no redirects from `mb serve`
 * under the default `probe.redirects: same_origin`; a mirror that answers 403 to `Wget` and
 * `curl` fails once `probe.user_agents` names them, and the report names every agent refused.
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, seedFiles, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname

describe(`mb probe: off-host redirects and user agents, against nginx (${backend})`, function () {
  let tdb: TestDatabase
  let root: string
  const configs: Record<string, string> = {}
  const nginx: RunningServer[] = []
  let healthy: RunningServer
  let redirecting: RunningServer
  let blocking: RunningServer
  let curlBlocking: RunningServer
  let serve: ServeProcess | undefined

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    root = mkdtempSync(join(tmpdir(), 'mb-probe-clients-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'big.iso'), Buffer.alloc(20_000, 'b'))
    writeFileSync(join(root, 'pub', 'small.txt'), 'hello\n')
    healthy = await startNginx({root})
    // Every request to another host (another port is another origin, RFC 6454).
    redirecting = await startNginx({root, serverConfig: `return 302 http://127.0.0.1:${healthy.port}$request_uri;`})
    blocking = await startNginx({root, serverConfig: 'if ($http_user_agent ~* "^(wget|curl)/") { return 403; }'})
    curlBlocking = await startNginx({root, serverConfig: 'if ($http_user_agent ~* "^curl/") { return 403; }'})
    nginx.push(healthy, redirecting, blocking, curlBlocking)
    const base = 'probe:\n  timeout: 10\n  connect_timeout: 5\n  fail_threshold: 1\n  ok_threshold: 1\n'
    for (const [name, extra] of Object.entries({
      plain: '',
      agents: '  user_agents: [Wget/1.21.4, curl/8.5.0]\n',
      follow: '  redirects: any\n',
    })) {
      configs[name] = join(root, `${name}.yaml`)
      writeFileSync(configs[name], base + extra)
    }
    tdb = await createTestDatabase()
    const database = await tdb.open()
    try {
      const ids: number[] = []
      for (const [identifier, server] of [
        ['healthy.test', healthy],
        ['redirecting.test', redirecting],
        ['blocking.test', blocking],
        ['curl-blocking.test', curlBlocking],
      ] as const) {
        const row = await database.db.insertInto('mirror').values({identifier, http_url: server.url, country: 'GB', continent: 'EU'}).returning('id').executeTakeFirstOrThrow()
        ids.push(row.id)
      }
      await seedFiles(database, root, ['pub/big.iso', 'pub/small.txt'], ids)
    } finally {
      await database.close()
    }
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const probe = async (config: string) => {
    const result = await mb(['probe', '--json', '--config', configs[config]], {env: tdb.env})
    expect(result.code, result.stderr).to.equal(0)
    return Object.fromEntries(result.json().mirrors.map((m: any) => [m.identifier, m]))
  }

  it('records an off-host redirect as its own state, out of selection by default', async () => {
    const byName = await probe('plain')
    expect(byName['redirecting.test'].up).to.equal(false)
    expect(byName['redirecting.test'].checks[0]).to.include({
      ok: false,
      reason: 'redirect_offsite',
      http_status: 302,
      detail: `redirects to another host: http://127.0.0.1:${healthy.port}/pub/small.txt (probe.redirects: same_origin takes it out of selection)`,
    })
    // One User-Agent (mb's own): the blocking mirrors pass.
    expect(byName['blocking.test'].up).to.equal(true)
    expect(byName['curl-blocking.test'].up).to.equal(true)
    expect(byName['healthy.test'].up).to.equal(true)
    const list = await mb(['mirror', 'list'], {env: tdb.env})
    expect(list.code, list.stderr).to.equal(0)
    expect(list.stdout.split('\n').find((l) => l.startsWith('redirecting.test'))).to.match(/\tno \(redirects off-host\)\tredirect_offsite\t/)
    const show = await mb(['mirror', 'show', 'redirecting.test'], {env: tdb.env})
    expect(show.stdout).to.match(/^up:\s+no \(redirects off-host\)$/m)
    expect(show.stdout).to.match(/^status_reason:\s+redirect_offsite$/m)
    const human = await mb(['probe', 'redirecting.test', '--config', configs.plain], {env: tdb.env})
    expect(human.stdout).to.include(`redirects to another host: http://127.0.0.1:${healthy.port}/pub/small.txt`)
  })

  it('with probe.user_agents, a mirror refusing Wget and curl fails, and the report names both', async () => {
    const byName = await probe('agents')
    expect(byName['blocking.test'].up).to.equal(false)
    expect(byName['blocking.test'].checks[0]).to.include({
      ok: false,
      reason: 'http_403',
      http_status: 403,
      detail: 'with User-Agent "Wget/1.21.4": HTTP 403; with User-Agent "curl/8.5.0": HTTP 403',
    })
    // Refusing only one of them names only that one.
    expect(byName['curl-blocking.test'].up).to.equal(false)
    expect(byName['curl-blocking.test'].checks[0]).to.include({reason: 'http_403', detail: 'with User-Agent "curl/8.5.0": HTTP 403'})
    expect(byName['healthy.test'].checks[0]).to.include({ok: true, reason: 'ok', http_status: 206})
    expect(byName['healthy.test'].up).to.equal(true)
  })

  it('mb serve sends clients to neither the off-host redirector nor the agent-blocking mirror', async () => {
    serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32'], tdb.env)
    for (let i = 0; i < 5; i++) {
      const res = await request(serve.port, `/pub/big.iso?n=${i}`, {headers: {'X-Forwarded-For': `81.2.69.${142 + i}`}})
      expect(res.status).to.equal(302)
      expect(res.headers['x-mb-mirror']).to.equal('healthy.test')
    }
    await serve.stop()
    serve = undefined
  })

  it('probe.redirects: any follows the redirect: up, with a note naming the other host', async () => {
    const byName = await probe('follow')
    expect(byName['redirecting.test'].up, JSON.stringify(byName['redirecting.test'])).to.equal(true)
    expect(byName['redirecting.test'].checks[0]).to.include({ok: true, reason: 'ok', http_status: 206, detail: `redirected to another host: http://127.0.0.1:${healthy.port}/pub/small.txt`})
  })
})
