import {Flags} from '@oclif/core'
import {BaseCommand} from '../base-command.js'
import {configFileLabel, loadConfig} from '../lib/config/index.js'
import {checkServePaths} from '../lib/redirector/preflight.js'
import {runServe} from '../lib/redirector/run.js'

export default class Serve extends BaseCommand<typeof Serve> {
  static override description = `Run the redirector: answer downloads with a 302 to the best mirror, or deliver from the origin

Serves from an in-memory snapshot of mirrors and the file index, kept fresh through LISTEN/NOTIFY and polling; keeps serving when the database goes away. Logs events as JSON lines to stdout (one line per request too at --log-level debug; --access-log writes the per-request log).

Signals: SIGINT/SIGTERM drain the connections, write the pending counts and stop. SIGHUP reloads the config file (selection, trusted proxies, connection limits), reopens the GeoIP/ASN databases and the access log, and never stops the server. With --workers N, SIGUSR2 replaces the workers one at a time (new code and settings after an upgrade) without refusing a connection. Without systemd, --pid-file FILE gives \`mb serve reload\`, \`mb serve stop\` and \`mb serve upgrade\` a handle on the server to send these signals through. Answers carry \`Server: mb/VERSION\`.`

  static override examples = [
    '<%= config.bin %> serve --root /srv/pub --listen 127.0.0.1:8080',
    '<%= config.bin %> serve --root /srv/pub --listen [::]:80 --geoip /var/lib/GeoIP/GeoLite2-City.mmdb --asn-db /var/lib/GeoIP/GeoLite2-ASN.mmdb',
    '<%= config.bin %> serve --root /srv/pub --trusted-proxy 127.0.0.1/32 --trusted-proxy ::1/128 --min-size 8192',
    'MB_DATABASE_URL=postgres://mb@db/mb <%= config.bin %> serve --root /srv/pub --listen 0.0.0.0:8080 --log-level warn',
    '<%= config.bin %> serve --root /srv/pub --access-log /var/log/mb/access.log --metrics-listen 127.0.0.1:9100 --stats-flush-interval 30',
    '<%= config.bin %> serve --root /srv/pub --probe-interval 300',
    '<%= config.bin %> serve --root /srv/pub --pid-file /run/mb/serve.pid --workers 4',
    '<%= config.bin %> serve --root /srv/pub --watch --push-after 120',
  ]

  static override flags = {
    root: Flags.string({description: 'origin tree to deliver from (env: MB_ROOT)'}),
    listen: Flags.string({description: 'HOST:PORT to listen on, [V6]:PORT for IPv6 (env: MB_LISTEN; default 127.0.0.1:8080); a socket from systemd (mb-serve.socket) takes its place'}),
    geoip: Flags.string({description: 'GeoIP City/Country .mmdb file; repeat for IPv4+IPv6 files (default: the bundled GeoLite2 City data)', multiple: true}),
    'asn-db': Flags.string({description: 'GeoLite2-ASN .mmdb file for the AS pool'}),
    'trusted-proxy': Flags.string({description: 'CIDR of a reverse proxy whose X-Forwarded-For/-Proto is believed; repeatable', multiple: true}),
    'min-size': Flags.integer({description: 'files smaller than this many bytes are delivered from the origin (default 4096)', min: 0}),
    watch: Flags.boolean({description: 'watch the origin tree; changed files are served locally until rescanned', allowNo: true}),
    'push-after': Flags.integer({
      description: 'with --watch: once the origin has been quiet SECONDS after a change, index it and push it to every mirror with a push URL (as `mb push --all`; OpenTTD waits 120)',
      min: 0,
    }),
    'retry-window': Flags.integer({
      description: 'seconds a client address asking again for the same file is sent to the next mirror (select.retry_window_seconds; default 600, 0 = off)',
      min: 0,
    }),
    workers: Flags.integer({description: 'worker processes (node:cluster; PostgreSQL only)', min: 1, max: 64}),
    'log-level': Flags.string({description: 'log level', options: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']}),
    'access-log': Flags.string({description: "write an access log in Apache combined format (+ mirror and realm) to FILE, or '-' for stdout; reopened on SIGHUP"}),
    'pid-file': Flags.string({description: 'write the process id to FILE once listening (removed on exit), for `mb serve reload|stop|upgrade`; refuses to start while FILE names a running mb serve'}),
    'metrics-listen': Flags.string({description: 'serve Prometheus metrics at http://HOST:PORT/metrics on a separate listener'}),
    'stats-flush-interval': Flags.string({description: 'seconds a download count may wait in memory before it is written to the database (default 10)'}),
    stats: Flags.boolean({description: 'count downloads for `mb stats` (default on)', allowNo: true}),
    'probe-interval': Flags.integer({description: 'probe the mirrors every SECONDS in the background, as `mb probe --all` would (one replica at a time on PostgreSQL; default off)', min: 0}),
    'content-interval': Flags.integer({
      description: "check the mirrors' copies whole, a budget's share every SECONDS in the background, as `mb probe --content --all` would (probe.content_interval_seconds; default 900, 0 = off)",
      min: 0,
    }),
  }

  protected override configFlags(): Record<string, unknown> {
    const f = this.flags
    return {
      root: f.root,
      'serve.listen': f.listen,
      geoip: f.geoip,
      asn_db: f['asn-db'],
      trusted_proxies: f['trusted-proxy'],
      'select.min_size': f['min-size'],
      'serve.watch': f.watch,
      'serve.workers': f.workers,
      'select.retry_window_seconds': f['retry-window'],
      'serve.push_after': f['push-after'],
      log_level: f['log-level'],
      'serve.access_log': f['access-log'],
      'serve.metrics_listen': f['metrics-listen'],
      'serve.pid_file': f['pid-file'],
      'stats.flush_interval_seconds': f['stats-flush-interval'],
      'stats.enabled': f.stats,
      'serve.probe_interval': f['probe-interval'],
      'probe.content_interval_seconds': f['content-interval'],
    }
  }

  public async run(): Promise<{url: string; stopped: boolean}> {
    const f = this.flags
    checkServePaths(this.mbConfig)
    // SIGHUP reads the same file, environment and flags again (what BaseCommand read at start).
    const readConfig = () =>
      loadConfig({
        file: f.config,
        flags: {database_url: f['database-url'], data_dir: f['data-dir'], ...(f.quiet ? {log_level: 'error'} : {}), ...this.configFlags()},
        flagNames: {database_url: 'database-url', data_dir: 'data-dir', ...this.configFlagNames()},
      }).config
    this.debugStore()
    return runServe(this.mbConfig, {version: this.config.version, readConfig, configFile: configFileLabel(this.loadedConfig)})
  }
}
