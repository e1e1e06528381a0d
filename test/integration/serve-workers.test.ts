import {expect} from 'chai'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {mb} from '../helpers/cli.js'
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
