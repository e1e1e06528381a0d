// @store-independent: dnf, the metalink and mirrorlist formats, nginx mirrors
/**
 * Debian's dnf 4.14 (librepo) reads a repository through `mb serve` as it reads Fedora's
 * through MirrorManager: `metalink=http://…/metalink?repo=…&arch=…` and `mirrorlist=…`.
 * Three real nginx mirrors on loopback: `a` syncs every version, `b` keeps the previous
 * repomd.xml, `c` holds a corrupt one and ranks first (its prefix holds the client).
 *
 * - version 1 everywhere: `dnf makecache` and `dnf download mb-hello` work, and the package
 *   comes from a mirror (its nginx access log);
 * - version 2 on the origin and on `a` only, `a` disabled: the metalink lists the mirrors
 *   that held version 1 (inside the alternates window) and version 1 as an `mm0:alternate`;
 *   dnf skips `c` (its repomd.xml matches no hash), takes `b`'s previous repomd.xml, and
 *   downloads mb-hello 1.0;
 * - outside the window (`yum.alternates_days: 0`) `b` and `c` drop out; with `a` enabled,
 *   `mirrorlist=` leads dnf to `a` and mb-hello 2.0.
 * dnf's `countme=N` lands in `stats_countme`.
 */
import {execFile} from 'node:child_process'
import {cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {promisify} from 'node:util'
import {expect} from 'chai'
import {sql} from 'kysely'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const run = promisify(execFile)
const FIXTURES = new URL('../fixtures/rpm/', import.meta.url).pathname
const REPO = 'fedora/42/x86_64/os'

/** Builds version `version` of the test repository in `dir` (one package, createrepo_c). */
async function buildRepo(dir: string, version: '1.0' | '2.0'): Promise<void> {
  rmSync(dir, {recursive: true, force: true})
  mkdirSync(join(dir, 'Packages'), {recursive: true})
  cpSync(join(FIXTURES, `mb-hello-${version}-1.noarch.rpm`), join(dir, 'Packages', `mb-hello-${version}-1.noarch.rpm`))
  await run('createrepo_c', ['-q', dir])
}

interface Mirror {
  name: string
  tree: string
  log: string
  nginx: RunningServer
  id: number
}

describe(`dnf through mb serve's metalink and mirrorlist (${backend})`, function () {
  this.timeout(240_000)
  let test: TestDatabase
  let database: Database
  let root: string
  let work: string
  let serve: Serve | undefined
  const mirrors: Mirror[] = []
  const byName = (name: string) => mirrors.find((m) => m.name === name)!

  async function startMb(alternatesDays: number): Promise<Serve> {
    await serve?.close()
    const config = ConfigSchema.parse({
      root,
      serve: {listen: '127.0.0.1:0', poll_seconds: 0.2},
      stats: {flush_interval_seconds: 0.2},
      log_level: 'silent',
      yum: {repos: [{repo: 'fedora-42', arch: ['x86_64', 'aarch64'], path: 'fedora/42/$arch/os'}], alternates_days: alternatesDays},
    })
    serve = await startServe(config, {database})
    return serve
  }

  /** Runs dnf with everything (config, cache, installroot) under `work/NAME`. */
  async function dnf(name: string, repoLine: string, args: string[]): Promise<{code: number; out: string}> {
    const dir = join(work, name)
    mkdirSync(join(dir, 'repos.d'), {recursive: true})
    writeFileSync(join(dir, 'dnf.conf'), `[main]\ngpgcheck=0\ncachedir=${dir}/cache\npersistdir=${dir}/persist\nlogdir=${dir}/log\nreposdir=${dir}/repos.d\n`)
    writeFileSync(join(dir, 'repos.d', 'mbtest.repo'), `[mbtest]\nname=mb test\n${repoLine}\ngpgcheck=0\nrepo_gpgcheck=0\ncountme=1\nretries=1\ntimeout=20\n`)
    const argv = ['-c', join(dir, 'dnf.conf'), `--installroot=${dir}/root`, '--releasever=42', `--setopt=reposdir=${dir}/repos.d`, '--disableplugin=local', '-y', ...args]
    try {
      const {stdout, stderr} = await run('dnf', argv, {timeout: 120_000})
      return {code: 0, out: stdout + stderr}
    } catch (error) {
      const e = error as {code?: number; stdout?: string; stderr?: string}
      return {code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? ''}`}
    }
  }

  const log = (m: Mirror) => {
    try {
      return readFileSync(m.log, 'utf8')
    } catch {
      return ''
    }
  }
  const countme = async () => Number((await sql<{hits: string | null}>`SELECT sum(hits) AS hits FROM stats_countme`.execute(database.db)).rows[0].hits ?? 0)
  const truncateLogs = () => {
    for (const m of mirrors) writeFileSync(m.log, '')
  }

  before(async function () {
    requireBinary(this, 'dnf', 'dnf')
    requireBinary(this, 'createrepo_c', 'createrepo-c')
    requireBinary(this, 'nginx', 'nginx-light')
    test = await createTestDatabase()
    database = await test.open()
    work = mkdtempSync(join(tmpdir(), 'mb-dnf-'))
    root = join(work, 'origin')
    await buildRepo(join(root, REPO), '1.0')
    for (const name of ['a', 'b', 'c']) {
      const tree = join(work, `mirror-${name}`)
      cpSync(root, tree, {recursive: true, preserveTimestamps: true})
      const logFile = join(work, `access-${name}.log`)
      writeFileSync(logFile, '')
      const nginx = await startNginx({root: tree, serverConfig: `access_log ${logFile};`})
      const row = await database.db
        .insertInto('mirror')
        .values({identifier: `${name}.mirror`, http_url: nginx.url, country: 'DE', continent: 'EU', last_scan_ok_at: new Date(), prefixes: name === 'c' ? ['127.0.0.0/8'] : []} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      mirrors.push({name, tree, log: logFile, nginx, id: row.id})
    }
    await indexOrigin(database.db, root)
    await database.db
      .updateTable('file')
      .set({mirrors: mirrors.map((m) => m.id)})
      .execute()
    // c's repomd.xml is corrupt (same size, one checksum changed).
    const repomd = join(byName('c').tree, REPO, 'repodata', 'repomd.xml')
    const text = readFileSync(repomd, 'utf8')
    writeFileSync(
      repomd,
      text.replace(/<checksum type="sha256">([0-9a-f])/, (_m, c: string) => `<checksum type="sha256">${c === '0' ? '1' : '0'}`),
    )
    await startMb(3)
  })

  after(async () => {
    await serve?.close()
    for (const m of mirrors) await m.nginx.stop()
    await database?.close()
    await test?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('makes the cache and downloads a package from a mirror through metalink=', async () => {
    truncateLogs()
    const repoLine = `metalink=${serve!.url}/metalink?repo=fedora-42&arch=$basearch`
    const cache = await dnf('v1', repoLine, ['makecache'])
    expect(cache.code, cache.out).to.equal(0)
    expect(cache.out).to.include('Metadata cache created.')
    const download = await dnf('v1', repoLine, ['download', `--destdir=${work}/v1/dl`, 'mb-hello'])
    expect(download.code, download.out).to.equal(0)
    expect(readFileSync(join(work, 'v1', 'dl', 'mb-hello-1.0-1.noarch.rpm')).equals(readFileSync(join(FIXTURES, 'mb-hello-1.0-1.noarch.rpm')))).to.equal(true)
    // c (ranked first) was asked for repomd.xml, and its corrupt copy refused: dnf went on to
    // the next mirror's. The package came from a mirror.
    expect(log(byName('c'))).to.match(/GET \/fedora\/42\/x86_64\/os\/repodata\/repomd\.xml HTTP\/1\.1" 200/)
    expect(mirrors.filter((m) => m.name !== 'c' && log(m).includes('GET /fedora/42/x86_64/os/repodata/repomd.xml HTTP/1.1" 200')).map((m) => m.name)).to.have.length(1)
    const served = mirrors.filter((m) => /GET \/fedora\/42\/x86_64\/os\/Packages\/mb-hello-1\.0-1\.noarch\.rpm HTTP\/1\.1" 200/.test(log(m))).map((m) => m.name)
    expect(served).to.deep.equal(['c'])
    // dnf's countme: libdnf adds `countme=N` to one of the first 1..4 metalink requests of a
    // week (its cookie's budget). A cookie with one request left makes the next one count.
    const before = await countme()
    const persist = join(work, 'v1', 'root', work, 'v1', 'persist', 'repos')
    const [repoDir] = readdirSync(persist)
    writeFileSync(join(persist, repoDir, 'countme'), '0 0 0 1')
    const refresh = await dnf('v1', repoLine, ['makecache', '--refresh'])
    expect(refresh.code, refresh.out).to.equal(0)
    let after = before
    for (let i = 0; i < 50 && after === before; i++) {
      await sleep(200)
      after = await countme()
    }
    expect(after - before).to.equal(1)
    const rows = await sql<{repo: string; arch: string; bucket: number}>`SELECT repo, arch, bucket FROM stats_countme`.execute(database.db)
    expect(rows.rows).to.deep.equal([{repo: 'fedora-42', arch: 'x86_64', bucket: 1}])
  })

  it('uses a mirror with the previous repomd.xml inside the alternates window, skipping the corrupt one', async () => {
    await buildRepo(join(root, REPO), '2.0')
    await indexOrigin(database.db, root)
    cpSync(join(root, REPO), join(byName('a').tree, REPO), {recursive: true, preserveTimestamps: true})
    // a would serve version 2; disabled, it leaves b (previous version) and c (corrupt).
    await database.db.updateTable('mirror').set({enabled: false}).where('identifier', '=', 'a.mirror').execute()
    serve = await startMb(3)
    const doc = await (await fetch(`${serve.url}/metalink?repo=fedora-42&arch=x86_64`)).text()
    expect(doc.match(/<mm0:alternate>/g)).to.have.length(1)
    const urls = [...doc.matchAll(/<url [^>]*preference="(\d+)"[^>]*>([^<]+)<\/url>/g)].map((m) => [Number(m[1]), m[2]])
    expect(urls).to.deep.equal([
      [100, `${byName('c').nginx.url}${REPO}/repodata/repomd.xml`],
      [99, `${byName('b').nginx.url}${REPO}/repodata/repomd.xml`],
      [98, `${serve.url}/_origin/${REPO}/repodata/repomd.xml`],
    ])
    truncateLogs()
    const repoLine = `metalink=${serve.url}/metalink?repo=fedora-42&arch=$basearch`
    const download = await dnf('window', repoLine, ['download', `--destdir=${work}/window/dl`, 'mb-hello'])
    expect(download.code, download.out).to.equal(0)
    expect(readFileSync(join(work, 'window', 'dl', 'mb-hello-1.0-1.noarch.rpm')).length).to.equal(readFileSync(join(FIXTURES, 'mb-hello-1.0-1.noarch.rpm')).length)
    // dnf fetched c's corrupt repomd.xml, refused it, and took b's previous one: the origin
    // no longer has mb-hello 1.0, so only version 1's metadata can have led to it. The
    // other metadata files (named by their checksums) are good on c too.
    expect(log(byName('c'))).to.match(/GET \/fedora\/42\/x86_64\/os\/repodata\/repomd\.xml HTTP\/1\.1" 200/)
    expect(log(byName('b'))).to.match(/GET \/fedora\/42\/x86_64\/os\/repodata\/repomd\.xml HTTP\/1\.1" 200/)
    expect(mirrors.filter((m) => log(m).includes('Packages/mb-hello-1.0-1.noarch.rpm HTTP/1.1" 200')).map((m) => m.name)).to.have.length(1)
    expect(log(byName('a'))).to.equal('')
  })

  it('leaves the previous version out after the window, and works through mirrorlist=', async () => {
    await database.db.updateTable('mirror').set({enabled: true}).where('identifier', '=', 'a.mirror').execute()
    // a synced version 2 (a scan would say so).
    await sql`UPDATE file SET mirrors = ${`{${byName('a').id}}`}::smallint[] WHERE path LIKE ${`${REPO}/%`}`.execute(database.db)
    serve = await startMb(0)
    const doc = await (await fetch(`${serve.url}/metalink?repo=fedora-42&arch=x86_64`)).text()
    expect(doc).to.not.include('<mm0:alternates>')
    const list = await (await fetch(`${serve.url}/mirrorlist?repo=fedora-42&arch=x86_64`)).text()
    expect(list).to.equal(`# repo = fedora-42 arch = x86_64 \n${byName('a').nginx.url}${REPO}/\n${serve.url}/_origin/${REPO}/\n`)
    truncateLogs()
    const download = await dnf('mirrorlist', `mirrorlist=${serve.url}/mirrorlist?repo=fedora-42&arch=$basearch`, ['download', `--destdir=${work}/mirrorlist/dl`, 'mb-hello'])
    expect(download.code, download.out).to.equal(0)
    expect(readFileSync(join(work, 'mirrorlist', 'dl', 'mb-hello-2.0-1.noarch.rpm')).equals(readFileSync(join(FIXTURES, 'mb-hello-2.0-1.noarch.rpm')))).to.equal(true)
    expect(log(byName('a'))).to.match(/GET \/fedora\/42\/x86_64\/os\/Packages\/mb-hello-2\.0-1\.noarch\.rpm HTTP\/1\.1" 200/)
    expect(log(byName('b'))).to.equal('')
  })
})
