/**
 * A mirror behind signed URLs (src/lib/sign.ts), against a real nginx with `secure_link`: it
 * refuses unsigned URLs (403) and expired ones (410). mb signs what it hands out for that
 * mirror (the redirect, the meta4) and what it requests there itself (the scan's directory
 * listings, the probe), so the mirror is scanned, probed up and used; bad signing settings are
 * refused without echoing the secret.
 */
import {cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {compileSigner} from '../../src/lib/sign.js'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const SECRET = 'a-mirror-secret-of-32-characters'

describe(`a mirror behind signed URLs (nginx secure_link) (${backend})`, function () {
  this.timeout(120_000)
  let tdb: TestDatabase
  let work: string
  let root: string
  let config: string
  let secretFile: string
  let nginx: RunningServer | undefined
  let serve: ServeProcess | undefined
  const big = Buffer.alloc(300_000, 'b')

  async function run(args: string[]) {
    const result = await mb([...args, '--config', config], {env: tdb.env})
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0)
    return result
  }

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    work = mkdtempSync(join(tmpdir(), 'mb-signed-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'pub', 'sub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'big.iso'), big)
    writeFileSync(join(root, 'pub', 'sub', 'other.iso'), Buffer.alloc(200_000, 'o'))
    cpSync(root, join(work, 'mirror'), {recursive: true})
    secretFile = join(work, 'secret')
    writeFileSync(secretFile, `${SECRET}\n`)
    config = join(work, 'mb.yaml')
    writeFileSync(config, `root: ${root}\nserve:\n  poll_seconds: 0.5\nprobe:\n  timeout: 3\n  connect_timeout: 2\n`)
    nginx = await startNginx({
      root: join(work, 'mirror'),
      autoindex: 'json',
      serverConfig: `secure_link $arg_md5,$arg_expires; secure_link_md5 "$secure_link_expires$uri ${SECRET}"; if ($secure_link = "") { return 403; } if ($secure_link = "0") { return 410; }`,
    })
    tdb = await createTestDatabase()
    await run(['index', '--hashes'])
  })

  after(async () => {
    await serve?.stop()
    await nginx?.stop()
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('refuses bad signing settings with the flag and without echoing the secret', async () => {
    const base = ['mirror', 'add', 'bad.test', '--http-url', nginx!.url, '--country', 'DE', '--no-probe', '--config', config]
    const scheme = await mb([...base, '--sign', 'akamai', '--sign-secret-file', secretFile], {env: tdb.env})
    expect(scheme.code).to.equal(2)
    expect(scheme.stderr).to.contain('Invalid --sign "akamai": expected nginx_secure_link_md5')
    const shortFile = join(work, 'short')
    writeFileSync(shortFile, 'tooshort-secret\n')
    const short = await mb([...base, '--sign', 'nginx_secure_link_md5', '--sign-secret-file', shortFile], {env: tdb.env})
    expect(short.code).to.equal(2)
    expect(short.stderr).to.contain('the secret has 15 characters; use at least 16').and.not.to.contain('tooshort-secret')
    const none = await mb([...base, '--sign', 'nginx_secure_link_md5'], {env: tdb.env})
    expect(none.code).to.equal(2)
    expect(none.stderr).to.contain('needs the secret the mirror checks: give --sign-secret-file FILE')
    const list = await run(['mirror', 'list', '--json'])
    expect(list.json().map((m: any) => m.identifier)).to.not.include('bad.test')
  })

  it('the mirror refuses unsigned and expired URLs', async () => {
    expect((await fetch(`${nginx!.url}pub/big.iso`)).status).to.equal(403)
    const sign = compileSigner('nginx_secure_link_md5', SECRET, 60)!
    const expired = sign(`${nginx!.url}pub/big.iso`, Date.now() / 1000 - 3600)
    expect((await fetch(expired)).status).to.equal(410)
    const valid = sign(`${nginx!.url}pub/big.iso`)
    expect((await fetch(valid)).status).to.equal(200)
  })

  it('scans and probes sign their requests: the mirror holds both files and is up', async () => {
    await run(['mirror', 'add', 'signed.test', '--http-url', nginx!.url, '--country', 'DE', '--no-probe', '--sign', 'nginx_secure_link_md5', '--sign-secret-file', secretFile])
    const shown = (await run(['mirror', 'show', 'signed.test', '--json'])).json()
    expect(shown).to.include({sign_scheme: 'nginx_secure_link_md5', sign_ttl_seconds: 21600})
    expect(JSON.stringify(shown)).to.not.contain(SECRET)
    const scan = (await run(['scan', 'signed.test', '--json'])).json().mirrors[0]
    expect(scan).to.include({ok: true, matched: 2})
    const probe = (await run(['probe', 'signed.test', '--json'])).json().mirrors[0]
    expect(probe.up, JSON.stringify(probe)).to.equal(true)
  })

  it('mb serve redirects to a signed URL that the mirror serves, and the meta4 lists signed URLs', async () => {
    serve = await startServe(['--config', config], tdb.env)
    const res = await request(serve.port, '/pub/big.iso')
    expect(res.status).to.equal(302)
    const location = String(res.headers.location)
    expect(location).to.match(/\/pub\/big\.iso\?md5=[A-Za-z0-9_-]{22}&expires=\d+$/)
    const body = Buffer.from(await (await fetch(location)).arrayBuffer())
    expect(body.equals(big)).to.equal(true)
    const meta4 = await (await fetch(`http://127.0.0.1:${serve.port}/pub/sub/other.iso.meta4`)).text()
    const url = /<url[^>]*>([^<]*md5=[^<]+)<\/url>/.exec(meta4)?.[1].replace(/&amp;/g, '&')
    expect(url, meta4).to.match(/\/pub\/sub\/other\.iso\?md5=/)
    expect((await fetch(url!)).status).to.equal(200)
  })
})
