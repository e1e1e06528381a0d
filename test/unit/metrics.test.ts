/**
 * Prometheus metrics on their own listener: the text format parses, request counters follow
 * outcome and realm, the latency histogram counts every request, and the gauges read the
 * callbacks the serve code provides.
 */
import {expect} from 'chai'
import {parsePrometheus} from '../helpers/prometheus.js'
import {createServeMetrics, startMetricsServer, type MetricsServer} from '../../src/lib/operator/metrics.js'
import type {RequestOutcome} from '../../src/lib/serve/delivery/outcome.js'

const req = (over: Partial<RequestOutcome>): RequestOutcome => ({
  time: 0,
  method: 'GET',
  target: '/x',
  httpVersion: '1.1',
  status: 302,
  outcome: 'redirect',
  clientIp: '127.0.0.1',
  bytesSent: 0,
  durationSeconds: 0.0003,
  ...over,
})

/** Each line of Prometheus text exposition format 0.0.4: a comment, a sample, or blank (NaN/Inf in any case, as Go's ParseFloat reads them; prom-client writes `Nan`). */
const LINE = /^(#\s(HELP|TYPE)\s[a-zA-Z_:][a-zA-Z0-9_:]*\s.*|[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})?\s(-?[0-9.e+-]+|NaN|\+Inf|-Inf)(\s-?\d+)?|)$/i

describe('metrics', () => {
  let server: MetricsServer | undefined
  afterEach(async () => {
    await server?.close()
    server = undefined
  })

  it('serves /metrics in Prometheus text format with requests, latency, snapshot, database, mirrors and flush failures', async () => {
    let dbUp = true
    server = await startMetricsServer({listen: '127.0.0.1:0', sources: {snapshotAgeSeconds: () => 4.5, databaseUp: async () => dbUp, mirrors: () => ({up: 3, down: 1}), statsPendingKeys: () => 17}})
    const m = server.metrics!
    for (let i = 0; i < 5; i++) m.observer(req({realm: 'country'}))
    m.observer(req({realm: 'world', durationSeconds: 0.02}))
    m.observer(req({outcome: 'local', status: 200, durationSeconds: 0.3}))
    m.observer(req({outcome: 'not_found', status: 404}))
    m.statsFlushFailed()
    m.statsFlushFailed()
    m.statsLost(12)
    dbUp = false

    const res = await fetch(`${server.url}/metrics`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8')
    const text = await res.text()
    for (const line of text.split('\n')) expect(line).to.match(LINE)
    const families = parsePrometheus(text)
    const family = (name: string) => families.find((f) => f.name === name)!
    const requests = family('mb_requests_total')
    expect(requests.type).to.equal('COUNTER')
    const value = (outcome: string, realm: string) => requests.metrics.find((s: any) => s.labels.outcome === outcome && s.labels.realm === realm)?.value
    expect(value('redirect', 'country')).to.equal('5')
    expect(value('redirect', 'world')).to.equal('1')
    expect(value('local', 'none')).to.equal('1')
    expect(value('not_found', 'none')).to.equal('1')
    const latency = family('mb_request_duration_seconds')
    expect(latency.type).to.equal('HISTOGRAM')
    // (the parser drops a histogram's own labels: read the samples from the text)
    expect(text).to.match(/^mb_request_duration_seconds_count\{outcome="redirect"\} 6$/m)
    expect(text).to.match(/^mb_request_duration_seconds_bucket\{le="0.0005",outcome="redirect"\} 5$/m)
    expect(text).to.match(/^mb_request_duration_seconds_bucket\{le="0.025",outcome="redirect"\} 6$/m)
    expect(text).to.match(/^mb_request_duration_seconds_bucket\{le="0.25",outcome="local"\} 0$/m)
    expect(text).to.match(/^mb_request_duration_seconds_bucket\{le="0.5",outcome="local"\} 1$/m)
    expect(family('mb_snapshot_age_seconds').metrics[0].value).to.equal('4.5')
    expect(family('mb_database_up').metrics[0].value).to.equal('0')
    expect(family('mb_mirrors').metrics.map((s: any) => [s.labels.state, s.value])).to.deep.equal([
      ['up', '3'],
      ['down', '1'],
    ])
    expect(family('mb_stats_flush_failures_total').metrics[0].value).to.equal('2')
    expect(family('mb_stats_lost_downloads_total').metrics[0].value).to.equal('12')
    expect(family('mb_stats_pending_keys').metrics[0].value).to.equal('17')
    expect(families.some((f) => f.name === 'mb_process_cpu_user_seconds_total')).to.equal(true)

    const other = await fetch(`${server.url}/`)
    expect(other.status).to.equal(404)
    await other.text()
  })

  it('refuses a bad listen address and a taken port', async () => {
    let error: any
    try {
      await startMetricsServer({listen: 'localhost'})
    } catch (e) {
      error = e
    }
    expect(error?.code).to.equal('INVALID_LISTEN')
    expect(error?.exitCode).to.equal(2)
    server = await startMetricsServer({listen: '127.0.0.1:0', metrics: createServeMetrics({}, {defaultMetrics: false})})
    error = undefined
    try {
      await startMetricsServer({listen: `127.0.0.1:${server.port}`})
    } catch (e) {
      error = e
    }
    expect(error?.code).to.equal('LISTEN_FAILED')
  })

  it('reports the standby lag only with a read replica, NaN while it is unknown', async () => {
    const text = async (sources: Parameters<typeof createServeMetrics>[0]) => {
      server = await startMetricsServer({listen: '127.0.0.1:0', metrics: createServeMetrics(sources, {defaultMetrics: false})})
      const body = await (await fetch(`${server.url}/metrics`)).text()
      await server.close()
      server = undefined
      return body
    }
    expect(await text({})).not.to.include('mb_database_replica_lag_seconds')
    expect(await text({replicaLagSeconds: async () => 1.25})).to.match(/^mb_database_replica_lag_seconds 1\.25$/m)
    expect(await text({replicaLagSeconds: async () => Promise.reject(new Error('standby down'))})).to.match(/^mb_database_replica_lag_seconds NaN$/im)
  })

  it("reports the origin's watched and unwatched directories and the inotify limit", async () => {
    server = await startMetricsServer({
      listen: '127.0.0.1:0',
      metrics: createServeMetrics({originWatch: () => ({watched: 10101, unwatched: 3, limit: 192540, limitHit: true})}, {defaultMetrics: false}),
    })
    const body = await (await fetch(`${server.url}/metrics`)).text()
    expect(body).to.match(/^mb_origin_watched_directories\{state="watched"\} 10101$/m)
    expect(body).to.match(/^mb_origin_watched_directories\{state="unwatched"\} 3$/m)
    expect(body).to.match(/^mb_origin_watch_limit 192540$/m)
  })
})
