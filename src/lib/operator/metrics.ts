/**
 * Prometheus metrics of `mb serve` through `prom-client`, served as text exposition format
 * (version 0.0.4) on a separate listener (`--metrics-listen`), so that the redirector's own
 * port never exposes them.
 *
 * Metrics (all prefixed `mb_`):
 * - `mb_requests_total{outcome,realm}` counter: answered requests by outcome (redirect,
 *   local, not_found, meta4, …) and selection realm (`none` when no mirror was chosen);
 * - `mb_request_duration_seconds{outcome}` histogram: time to produce the response;
 * - `mb_snapshot_age_seconds` gauge: seconds since the in-memory snapshot was last refreshed;
 * - `mb_database_up` gauge: 1 when the database the snapshot is read from is reachable, 0 when not;
 * - `mb_database_replica_lag_seconds` gauge (only with `database_read_url`): seconds by which
 *   the standby the snapshot is read from trails the primary (src/lib/db/replica.ts);
 * - `mb_mirrors{state="up"|"down"}` gauge: enabled mirrors by probe state;
 * - `mb_stats_flush_failures_total` counter, `mb_stats_lost_downloads_total` counter and
 *   `mb_stats_pending_keys` gauge: the download-statistics flusher;
 * - per mirror, labelled `mirror` (its name; one series per mirror and, where given, per
 *   protocol/family or reason code, nothing per path), from ./network.ts:
 *   `mb_mirror_up{mirror,protocol,family}` gauge (1 up, 0 down, per probe check),
 *   `mb_mirror_scan_age_seconds` and `mb_mirror_probe_age_seconds` gauges (since the last
 *   successful scan, the last recorded probe check), `mb_mirror_files` gauge (files held in
 *   the current version), `mb_mirror_bad_copies` gauge (copies a content check found corrupt,
 *   `mb probe --content`), `mb_mirror_files_ratio` and `mb_mirror_bytes_ratio` gauges (share
 *   of the origin files, and of their bytes, under its base path that it holds, 0..1),
 *   `mb_mirror_redirects_total` counter (redirects sent there by this server),
 *   `mb_mirror_retries_total` counter (downloads retried away from it: a client that had
 *   been sent there asked again for the same file, src/lib/serve/delivery/retry.ts; a mirror that
 *   draws many is failing its clients),
 *   `mb_redirect_loops_total` counter (clients back at mb within a second of a redirect there:
 *   a redirect loop, or a client repeating fast, ../serve/delivery/retry.ts; each went on to
 *   the next mirror of its tier),
 *   `mb_mirror_probe_failures_total{mirror,reason}` and
 *   `mb_mirror_scan_failures_total{mirror,reason}` counters (failed probe checks and scans
 *   seen since this process started; its first read counts the failures still recorded);
 * - scans on demand (src/lib/scan/demand.ts), counted since the process started:
 *   `mb_demand_requests_total` counter (requests for a file no eligible mirror holds),
 *   `mb_demand_folder_scans_total` counter (folder runs; `mb_demand_deduplicated_total` those
 *   another replica had claimed), `mb_demand_mirror_scans_total{result="ok"|"failed"|"over_budget"|"busy"}`
 *   counter, `mb_demand_files_found_total` counter (copies added to mirror sets) and
 *   `mb_demand_queue` gauge (folders waiting or being scanned);
 * - `mb_serve_processes` gauge: serving processes in this answer (1, or the workers that
 *   reported with `--workers`);
 * - prom-client's default process metrics (`mb_process_*`, `mb_nodejs_*`).
 * Gauges read their values through callbacks given by the serve code, at scrape time.
 *
 * With `--workers N` the cluster primary owns the listener: each scrape asks every worker for
 * its registry over the cluster IPC channel and answers the aggregate (prom-client's
 * `AggregatorRegistry`): counters and histograms are summed, `mb_snapshot_age_seconds` takes
 * the oldest worker, `mb_database_up` the worst, `mb_mirrors` the largest count. The
 * per-mirror series read the shared database and snapshot: each worker sees the same values,
 * so they take the largest (`max`), except `mb_mirror_redirects_total`,
 * `mb_mirror_retries_total` and `mb_redirect_loops_total`, which are summed.
 */
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import type {WatchReport} from '../origin/watch.js'
import {originCounters} from './origin-metrics.js'
import {loopsCounter, retriesCounter} from './retry-metrics.js'
import {AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry} from 'prom-client'
import {MbError} from '../errors.js'
import {httpUrl, listenOn, parseListen} from '../serve/delivery/listen.js'
import type {RequestObserver} from '../serve/delivery/outcome.js'
import type {DemandCounters} from '../scan/demand.js'

/** Callbacks read at scrape time; each may be absent (the metric then has no sample). */
export interface MetricsSources {
  /** Seconds since the snapshot was last loaded or refreshed. */
  snapshotAgeSeconds?: () => number | undefined
  /** Whether the database is reachable now. */
  databaseUp?: () => boolean | undefined | Promise<boolean | undefined>
  /** Enabled mirrors by state. */
  mirrors?: () => {up: number; down: number} | undefined
  /** Seconds by which the standby trails its primary; may reject (no sample then). */
  replicaLagSeconds?: () => Promise<number | undefined>
  /** Keys of download statistics waiting to be flushed. */
  statsPendingKeys?: () => number
  /** The watch of the origin's directories (src/lib/origin/watch.ts), when there is one. */
  originWatch?: () => WatchReport | undefined
  /** The per-mirror samples (./network.ts); may reject (the scrape then fails with 500). */
  mirrorSamples?: () => Promise<MirrorSample[]>
  /** The counts of the scans on demand, and the folders waiting or being scanned (`queued`); absent when they are off. */
  demand?: () => DemandCounters & {queued: number}
}

/** One mirror's per-mirror metrics. Absent values give no sample. */
export interface MirrorSample {
  /** The mirror's name (`identifier`), the `mirror` label. */
  mirror: string
  /** Probe checks by protocol (`http`, `https`) and address family (`ipv4`, `ipv6`). */
  checks: Array<{protocol: string; family: string; up: boolean}>
  /** Seconds since the last successful scan. */
  scanAgeSeconds?: number
  /** Seconds since the last recorded probe check. */
  probeAgeSeconds?: number
  files: number
  /** Copies a content check found corrupt (`mb probe --content`), out of selection. */
  badCopies: number
  /** Seconds behind the origin by the sync traces; absent when no trace was read. */
  syncLagSeconds?: number
  /** Share 0..1 of the origin files (bytes) under its base path that it holds; absent when there are none. */
  filesRatio?: number
  bytesRatio?: number
  /** Counts by reason code. */
  probeFailures: ReadonlyMap<string, number>
  scanFailures: ReadonlyMap<string, number>
}

/** The metrics of one `mb serve` process. */
export interface ServeMetrics {
  registry: Registry
  /** The request observer to register with the server (memory only, a few µs). */
  observer: RequestObserver
  /** Counts one failed statistics flush. */
  statsFlushFailed(): void
  /** Counts downloads dropped from the statistics (memory bound exceeded). */
  statsLost(downloads: number): void
  /** Counts one indexed file found changed on disk ("origin index stale: PATH"). */
  originIndexStale(): void
}

/** Latency buckets in seconds: redirects take well under a millisecond, local delivery longer. */
const LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

/** The origin's directory watches: watched and unwatched directories, the kernel's limit (src/lib/origin/watch.ts). */
function registerOriginWatchGauges(registry: Registry, sources: MetricsSources): void {
  new Gauge({
    name: 'mb_origin_watched_directories',
    help: 'Origin directories the disk check watches with inotify (state="watched"), and those over the limit or refused (state="unwatched", a stat per path and disk_check_seconds)',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const r = sources.originWatch?.()
      if (r === undefined) return
      this.set({state: 'watched'}, r.watched)
      this.set({state: 'unwatched'}, r.unwatched)
    },
  })
  new Gauge({
    name: 'mb_origin_watch_limit',
    help: "The kernel's inotify watch limit per user (fs.inotify.max_user_watches)",
    registers: [registry],
    aggregator: 'max',
    collect() {
      const limit = sources.originWatch?.()?.limit
      if (limit !== undefined) this.set(limit)
    },
  })
}

/** The series read from `sources` at scrape time: snapshot age, database reachability, the standby's lag, mirrors by probe state, the origin's directory watches, the scans on demand. */
function registerStateGauges(registry: Registry, sources: MetricsSources): void {
  new Gauge({
    name: 'mb_snapshot_age_seconds',
    help: 'Seconds since the in-memory snapshot of mirrors and files was last refreshed',
    registers: [registry],
    aggregator: 'max',
    collect() {
      const age = sources.snapshotAgeSeconds?.()
      if (age !== undefined) this.set(age)
    },
  })
  new Gauge({
    name: 'mb_database_up',
    help: '1 when the database is reachable, 0 when not',
    registers: [registry],
    aggregator: 'min',
    async collect() {
      const up = await sources.databaseUp?.()
      if (up !== undefined) this.set(up ? 1 : 0)
    },
  })
  if (sources.replicaLagSeconds) {
    const lag = sources.replicaLagSeconds
    new Gauge({
      name: 'mb_database_replica_lag_seconds',
      help: 'Seconds by which the standby the snapshot is read from (database_read_url) trails the primary',
      registers: [registry],
      aggregator: 'max',
      async collect() {
        // NaN while unknown: the standby does not answer (mb_database_up says so) or has replayed nothing since it started.
        const seconds = await lag().catch(() => undefined)
        this.set(seconds ?? Number.NaN)
      },
    })
  }
  new Gauge({
    name: 'mb_mirrors',
    help: 'Enabled mirrors by probe state',
    labelNames: ['state'] as const,
    registers: [registry],
    aggregator: 'max',
    collect() {
      const m = sources.mirrors?.()
      if (m) {
        this.set({state: 'up'}, m.up)
        this.set({state: 'down'}, m.down)
      }
    },
  })
  registerOriginWatchGauges(registry, sources)
  if (sources.demand) registerDemandSeries(registry, sources.demand)
}

/** The `mb_demand_*` series, read from the queue's counters at scrape time (summed over `--workers`). */
function registerDemandSeries(registry: Registry, read: () => DemandCounters & {queued: number}): void {
  const counter = (name: string, help: string, value: (c: DemandCounters) => number) =>
    new Counter({
      name,
      help,
      registers: [registry],
      collect() {
        this.reset()
        this.inc(value(read()))
      },
    })
  counter('mb_demand_requests_total', 'Requests for an indexed file that no eligible mirror held, heard by the scans on demand', (c) => c.requests)
  counter('mb_demand_folder_scans_total', 'Folders scanned on demand (one directory on the mirrors that could hold the file)', (c) => c.folderScans)
  counter('mb_demand_deduplicated_total', 'Folder scans on demand left to the replica that had claimed the folder within the cooldown', (c) => c.deduplicated)
  counter('mb_demand_files_found_total', 'Copies the scans on demand added to mirror sets', (c) => c.filesFound)
  new Counter({
    name: 'mb_demand_mirror_scans_total',
    help: 'Mirror scans on demand by result: ok, failed, over_budget (left out by scan.demand_mirror_budget), or busy (a try that waited behind another scan of the mirror)',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      const c = read()
      this.reset()
      this.inc({result: 'ok'}, c.mirrorScans - c.mirrorScansFailed)
      this.inc({result: 'failed'}, c.mirrorScansFailed)
      this.inc({result: 'over_budget'}, c.overBudget)
      this.inc({result: 'busy'}, c.busyWaits)
    },
  })
  new Gauge({
    name: 'mb_demand_queue',
    help: 'Folders waiting for a scan on demand or being scanned',
    registers: [registry],
    collect() {
      this.set(read().queued)
    },
  })
}

type Fill = (metric: {set(labels: Record<string, string>, value: number): void}, sample: MirrorSample) => void

/**
 * A per-mirror series filled from the samples of one scrape (`read`, shared by all series):
 * a gauge, or with `counter` a counter whose totals the samples carry.
 */
function mirrorSeries(registry: Registry, read: () => Promise<MirrorSample[]>, s: {name: string; help: string; labels: string[]; fill: Fill; counter?: boolean}): void {
  const options = {name: s.name, help: s.help, labelNames: s.labels, registers: [registry], aggregator: 'max' as const}
  async function collect(this: Gauge | Counter): Promise<void> {
    const samples = await read()
    this.reset()
    const target = this instanceof Gauge ? {set: (l: Record<string, string>, v: number) => this.set(l, v)} : {set: (l: Record<string, string>, v: number) => (this as Counter).inc(l, v)}
    for (const sample of samples) s.fill(target, sample)
  }
  if (s.counter) new Counter({...options, collect})
  else new Gauge({...options, collect})
}

/** The per-mirror series (see the module doc), filled once per scrape from `sources.mirrorSamples`. */
function registerMirrorSeries(registry: Registry, sources: MetricsSources): void {
  const source = sources.mirrorSamples
  if (!source) return
  // One read per scrape for all the series (prom-client collects them concurrently).
  let pending: Promise<MirrorSample[]> | undefined
  const read = () => {
    if (!pending) {
      pending = source()
      const clear = () => setImmediate(() => (pending = undefined))
      pending.then(clear, clear)
    }
    return pending
  }
  const one =
    (value: (s: MirrorSample) => number | undefined): Fill =>
    (m, s) => {
      const v = value(s)
      if (v !== undefined) m.set({mirror: s.mirror}, v)
    }
  const byReason =
    (counts: (s: MirrorSample) => ReadonlyMap<string, number>): Fill =>
    (m, s) => {
      for (const [reason, n] of counts(s)) m.set({mirror: s.mirror, reason}, n)
    }
  const series: Array<{name: string; help: string; labels: string[]; fill: Fill; counter?: boolean}> = [
    {
      name: 'mb_mirror_up',
      help: 'Probe state of the mirror per protocol and address family (1 up, 0 down)',
      labels: ['mirror', 'protocol', 'family'],
      fill: (m, s) => {
        for (const c of s.checks) m.set({mirror: s.mirror, protocol: c.protocol, family: c.family}, c.up ? 1 : 0)
      },
    },
    {name: 'mb_mirror_scan_age_seconds', help: 'Seconds since the last successful scan of the mirror', labels: ['mirror'], fill: one((s) => s.scanAgeSeconds)},
    {name: 'mb_mirror_probe_age_seconds', help: 'Seconds since the last recorded probe check of the mirror', labels: ['mirror'], fill: one((s) => s.probeAgeSeconds)},
    {name: 'mb_mirror_files', help: 'Origin files the mirror holds in the current version', labels: ['mirror'], fill: one((s) => s.files)},
    {name: 'mb_mirror_bad_copies', help: 'Copies of the current version that a content check found corrupt (out of selection)', labels: ['mirror'], fill: one((s) => s.badCopies)},
    {
      name: 'mb_mirror_sync_lag_seconds',
      help: 'Seconds the mirror is behind the origin by its copy of the sync trace (sync.trace_path); no sample before a trace was read',
      labels: ['mirror'],
      fill: one((s) => s.syncLagSeconds),
    },
    {name: 'mb_mirror_files_ratio', help: 'Share (0..1) of the origin files under the mirror base path that it holds in the current version', labels: ['mirror'], fill: one((s) => s.filesRatio)},
    {
      name: 'mb_mirror_bytes_ratio',
      help: 'Share (0..1) of the bytes of the origin files under the mirror base path that it holds in the current version',
      labels: ['mirror'],
      fill: one((s) => s.bytesRatio),
    },
    {name: 'mb_mirror_probe_failures_total', help: 'Failed probe checks of the mirror by reason', labels: ['mirror', 'reason'], fill: byReason((s) => s.probeFailures), counter: true},
    {name: 'mb_mirror_scan_failures_total', help: 'Failed scans of the mirror by reason', labels: ['mirror', 'reason'], fill: byReason((s) => s.scanFailures), counter: true},
  ]
  for (const s of series) mirrorSeries(registry, read, s)
}

/**
 * Creates the registry and metrics (see the module doc).
 * @param options.defaultMetrics also collect prom-client's process metrics (default true)
 */
export function createServeMetrics(sources: MetricsSources = {}, options: {defaultMetrics?: boolean} = {}): ServeMetrics {
  const registry = new Registry()
  if (options.defaultMetrics !== false) collectDefaultMetrics({register: registry, prefix: 'mb_'})
  const requests = new Counter({name: 'mb_requests_total', help: 'Answered requests by outcome and selection realm', labelNames: ['outcome', 'realm'] as const, registers: [registry]})
  const latency = new Histogram({
    name: 'mb_request_duration_seconds',
    help: 'Time to produce the response, in seconds',
    labelNames: ['outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  })
  registerStateGauges(registry, sources)
  registerMirrorSeries(registry, sources)
  const flushFailures = new Counter({name: 'mb_stats_flush_failures_total', help: 'Failed flushes of download statistics to the database (counts are kept and retried)', registers: [registry]})
  const lost = new Counter({name: 'mb_stats_lost_downloads_total', help: 'Downloads dropped from the statistics because too many keys waited for the database', registers: [registry]})
  new Gauge({
    name: 'mb_stats_pending_keys',
    help: 'Download statistics keys waiting to be flushed',
    registers: [registry],
    collect() {
      const n = sources.statsPendingKeys?.()
      if (n !== undefined) this.set(n)
    },
  })
  new Gauge({name: 'mb_serve_processes', help: 'Serving processes in this answer (the workers that reported with --workers)', registers: [registry]}).set(1)
  const indexStale = new Counter({
    name: 'mb_origin_index_stale_total',
    help: 'Requests that found an indexed file changed on disk ("origin index stale: PATH"); each such file was served by the origin and re-indexed',
    registers: [registry],
  })
  flushFailures.inc(0)
  lost.inc(0)
  indexStale.inc(0)

  // Label children cached per (outcome, realm): the hot path does one Map lookup.
  const requestChildren = new Map<string, {inc(): void}>()
  const latencyChildren = new Map<string, {observe(v: number): void}>()
  const redirects = new Counter({name: 'mb_mirror_redirects_total', help: 'Redirects sent to the mirror', labelNames: ['mirror'] as const, registers: [registry]})
  const redirectChildren = new Map<string, {inc(): void}>()
  const retries = retriesCounter(registry)
  const loops = loopsCounter(registry)
  const origin = originCounters(registry)
  const observer: RequestObserver = (o) => {
    if (o.originReason !== undefined) origin(o.originReason, o.bytesSent)
    const realm = o.realm ?? 'none'
    const key = `${o.outcome}|${realm}`
    let r = requestChildren.get(key)
    if (r === undefined) {
      r = requests.labels(o.outcome, realm)
      requestChildren.set(key, r)
    }
    r.inc()
    let l = latencyChildren.get(o.outcome)
    if (l === undefined) {
      l = latency.labels(o.outcome)
      latencyChildren.set(o.outcome, l)
    }
    l.observe(o.durationSeconds)
    const mirror = o.mirrorIdentifier
    if (mirror !== undefined && o.outcome === 'redirect') {
      let m = redirectChildren.get(mirror)
      if (m === undefined) {
        m = redirects.labels(mirror)
        redirectChildren.set(mirror, m)
      }
      m.inc()
    }
    // Rare (a retry): no cache of label children needed.
    if (o.retriedFrom !== undefined) retries.labels(o.retriedFrom).inc()
    if (o.bouncedFrom !== undefined) loops.labels(o.bouncedFrom).inc()
  }
  return {
    registry,
    observer,
    statsFlushFailed: () => flushFailures.inc(),
    statsLost: (downloads) => lost.inc(downloads),
    originIndexStale: () => indexStale.inc(),
  }
}

/** A running metrics listener. */
export interface MetricsServer {
  /** e.g. `http://127.0.0.1:9100` */
  url: string
  port: number
  /** The metrics answered (absent on a cluster primary, which aggregates its workers'). */
  metrics?: ServeMetrics
  close(): Promise<void>
}

/** What a metrics listener answers: a content type and the exposition text. */
export interface MetricsSource {
  contentType: string
  metrics(): Promise<string>
}

/**
 * Starts the metrics listener at `listen` (HOST:PORT, [V6]:PORT; port 0 picks a free one):
 * `GET /metrics` answers the Prometheus text format, anything else 404.
 * @param options.metrics an existing {@link ServeMetrics}; otherwise one is created from `sources`
 * @param options.source  what to answer instead of a process's own metrics (the cluster primary's aggregate)
 * @throws UsageError for a bad address, MbError when the port cannot be bound
 */
export async function startMetricsServer(options: {listen: string; sources?: MetricsSources; metrics?: ServeMetrics; source?: MetricsSource}): Promise<MetricsServer> {
  const {host, port} = parseListen(options.listen, '--metrics-listen', 9100)
  const metrics = options.source ? options.metrics : (options.metrics ?? createServeMetrics(options.sources))
  const source: MetricsSource = options.source ?? metrics!.registry
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') {
      source.metrics().then(
        (text) => {
          res.writeHead(200, {'Content-Type': source.contentType, 'Cache-Control': 'no-store'})
          res.end(req.method === 'HEAD' ? undefined : text)
        },
        (error: Error) => {
          res.writeHead(500, {'Content-Type': 'text/plain; charset=utf-8'})
          res.end(`metrics collection failed: ${error.message}\n`)
        },
      )
      return
    }
    res.writeHead(404, {'Content-Type': 'text/plain; charset=utf-8'})
    res.end('Not found: metrics are at /metrics\n')
  })
  let address: AddressInfo
  try {
    address = await listenOn(server, {host, port})
  } catch (error) {
    throw new MbError(`Cannot listen for metrics on ${options.listen}: ${(error as Error).message}. Pick a free port with --metrics-listen.`, {code: 'LISTEN_FAILED', cause: error})
  }
  return {
    url: httpUrl(address),
    port: address.port,
    metrics,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

/**
 * In a `--workers` worker: answers the cluster primary's metrics requests (over the cluster
 * IPC channel) with `registry`, instead of listening itself.
 */
export function exposeToClusterPrimary(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry])
  new AggregatorRegistry() // installs the worker's IPC listener (idempotent)
}

/**
 * In the `--workers` cluster primary: the metrics listener at `listen`, answering every
 * scrape with the aggregate of all workers' metrics (see the module doc). A worker that does
 * not answer within 5 s fails the scrape with 500.
 * @throws UsageError for a bad address, MbError when the port cannot be bound
 */
export async function startClusterMetricsServer(listen: string): Promise<MetricsServer> {
  const aggregator = new AggregatorRegistry()
  return startMetricsServer({listen, source: {contentType: aggregator.contentType, metrics: () => aggregator.clusterMetrics()}})
}
