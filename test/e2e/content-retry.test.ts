// @store-independent: a client's retry as a signal, against nginx mirrors, apt and wget2
/**
 * Client retries are a signal (issue 45), with `mb serve` on its defaults (bar the listen
 * address, the log level and a dnf repo to name): two nginx mirrors on loopback hold an apt
 * archive, a dnf repository and a 3 MiB file; `a` ranks first for every client (its prefix
 * holds them). The background content round at start checks every copy whole. Then `a`'s
 * copies of the .deb, the .rpm and the file are corrupted in place (same size and mtime, so
 * its scans would still match them), and one client retries each away from `a` (two GETs
 * of one path from one address within the retry window). Within 2 minutes each copy is
 * found corrupt and `a` is out of selection, `Link` alternatives, the meta4, the .torrent,
 * `mirrors.txt` and the dnf repo metalink; apt's and wget2's next runs then pass.
 */
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {randomBytes} from 'node:crypto'
import {execFile} from 'node:child_process'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {promisify} from 'node:util'
import {request} from 'node:http'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {writeFileSync} from 'node:fs'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {APT_DEB, APT_DEB_NAME, buildAptArchive, hermeticApt} from '../helpers/apt-archive.js'
import {corruptInPlace, sha256} from '../helpers/bad-world.js'
import {requireBinary} from '../helpers/cli.js'
import {runClient} from '../helpers/clients.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const run = promisify(execFile)
const RPM = 'fedora/42/x86_64/os/Packages/mb-hello-1.0-1.noarch.rpm'
const DEB = `debian/${APT_DEB}`
const FILE = 'pub/file.bin'
/** A GET of `path` from mb serve sent from `localAddress` (another loopback address is another client): the redirect's Location and Link headers. */
function headFrom(localAddress: string, path: string): Promise<{location: string; link: string}> {
  const url = new URL(serveUrl)
  return new Promise((resolve, reject) => {
    const req = request({host: url.hostname, port: url.port, path, localAddress}, (res) => {
      res.resume()
      const link = res.headers.link
      resolve({location: res.headers.location ?? '', link: Array.isArray(link) ? link.join(', ') : (link ?? '')})
    })
    req.on('error', reject)
    req.end()
  })
}
let serveUrl = ''

/** How long after the retries every list must leave the corrupt copies out (the target). */
const WITHIN_MS = 120_000

describe(`a client's retry away from a mirror checks that copy at once (${backend})`, function () {
  this.timeout(400_000)
  let test: TestDatabase
  let database: Database
  let work: string
  let root: string
  let serve: Serve
  const mirrors: Record<'a' | 'b', {tree: string; nginx: RunningServer; id: number}> = {} as never

  before(async function () {
    for (const [bin, pkg] of [
      ['apt-get', 'apt'],
      ['dpkg-scanpackages', 'dpkg-dev'],
      ['createrepo_c', 'createrepo-c'],
      ['wget2', 'wget2'],
      ['nginx', 'nginx-light'],
    ])
      requireBinary(this, bin, pkg)
    test = await createTestDatabase()
    database = await test.open()
    work = mkdtempSync(join(tmpdir(), 'mb-retry-check-'))
    root = join(work, 'origin')
    await buildAptArchive(work, root, {payloadBytes: 300 * 1024})
    const repo = join(root, 'fedora/42/x86_64/os')
    mkdirSync(join(repo, 'Packages'), {recursive: true})
    cpSync(new URL('../fixtures/rpm/mb-hello-1.0-1.noarch.rpm', import.meta.url).pathname, join(root, RPM))
    await run('createrepo_c', ['-q', repo])
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, FILE), randomBytes(3 * 1024 * 1024))
    await indexOrigin(database.db, root)
    await hashIndex(database, root, {jobs: 1})
    for (const name of ['a', 'b'] as const) {
      const tree = join(work, `mirror-${name}`)
      cpSync(root, tree, {recursive: true, preserveTimestamps: true})
      const nginx = await startNginx({root: tree, hostname: name === 'a' ? '127.0.0.2' : '127.0.0.3'})
      const row = await database.db
        .insertInto('mirror')
        .values({
          identifier: `${name}.mirror`,
          http_url: nginx.url,
          country: 'DE',
          continent: 'EU',
          up: true,
          range_ok: true,
          last_scan_ok_at: new Date(),
          prefixes: name === 'a' ? ['127.0.0.0/8'] : [],
        } as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      mirrors[name] = {tree, nginx, id: row.id}
    }
    await database.db
      .updateTable('file')
      .set({mirrors: [mirrors.a.id, mirrors.b.id]})
      .execute()
    serve = await startServe(ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0'}, log_level: 'silent', yum: {repos: [{repo: 'fedora-42', arch: 'x86_64', path: 'fedora/42/$arch/os'}]}}), {
      database,
    })
    serveUrl = serve.url
  })

  after(async () => {
    await serve?.close()
    for (const m of Object.values(mirrors)) await m.nginx.stop()
    await database?.close()
    await test?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  /** `apt-get update` then `apt-get download mb-hello` with a fresh state in `work/NAME`: the download's result (the update must pass). */
  async function aptIn(name: string) {
    const dir = join(work, name)
    mkdirSync(join(dir, 'dl'), {recursive: true})
    const apt = hermeticApt(dir, `${serve.url}/debian/mirrors.txt`)
    const update = await apt(['update'])
    expect(update.code, update.stderr).to.equal(0)
    return apt(['download', 'mb-hello'], {cwd: join(dir, 'dl')})
  }

  let clients = 0
  const lists = async () => {
    // A client that never asked before (an address of its own): the choice selection makes for it.
    const redirect = await headFrom(`127.0.1.${++clients}`, `/${FILE}`)
    return {
      location: redirect.location,
      links: redirect.link,
      meta4: await (await fetch(`${serve.url}/${FILE}.meta4`)).text(),
      torrent: Buffer.from(await (await fetch(`${serve.url}/${FILE}.torrent`)).arrayBuffer()).toString('latin1'),
      mirrorsTxt: await (await fetch(`${serve.url}/debian/mirrors.txt`)).text(),
      repoMetalink: await (await fetch(`${serve.url}/metalink?repo=fedora-42&arch=x86_64`)).text(),
    }
  }
  const wholeOnA = async () =>
    (
      await database.db
        .selectFrom('mirror_file_check')
        .innerJoin('file', 'file.id', 'mirror_file_check.file_id')
        .select('file.path')
        .where('mirror_id', '=', mirrors.a.id)
        .where('whole_at', 'is not', null)
        .execute()
    ).map((r) => r.path)

  it('checks every copy whole in the background round at start', async () => {
    const deadline = Date.now() + 60_000
    while (Date.now() < deadline && !(await wholeOnA()).includes(FILE)) await sleep(200)
    expect(await wholeOnA()).to.include.members([DEB, RPM, FILE])
    expect(await database.db.selectFrom('mirror_file_bad').selectAll().execute()).to.deep.equal([])
    // Every list names a (first) before its copies go bad.
    for (const [name, text] of Object.entries(await lists())) expect(text, name).to.contain(mirrors.a.nginx.url)
  })

  it("takes a copy corrupted after its last check out of every list within 2 minutes of one client's retry", async () => {
    for (const path of [DEB, RPM, FILE]) corruptInPlace(join(mirrors.a.tree, path))
    // apt takes the .deb from the first mirror of the list and tries no other after a hash mismatch.
    const before = await aptIn('apt-before')
    expect(before.code, before.stderr).to.equal(100)
    expect(before.stderr).to.match(/Hash Sum mismatch/)
    const a = mirrors.a.nginx.url
    for (const path of [DEB, RPM, FILE]) {
      const first = await fetch(`${serve.url}/${path}`, {redirect: 'manual'})
      expect(first.headers.get('location'), path).to.equal(`${a}${path}`)
      const retry = await fetch(`${serve.url}/${path}`, {redirect: 'manual'})
      expect(retry.headers.get('location'), `${path}, retried`).to.not.equal(`${a}${path}`)
    }
    const deadline = Date.now() + WITHIN_MS
    let seen = await lists()
    while (Date.now() < deadline && Object.values(seen).some((text) => text.includes(a))) {
      await sleep(500)
      seen = await lists()
    }
    for (const [name, text] of Object.entries(seen)) expect(text, name).to.not.contain(a)
    expect(seen.location).to.equal(`${mirrors.b.nginx.url}${FILE}`)
    expect(seen.mirrorsTxt).to.contain(mirrors.b.nginx.url)
    expect(seen.repoMetalink).to.contain(mirrors.b.nginx.url)
    const bad = await database.db.selectFrom('mirror_file_bad').innerJoin('file', 'file.id', 'mirror_file_bad.file_id').select(['file.path', 'mirror_id']).execute()
    expect(bad.map((r) => r.path).sort()).to.deep.equal([DEB, FILE, RPM].sort())
    expect(bad.every((r) => r.mirror_id === mirrors.a.id)).to.equal(true)
  })

  it("then apt's and wget2's next runs pass", async () => {
    const apt = await aptIn('apt-after')
    expect(apt.code, apt.stdout + apt.stderr).to.equal(0)
    expect(sha256(readFileSync(join(work, 'apt-after', 'dl', APT_DEB_NAME)))).to.equal(sha256(readFileSync(join(root, DEB))))
    const out = join(work, 'wget2')
    mkdirSync(out)
    const wget2 = await runClient('wget2', ['--no-config', '--tries=3', '--timeout=10', `${serve.url}/${FILE}.meta4`], {cwd: out, limitMs: 30_000})
    expect(wget2.code, wget2.log.slice(-3000)).to.equal(0)
    expect(sha256(readFileSync(join(out, 'file.bin')))).to.equal(sha256(readFileSync(join(root, FILE))))
  })
})
