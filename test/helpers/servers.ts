/**
 * Real servers for end-to-end tests: nginx, lighttpd and vsftpd on random loopback ports, each
 * from its own temp config directory, stopped by PID. Plus two fault servers: a port that
 * refuses connections and a TCP server that accepts and never answers.
 *
 * Usage (mocha):
 *
 *   let web: RunningServer
 *   before(async function () { requireBinary(this, 'nginx', 'nginx-light'); web = await startNginx({root, autoindex: 'json'}) })
 *   after(() => web?.stop())
 *
 * Every server binds 127.0.0.1 only and runs in the foreground (no daemonising), so `stop()`
 * (SIGTERM, then SIGKILL after 5 s) ends it and everything it forked that holds no client.
 * Times are shown in UTC (TZ=UTC), so listings are comparable with fs mtimes.
 */
import {spawn, spawnSync, type ChildProcess} from 'node:child_process'
import {existsSync} from 'node:fs'
import {mkdtemp, mkdir, readFile, rm, writeFile} from 'node:fs/promises'
import {createServer, connect, type Server, type Socket} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

/** A server process the tests started: stopped by its PID. */
export interface RunningProcess {
  /** PID of the server's main process. */
  pid: number
  /** The temp directory holding its config and logs (removed by stop()). */
  dir: string
  /** Its error log so far (for assertion messages). */
  log(): Promise<string>
  /** SIGTERM, wait for exit (SIGKILL after 5 s), remove the temp directory. Idempotent. */
  stop(): Promise<void>
}

/** A server on one port of loopback. */
export interface RunningServer extends RunningProcess {
  /** Loopback address its URL names (127.0.0.1 unless another was asked for). */
  host: string
  port: number
  /** Base URL, e.g. `http://127.0.0.1:40123/` or `ftp://127.0.0.1:40124/`. */
  url: string
}

/** A free TCP port on 127.0.0.1 (the OS picks it; it may be taken again before use, so callers retry). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as {port: number}).port
      srv.close(() => resolve(port))
    })
  })
}

/** A self-signed certificate for 127.0.0.1 / localhost, written by the openssl CLI into `dir`. */
async function selfSignedCert(dir: string): Promise<{cert: string; key: string}> {
  const cert = join(dir, 'cert.pem')
  const key = join(dir, 'key.pem')
  const r = spawnSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost'],
    {encoding: 'utf8'},
  )
  if (r.status !== 0) throw new Error(`openssl failed: ${r.stderr}`)
  return {cert, key}
}

interface Launch {
  command: string
  args: string[]
  logFile: string
  scheme: 'http' | 'https' | 'ftp'
  /**
   * A file the server writes only once it has bound its port (nginx's pid file). Without it, a
   * connection accepted on the port counts, which another process holding that port would also
   * accept (ports are drawn by `freePort` and bound later, and files run in parallel).
   */
  readyFile?: string
}

/**
 * Spawns `spec.command` in `dir` and waits (10 s at most) until `ready()` says it serves.
 * @throws when it exits first or is not ready in time (then it is killed), with its output and log
 */
async function spawnReady(dir: string, spec: Omit<Launch, 'scheme'>, ready: () => Promise<boolean>, where: string): Promise<RunningProcess> {
  const child: ChildProcess = spawn(spec.command, spec.args, {cwd: dir, env: {...process.env, TZ: 'UTC'}, stdio: ['ignore', 'pipe', 'pipe']})
  let output = ''
  child.stdout?.on('data', (d) => (output += d))
  child.stderr?.on('data', (d) => (output += d))
  let exited = false
  const exitPromise = new Promise<void>((resolve) =>
    child.once('exit', () => {
      exited = true
      resolve()
    }),
  )
  child.once('error', (e) => (output += String(e)))
  const log = async () => output + (await readFile(spec.logFile, 'utf8').catch(() => ''))
  for (let i = 0; i < 200 && !exited; i++) {
    if (await ready()) break
    await new Promise((r) => setTimeout(r, 50))
  }
  if (exited || child.pid === undefined) throw new Error(`${spec.command} did not start ${where}: ${await log()}`)
  if (!(await ready())) {
    child.kill('SIGKILL')
    await exitPromise
    throw new Error(`${spec.command} did not listen ${where} within 10 s: ${await log()}`)
  }
  let stopped = false
  return {
    pid: child.pid,
    dir,
    log,
    async stop() {
      if (stopped) return
      stopped = true
      if (!exited) {
        child.kill('SIGTERM')
        const timer = setTimeout(() => child.kill('SIGKILL'), 5000)
        await exitPromise
        clearTimeout(timer)
      }
      await rm(dir, {recursive: true, force: true})
    },
  }
}

/** {@link spawnReady} for a server on 127.0.0.1:`port`: ready once it accepts a connection there (and has written `spec.readyFile`). */
async function launch(dir: string, port: number, spec: Launch): Promise<RunningServer> {
  const ready = async () => (spec.readyFile === undefined || existsSync(spec.readyFile)) && (await canConnect(port))
  const server = await spawnReady(dir, spec, ready, `on port ${port}`)
  return {...server, host: '127.0.0.1', port, url: `${spec.scheme}://127.0.0.1:${port}/`}
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({host: '127.0.0.1', port})
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

/** Waits until something accepts connections on 127.0.0.1:`port` (a daemon started by hand), polling every 100 ms; throws after `tries` polls. */
export async function waitForPort(port: number, tries = 200): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await canConnect(port)) return
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`nothing listens on 127.0.0.1:${port}`)
}

/** Runs `start` up to `attempts` times, until it does not throw; then throws its last error. */
async function withRetries<T>(attempts: number, start: () => Promise<T>): Promise<T> {
  let lastError: unknown
  for (let attempt = 0; attempt < attempts; attempt++) {
    try {
      return await start()
    } catch (error) {
      lastError = error
    }
  }
  throw lastError
}

/** Starts a server, retrying on another port when the chosen one was taken meanwhile. */
async function withPortRetry(fixedPort: number | undefined, start: (port: number) => Promise<RunningServer>): Promise<RunningServer> {
  return fixedPort ? start(fixedPort) : withRetries(4, async () => start(await freePort()))
}

export interface NginxOptions {
  /** Document root served at `/`. */
  root: string
  /** Directory index format (`autoindex on` with `autoindex_format html|json`); default: no autoindex. */
  autoindex?: 'html' | 'json' | 'xml'
  /** Fixed port (default: a free random one). */
  port?: number
  /** Serve HTTPS with a self-signed certificate for 127.0.0.1. */
  https?: boolean
  /** Extra directives inside `server { }`, e.g. `location = /old/ { return 301 ftp://127.0.0.1/; }`. */
  serverConfig?: string
  /** Extra directives inside `http { }`. */
  httpConfig?: string
  /**
   * Another loopback address (e.g. `127.0.0.2`) it also listens on, which its `url` and `host`
   * then name: clients that tell servers apart by host name (aria2c keeps one connection per
   * host by default) see mirrors on different ports of 127.0.0.1 as one.
   */
  hostname?: string
}

/**
 * An nginx.conf for a test nginx in the foreground (`daemon off`, one worker), its pid, logs
 * and temp files under `dir`, with `http` (types, servers) inside the `http { }` block. As
 * root the worker runs as root too, so it can read trees in 0700 temp directories.
 */
function nginxConf(dir: string, http: string): string {
  return `daemon off;
master_process on;
worker_processes 1;
${process.getuid?.() === 0 ? 'user root root;' : ''}
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 512; }
http {
  access_log off;
  default_type application/octet-stream;
  client_body_temp_path ${dir}/tmp/body;
  proxy_temp_path ${dir}/tmp/proxy;
  fastcgi_temp_path ${dir}/tmp/fastcgi;
  uwsgi_temp_path ${dir}/tmp/uwsgi;
  scgi_temp_path ${dir}/tmp/scgi;
  ${http}
}
`
}

/**
 * Starts nginx (nginx-light) in the foreground (`daemon off`, one worker) on 127.0.0.1. As
 * root the worker runs as root too, so it can read trees in 0700 temp directories.
 * `autoindex_localtime` stays off: HTML dates are in UTC.
 */
export async function startNginx(options: NginxOptions): Promise<RunningServer> {
  return withPortRetry(options.port, async (port) => {
    const dir = await mkdtemp(join(tmpdir(), 'mb-nginx-'))
    await mkdir(join(dir, 'tmp'))
    const tls = options.https ? await selfSignedCert(dir) : undefined
    const autoindex = options.autoindex ? `autoindex on; autoindex_format ${options.autoindex};` : ''
    const conf = nginxConf(
      dir,
      `types { text/html html; text/plain txt; application/json json; }
  ${options.httpConfig ?? ''}
  server {
    listen 127.0.0.1:${port}${tls ? ' ssl' : ''};
    ${options.hostname ? `listen ${options.hostname}:${port}${tls ? ' ssl' : ''};` : ''}
    ${tls ? `ssl_certificate ${tls.cert}; ssl_certificate_key ${tls.key};` : ''}
    root ${JSON.stringify(options.root)};
    location / { ${autoindex} }
    ${options.serverConfig ?? ''}
  }`,
    )
    await writeFile(join(dir, 'nginx.conf'), conf)
    const server = await launch(dir, port, {...nginxLaunch(dir), scheme: tls ? 'https' : 'http'}).catch(async (e) => {
      await rm(dir, {recursive: true, force: true})
      throw e
    })
    return options.hostname ? {...server, host: options.hostname, url: server.url.replace('127.0.0.1', options.hostname)} : server
  })
}

/** nginx's command for the config in `dir`: foreground, up once its pid file exists (written after every `listen` is bound). */
function nginxLaunch(dir: string): Omit<Launch, 'scheme'> {
  return {command: 'nginx', args: ['-p', dir, '-c', join(dir, 'nginx.conf')], logFile: join(dir, 'error.log'), readyFile: join(dir, 'nginx.pid')}
}

/**
 * Starts nginx from the `http { }` body that `render` writes, with as many servers and
 * loopback addresses as it likes, on ports it draws with `port()`. nginx writes its pid file
 * only once every `listen` is bound, so that file says it is up (a connection would not: a
 * process holding a drawn port accepts one too). A port taken between its draw and nginx's
 * bind makes nginx exit: `render` runs again on new ports, up to four times.
 * @throws nginx's output and log, after the fourth failure
 */
export async function startNginxFrom(render: (port: () => Promise<number>) => Promise<string>): Promise<RunningProcess> {
  return withRetries(4, async () => {
    const dir = await mkdtemp(join(tmpdir(), 'mb-nginx-'))
    await mkdir(join(dir, 'tmp'))
    await writeFile(join(dir, 'nginx.conf'), nginxConf(dir, await render(freePort)))
    const spec = nginxLaunch(dir)
    return spawnReady(dir, spec, async () => existsSync(spec.readyFile!), 'from its config').catch(async (e) => {
      await rm(dir, {recursive: true, force: true})
      throw e
    })
  })
}

export interface LighttpdOptions {
  root: string
  /** mod_dirlisting on (default true). */
  dirListing?: boolean
  port?: number
  /** Extra lighttpd.conf lines. */
  extraConfig?: string
}

/** Starts lighttpd in the foreground (`-D`) on 127.0.0.1 with mod_dirlisting (UTF-8, UTC dates). */
export async function startLighttpd(options: LighttpdOptions): Promise<RunningServer> {
  return withPortRetry(options.port, async (port) => {
    const dir = await mkdtemp(join(tmpdir(), 'mb-lighttpd-'))
    const conf = `server.document-root = ${JSON.stringify(options.root)}
server.bind = "127.0.0.1"
server.port = ${port}
server.modules = ("mod_dirlisting")
server.errorlog = "${dir}/error.log"
server.pid-file = "${dir}/lighttpd.pid"
dir-listing.activate = "${options.dirListing === false ? 'disable' : 'enable'}"
dir-listing.encoding = "utf-8"
${options.extraConfig ?? ''}
`
    await writeFile(join(dir, 'lighttpd.conf'), conf)
    return launch(dir, port, {command: 'lighttpd', args: ['-D', '-f', join(dir, 'lighttpd.conf')], logFile: join(dir, 'error.log'), scheme: 'http'}).catch(async (e) => {
      await rm(dir, {recursive: true, force: true})
      throw e
    })
  })
}

export interface VsftpdOptions {
  /** Served as the anonymous root (chrooted when run as root). */
  root: string
  port?: number
  /** Explicit FTPS (AUTH TLS) with a self-signed certificate; `'required'` refuses plain logins. */
  tls?: boolean | 'required'
  /** Extra vsftpd.conf lines. */
  extraConfig?: string
}

/**
 * Starts vsftpd in the foreground (`listen=YES`, `background=NO`) on 127.0.0.1: anonymous,
 * read-only, `anon_root` = `root`, passive ports chosen by the OS, LIST times in UTC. As
 * root vsftpd chroots the session into `root` and drops to the `ftp` user, as on a real mirror;
 * otherwise it runs as the launching user without chroot.
 */
export async function startVsftpd(options: VsftpdOptions): Promise<RunningServer> {
  return withPortRetry(options.port, async (port) => {
    const dir = await mkdtemp(join(tmpdir(), 'mb-vsftpd-'))
    await mkdir(join(dir, 'empty'), {mode: 0o755})
    const isRoot = process.getuid?.() === 0
    const tls = options.tls ? await selfSignedCert(dir) : undefined
    const lines = [
      'listen=YES',
      'listen_ipv6=NO',
      'listen_address=127.0.0.1',
      `listen_port=${port}`,
      'background=NO',
      'anonymous_enable=YES',
      'local_enable=NO',
      'write_enable=NO',
      `anon_root=${options.root}`,
      'no_anon_password=YES',
      'pasv_enable=YES',
      'pasv_address=127.0.0.1',
      'seccomp_sandbox=NO',
      `secure_chroot_dir=${dir}/empty`,
      'xferlog_enable=NO',
      `vsftpd_log_file=${dir}/vsftpd.log`,
      'use_localtime=NO',
      'connect_from_port_20=NO',
      'max_per_ip=50',
      isRoot ? '' : 'run_as_launching_user=YES',
    ]
    if (tls) {
      lines.push(
        'ssl_enable=YES',
        `rsa_cert_file=${tls.cert}`,
        `rsa_private_key_file=${tls.key}`,
        'allow_anon_ssl=YES',
        `force_anon_logins_ssl=${options.tls === 'required' ? 'YES' : 'NO'}`,
        `force_anon_data_ssl=${options.tls === 'required' ? 'YES' : 'NO'}`,
        'require_ssl_reuse=NO',
        'ssl_ciphers=HIGH',
      )
    }
    if (options.extraConfig) lines.push(options.extraConfig)
    await writeFile(join(dir, 'vsftpd.conf'), lines.filter(Boolean).join('\n') + '\n', {mode: 0o600})
    return launch(dir, port, {command: 'vsftpd', args: [join(dir, 'vsftpd.conf')], logFile: join(dir, 'vsftpd.log'), scheme: 'ftp'}).catch(async (e) => {
      await rm(dir, {recursive: true, force: true})
      throw e
    })
  })
}

/** A loopback port nothing listens on (connections are refused). */
export async function refusedPort(): Promise<number> {
  return freePort()
}

/** A TCP server on 127.0.0.1 that accepts connections and never sends a byte ("black hole"). */
export async function startSilentServer(): Promise<{port: number; url(scheme: string): string; stop(): Promise<void>}> {
  const sockets = new Set<Socket>()
  const server: Server = createServer((s) => {
    sockets.add(s)
    s.on('error', () => {})
    s.on('close', () => sockets.delete(s))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as {port: number}).port
  return {
    port,
    url: (scheme) => `${scheme}://127.0.0.1:${port}/`,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}
