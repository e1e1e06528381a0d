import {expect} from 'chai'
import {mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {spawn} from 'node:child_process'
import {BIN, hermeticEnv, mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, seedOneMirror, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'
import {freePort} from '../helpers/servers.js'

describe(`mb serve --workers (${backend})`, () => {
  let tdb: TestDatabase
  let root: string
  let serve: ServeProcess | undefined

  before(async () => {
    tdb = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-serve-workers-'))
    await seedOneMirror(tdb, {path: 'a.iso', size: 8000, mtime: 0})
  })

  after(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  if (backend === 'postgres') {
    it('runs two workers on one port and stops them all on SIGTERM', async () => {
      serve = await startServe(['--root', root, '--workers', '2'], tdb.env)
      for (let i = 0; i < 600 && (serve.output().match(/"msg":"listening"/g) ?? []).length < 2; i++) await sleep(100)
      for (let i = 0; i < 20; i++) expect((await request(serve.port, '/a.iso')).headers.location).to.equal('http://m.example/a.iso')
      await serve.stop()
      expect(serve.child.exitCode).to.equal(0)
      expect(serve.output()).to.include('primary started workers')
      expect(serve.output().match(/"msg":"listening"/g)).to.have.length(2)
      expect(serve.output()).to.include('primary stopped')
    })

    it('--workers 2 under socket activation: the primary takes the socket systemd passed and both workers serve on it', async function () {
      requireBinary(this, 'systemd-socket-activate', 'systemd')
      // The indexed version on disk, so that every worker's disk check agrees with the index; --retry-window 0: the
      // 40 requests of one address for one file are not retries.
      writeFileSync(join(root, 'a.iso'), Buffer.alloc(8000))
      utimesSync(join(root, 'a.iso'), 0, 0)
      const port = await freePort()
      // Like systemd, systemd-socket-activate passes the service only the variables it is given (Environment=).
      const passed = ['PATH', 'HOME', 'MB_CONFIG', 'XDG_CONFIG_HOME', ...Object.keys(tdb.env)].flatMap((name) => ['-E', name])
      const args = ['-l', `127.0.0.1:${port}`, ...passed, process.execPath, BIN, 'serve', '--root', root, '--workers', '2', '--listen', '127.0.0.1:1', '--retry-window', '0']
      const holder = spawn('systemd-socket-activate', args, {env: hermeticEnv(tdb.env), stdio: ['ignore', 'pipe', 'pipe'], detached: true})
      let output = ''
      holder.stdout!.on('data', (d) => (output += d))
      holder.stderr!.on('data', (d) => (output += d))
      const exited = new Promise<number | null>((resolve) => holder.once('exit', (code) => resolve(code)))
      try {
        for (let i = 0; i < 100 && !output.includes(`Listening on 127.0.0.1:${port}`); i++) await sleep(100)
        // The first connection starts the service; it waits in the socket's queue meanwhile.
        expect((await request(port, '/a.iso')).headers.location, output).to.equal('http://m.example/a.iso')
        for (let i = 0; i < 600 && (output.match(/"msg":"listening"/g) ?? []).length < 2; i++) await sleep(100)
        const listening = output.split('\n').filter((line) => line.includes('"msg":"listening"'))
        expect(listening, output).to.have.length(2)
        for (const line of listening) expect(JSON.parse(line)).to.include({socket: 'systemd', url: `http://127.0.0.1:${port}`})
        const answers = await Promise.all(Array.from({length: 40}, () => request(port, '/a.iso')))
        expect(answers.map((a) => a.status)).to.deep.equal(Array(40).fill(302))
      } finally {
        process.kill(holder.pid!, 'SIGTERM')
      }
      expect(await exited, output).to.equal(0)
      expect(output).to.include('primary stopped')
    })

    it('--metrics-listen: the primary answers the sum over both workers', async () => {
      const metricsPort = await freePort()
      serve = await startServe(['--root', root, '--workers', '2', '--metrics-listen', `127.0.0.1:${metricsPort}`], tdb.env)
      for (let i = 0; i < 600 && (serve.output().match(/"msg":"listening"/g) ?? []).length < 2; i++) await sleep(100)
      // One connection per request: the kernel spreads them over the workers.
      for (let i = 0; i < 30; i++) expect((await request(serve.port, '/a.iso')).status).to.equal(302)
      const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      expect(res.status).to.equal(200)
      const text = await res.text()
      expect(text).to.match(/^mb_serve_processes 2$/m)
      const redirects = [...text.matchAll(/^mb_requests_total\{outcome="redirect",realm="[a-z]+"\} (\d+)$/gm)].reduce((sum, m) => sum + Number(m[1]), 0)
      expect(redirects).to.equal(30)
      expect(text).to.match(/^mb_database_up 1$/m)
      await serve.stop()
      expect(serve.child.exitCode).to.equal(0)
      expect(serve.output()).to.include('aggregated over the workers')
    })
  } else {
    it('refuses --workers on the embedded store with a usage error', async () => {
      const r = await mb(['serve', '--root', root, '--workers', '2', '--listen', '127.0.0.1:0'], {env: tdb.env})
      expect(r.code).to.equal(2)
      expect(r.stderr).to.include('--workers needs PostgreSQL')
    })
  }
})
