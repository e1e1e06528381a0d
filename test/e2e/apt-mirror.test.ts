// @store-independent: apt, the mirror list format and nginx mirrors
/**
 * Debian's apt 2.6 reads an archive through `mb serve`'s mirror list with its `mirror+http`
 * method: `deb [trusted=yes] mirror+http://…/debian/mirrors.txt stable main`, with apt's
 * state, cache and sources in a private directory. Two real nginx mirrors on loopback hold
 * the archive (one tiny .deb, Packages from dpkg-scanpackages, a Release with its SHA-256
 * sums); the first one listed serves a corrupt Packages file, which apt's own hash check
 * refuses, so apt goes on to the second. `apt-get download` then fetches the .deb from a
 * mirror (its nginx access log), not from mb.
 */
import {cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {gzipSync} from 'node:zlib'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {APT_DEB as DEB, APT_DEB_NAME, buildAptArchive, hermeticApt} from '../helpers/apt-archive.js'
import {requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

describe(`apt through mb serve's mirror list (${backend})`, function () {
  this.timeout(180_000)
  let test: TestDatabase
  let database: Database
  let work: string
  let root: string
  let serve: Serve
  const mirrors: Array<{name: string; tree: string; log: string; nginx: RunningServer}> = []

  before(async function () {
    requireBinary(this, 'apt-get', 'apt')
    requireBinary(this, 'dpkg-scanpackages', 'dpkg-dev')
    requireBinary(this, 'nginx', 'nginx-light')
    test = await createTestDatabase()
    database = await test.open()
    work = mkdtempSync(join(tmpdir(), 'mb-apt-'))
    root = join(work, 'origin')
    await buildAptArchive(work, root)
    await indexOrigin(database.db, root)
    const ids: number[] = []
    for (const name of ['a', 'b']) {
      const tree = join(work, `mirror-${name}`)
      cpSync(root, tree, {recursive: true, preserveTimestamps: true})
      const log = join(work, `access-${name}.log`)
      writeFileSync(log, '')
      const nginx = await startNginx({root: tree, serverConfig: `access_log ${log};`})
      const row = await database.db
        .insertInto('mirror')
        .values({identifier: `${name}.mirror`, http_url: nginx.url, country: 'DE', continent: 'EU', last_scan_ok_at: new Date(), prefixes: name === 'a' ? ['127.0.0.0/8'] : []} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      ids.push(row.id)
      mirrors.push({name, tree, log, nginx})
    }
    await database.db.updateTable('file').set({mirrors: ids}).execute()
    // a (listed first: its prefix holds the client) serves a corrupt Packages.gz and no Packages.
    const lists = join(mirrors[0].tree, 'debian', 'dists', 'stable', 'main', 'binary-amd64')
    writeFileSync(join(lists, 'Packages.gz'), gzipSync('Package: broken\n'))
    rmSync(join(lists, 'Packages'))
    serve = await startServe(ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, log_level: 'silent'}), {database})
  })

  after(async () => {
    await serve?.close()
    for (const m of mirrors) await m.nginx.stop()
    await database?.close()
    await test?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('lists the mirrors best first with priorities, the origin last', async () => {
    const res = await fetch(`${serve.url}/debian/mirrors.txt`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('text/plain; charset=utf-8')
    expect(await res.text()).to.equal(`${mirrors[0].nginx.url}debian/\tpriority:1\n${mirrors[1].nginx.url}debian/\tpriority:2\n${serve.url}/_origin/debian/\tpriority:3\n`)
    // The last base URL is the origin's own: apt's requests under it are delivered, never redirected.
    const release = await fetch(`${serve.url}/_origin/debian/dists/stable/Release`, {redirect: 'manual'})
    expect(release.status).to.equal(200)
    expect(Buffer.from(await release.arrayBuffer()).equals(readFileSync(join(root, 'debian', 'dists', 'stable', 'Release')))).to.equal(true)
    expect((await fetch(`${serve.url}/_origin/debian/${DEB}`, {redirect: 'manual'})).status).to.equal(200)
    expect((await fetch(`${serve.url}/nowhere/mirrors.txt`)).status).to.equal(404)
  })

  it('apt-get update and apt-get download go through the mirrors, and the checks pass', async () => {
    const dir = join(work, 'apt')
    mkdirSync(join(dir, 'dl'), {recursive: true})
    const apt = hermeticApt(dir, `${serve.url}/debian/mirrors.txt`)
    const update = await apt(['update'])
    expect(update.code, update.stderr).to.equal(0)
    expect(update.stderr).to.not.match(/^(E|W):/m)
    expect(update.stdout).to.match(/Reading package lists/)
    const download = await apt(['download', 'mb-hello'], {cwd: join(dir, 'dl')})
    expect(download.code, download.stderr).to.equal(0)
    const got = readFileSync(join(dir, 'dl', APT_DEB_NAME))
    expect(got.equals(readFileSync(join(root, 'debian', DEB)))).to.equal(true)
    const logs = mirrors.map((m) => readFileSync(m.log, 'utf8'))
    // The Release came from a, whose Packages.gz failed its hash: apt took the index from b.
    expect(logs[0]).to.match(/GET \/debian\/dists\/stable\/Release HTTP\/1\.1" 200/)
    expect(logs[0]).to.match(/GET \/debian\/dists\/stable\/main\/binary-amd64\/Packages\.\w+ HTTP\/1\.1" 200/)
    expect(logs[1]).to.match(/GET \/debian\/dists\/stable\/main\/binary-amd64\/Packages\.\w+ HTTP\/1\.1" 200/)
    // The .deb came from a mirror (a, the first listed), at its size.
    expect(logs[0]).to.include(`"GET /debian/${DEB} HTTP/1.1" 200 ${statSync(join(root, 'debian', DEB)).size} `)
  })
})
