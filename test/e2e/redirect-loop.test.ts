// @store-independent: a mirror that redirects back to mb, with real nginx and curl
/**
 * A redirect loop: a mirror (real nginx) answers every request with a 302 straight back to
 * mb. curl, following redirects as a user does, comes back within the second; mb tells that
 * bounce from a retry by its timing (src/lib/serve/delivery/retry.ts, `BOUNCE_SECONDS`), sends
 * the client to the next mirror of its tier, counts it in `mb_redirect_loops_total{mirror}`
 * and logs it with the mirror's name; the client gets the file.
 */
import {execFile} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {expect} from 'chai'
import {requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, seedFiles, type TestDatabase} from '../helpers/db.js'
import {parsePrometheus} from '../helpers/prometheus.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const run = promisify(execFile)

describe(`a mirror that redirects back to mb (${backend})`, function () {
  this.timeout(120_000)
  let tdb: TestDatabase
  let work: string
  let root: string
  const nginx: RunningServer[] = []
  let serve: ServeProcess | undefined
  const body = Buffer.alloc(50_000, 'l')

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'curl', 'curl')
    work = mkdtempSync(join(tmpdir(), 'mb-redirect-loop-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'pub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'file.iso'), body)
    tdb = await createTestDatabase()
    const config = join(work, 'mb.yaml')
    writeFileSync(config, 'serve:\n  poll_seconds: 0.2\n')
    serve = await startServe(['--root', root, '--config', config, '--retry-window', '600', '--metrics-listen', '127.0.0.1:0'], tdb.env)
    const looping = await startNginx({root, serverConfig: `return 302 http://127.0.0.1:${serve.port}$request_uri;`})
    const good = await startNginx({root})
    nginx.push(looping, good)
    const database = await tdb.open()
    try {
      const ids: number[] = []
      // The looping mirror carries nearly all the weight: it is the first choice.
      for (const [identifier, server, score] of [
        ['loop.test', looping, 100_000],
        ['good.test', good, 1],
      ] as const) {
        ids.push((await database.db.insertInto('mirror').values({identifier, http_url: server.url, country: 'DE', continent: 'EU', score}).returning('id').executeTakeFirstOrThrow()).id)
      }
      await seedFiles(database, root, ['pub/file.iso'], ids)
    } finally {
      await database.close()
    }
    await new Promise((r) => setTimeout(r, 1000))
  })

  after(async () => {
    await serve?.stop()
    await Promise.all(nginx.map((n) => n.stop()))
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('curl gets the file from the next mirror; the loop is counted and logged with the mirror name', async () => {
    const out = join(work, 'got.iso')
    const curl = await run('curl', ['-sfL', '--max-redirs', '10', '-o', out, '-w', '%{num_redirects} %{url_effective}', `http://127.0.0.1:${serve!.port}/pub/file.iso`])
    const [redirects, effective] = curl.stdout.split(' ')
    expect(Number(redirects)).to.equal(3) // mb -> loop.test -> mb -> good.test
    expect(effective).to.equal(`${nginx[1].url}pub/file.iso`)
    const metricsUrl = /"metrics":"(http:\/\/[^"]+)"/.exec(serve!.output())![1]
    const families = parsePrometheus(await (await fetch(`${metricsUrl}/metrics`)).text())
    const loops = families.find((f) => f.name === 'mb_redirect_loops_total')?.metrics.find((m) => m.labels?.mirror === 'loop.test')?.value
    expect(Number(loops)).to.equal(1)
    expect(serve!.output()).to.contain('redirect loop: mirror loop.test sent a client straight back for /pub/file.iso')
  })
})
