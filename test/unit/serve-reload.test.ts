import {Writable} from 'node:stream'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {pino} from 'pino'
import {type Config, loadConfig} from '../../src/lib/config/index.js'
import {openGeo} from '../../src/lib/geo/geoip.js'
import {RELOADABLE, RESTART_ONLY, needsRestart, reloadServer} from '../../src/lib/redirector/reload.js'
import type {MirrorServer} from '../../src/lib/serve/delivery/server.js'
import {defaultMaxConnections} from '../../src/lib/serve/delivery/connections.js'

/** Leaf keys of a configuration (dotted). */
function leaves(tree: unknown, prefix = ''): string[] {
  if (typeof tree !== 'object' || tree === null || Array.isArray(tree)) return [prefix]
  return Object.entries(tree).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k))
}

const covers = (keys: readonly string[], key: string) => keys.some((k) => key === k || key.startsWith(`${k}.`))

describe('serve reload (SIGHUP)', () => {
  it('every setting is either reloaded by SIGHUP or named as needing a restart (scan: does not concern serve)', () => {
    const config = loadConfig({
      env: {MB_CONFIG: 'none'},
      flags: {database_url: 'postgres://x@h/db', root: '/srv', 'serve.access_log': '-', 'serve.metrics_listen': '127.0.0.1:9100', 'serve.max_connections': 10},
    }).config
    const missing = leaves(config).filter((key) => !covers(RELOADABLE, key) && !covers(RESTART_ONLY, key) && !key.startsWith('scan.'))
    expect(missing).to.deep.equal([])
    expect(RELOADABLE.filter((k) => covers(RESTART_ONLY, k))).to.deep.equal([])
  })

  it('needsRestart names the restart-only settings that changed, not the reloadable ones', () => {
    const a = loadConfig({env: {MB_CONFIG: 'none'}, flags: {'serve.listen': '127.0.0.1:8080'}}).config
    const b = loadConfig({env: {MB_CONFIG: 'none'}, flags: {'serve.listen': '127.0.0.1:8081', 'select.min_size': 1, 'stats.flush_interval_seconds': 30, 'serve.max_connections_per_client': 5}}).config
    expect(needsRestart(a, b)).to.deep.equal(['serve.listen', 'stats'])
    expect(needsRestart(a, a)).to.deep.equal([])
  })

  it('a reload compares the file with the settings the process runs with: a reverted change is not reported', async () => {
    const geoip = [fileURLToPath(new URL('../fixtures/geoip/GeoLite2-City-Test.mmdb', import.meta.url))]
    const configAt = (listen: string) => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'serve.listen': listen, geoip}}).config
    const started = configAt('127.0.0.1:8080')
    let file = configAt('127.0.0.1:9090')
    const lines: string[] = []
    const logger = pino({level: 'info'}, new Writable({write: (chunk, _enc, done) => done(void lines.push(String(chunk)))}))
    const server = {reconfigure() {}} as unknown as MirrorServer
    const target = {server, logger, config: started, started, geo: await openGeo({geoip}), readConfig: (): Config => file}
    expect((await reloadServer(target)).restart).to.deep.equal(['serve.listen'])
    file = configAt('127.0.0.1:8080')
    expect((await reloadServer(target)).restart).to.deep.equal([])
    expect(lines.filter((l) => l.includes('take effect only after a restart'))).to.have.length(1)
  })

  it('a reload whose settings fail half-way puts the running ones back, so that its log line is true', async () => {
    const geoip = [fileURLToPath(new URL('../fixtures/geoip/GeoLite2-City-Test.mmdb', import.meta.url))]
    const configWith = (minSize: number) => loadConfig({env: {MB_CONFIG: 'none'}, flags: {'select.min_size': minSize, geoip}}).config
    const started = configWith(4096)
    const lines: string[] = []
    const logger = pino({level: 'info'}, new Writable({write: (chunk, _enc, done) => done(void lines.push(String(chunk)))}))
    // A server that takes the selection options first, then fails on the rest (as a retry memory that cannot be allocated would).
    let minSize = 4096
    const server = {
      reconfigure(settings: {selectOptions: {minSize: number}}) {
        minSize = settings.selectOptions.minSize
        if (minSize === 1) throw new Error('cannot allocate')
      },
    } as unknown as MirrorServer
    const target = {server, logger, config: started, started, geo: await openGeo({geoip}), readConfig: (): Config => configWith(1)}
    const result = await reloadServer(target)
    expect(result.config).to.equal(false)
    expect(minSize).to.equal(4096)
    expect(target.config.select.min_size).to.equal(4096)
    expect(lines.some((l) => l.includes('cannot allocate') && l.includes('the running settings stay in effect'))).to.equal(true)
  })

  it('the default connection cap is half the open-file limit, at least 64', () => {
    expect(defaultMaxConnections(1024)).to.equal(512)
    expect(defaultMaxConnections(65_536)).to.equal(32_768)
    expect(defaultMaxConnections(100)).to.equal(64)
    expect(defaultMaxConnections(undefined)).to.equal(4096)
  })
})
