/**
 * Symlinks on the origin through a real `mb index` and `mb serve` (child processes, on the
 * configured backend), as MirrorBrain canonicalizes a file name: `war-stable/latest` links to
 * `2.249.1` and `latest.war` to `2.249.1/jenkins.war`; the mirror holds only the target. A
 * request through either link is redirected straight to the mirror at the target's path, and
 * its metalink, mirror list and `mb file lookup` name the target. Links out of the root, a
 * loop, and a link back into its own ancestry are never stored or followed: clean 404s. A link
 * added later reaches the running server through the snapshot's change tracking.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RawResponse, request, type ServeProcess, startServe} from '../helpers/serve-process.js'

const T = 1_700_000_000
const WAR = 'war-stable/2.249.1/jenkins.war'

async function eventually(port: number, path: string, ok: (r: RawResponse) => boolean): Promise<RawResponse> {
  let last: RawResponse | undefined
  for (let i = 0; i < 150; i++) {
    last = await request(port, path)
    if (ok(last)) return last
    await new Promise((r) => setTimeout(r, 200))
  }
  return last!
}

describe(`symlinks on the origin (${backend})`, function () {
  this.timeout(240_000)
  let dir: string
  let root: string
  let tdb: TestDatabase
  let env: Record<string, string>
  let serve: ServeProcess

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mb-symlinks-'))
    root = join(dir, 'root')
    const outside = join(dir, 'outside')
    mkdirSync(join(root, 'war-stable', '2.249.1'), {recursive: true})
    mkdirSync(join(root, 'dir'), {recursive: true})
    mkdirSync(outside)
    writeFileSync(join(root, WAR), Buffer.alloc(10_000, 'j'))
    utimesSync(join(root, WAR), T, T)
    writeFileSync(join(outside, 'secret.txt'), 'TOP-SECRET-BYTES')
    symlinkSync('2.249.1', join(root, 'war-stable', 'latest'))
    symlinkSync('2.249.1/jenkins.war', join(root, 'war-stable', 'latest.war'))
    symlinkSync(outside, join(root, 'escape'))
    symlinkSync(join(outside, 'secret.txt'), join(root, 'escape.txt'))
    symlinkSync('loop2', join(root, 'loop1'))
    symlinkSync('loop1', join(root, 'loop2'))
    symlinkSync('..', join(root, 'dir', 'up'))
    tdb = await createTestDatabase()
    env = {...tdb.env, MB_ROOT: root}
    const add = await mb(['mirror', 'add', 'm.example', '--http-url', 'http://m.example/pub/', '--country', 'DE', '--no-probe'], {env})
    expect(add.code, add.stderr).to.equal(0)
    const index = await mb(['index', '--json'], {env})
    expect(index.code, index.stderr).to.equal(0)
    expect(index.json()).to.deep.include({files: 1, added: 1, links: 2})
    expect(index.stderr.split('\n').filter(Boolean).sort()).to.deep.equal([])
    expect(index.json().warnings.sort()).to.deep.equal([
      `skipped symlink dir/up: it loops back to .`,
      `skipped symlink escape.txt: it points outside the root (${join(outside, 'secret.txt')})`,
      `skipped symlink escape: it points outside the root (${outside})`,
      'skipped symlink loop1: it loops (too many levels of symbolic links)',
      'skipped symlink loop2: it loops (too many levels of symbolic links)',
    ])
    const database = await tdb.open()
    try {
      expect(await database.db.selectFrom('file_link').select(['path', 'target', 'directory']).orderBy('path').execute()).to.deep.equal([
        {path: 'war-stable/latest', target: 'war-stable/2.249.1', directory: true},
        {path: 'war-stable/latest.war', target: WAR, directory: false},
      ])
      // The mirror's scan found the target (as `rsync -a` lists a tree: links as links).
      await sql`UPDATE file SET mirrors = '{1}'`.execute(database.db)
      await sql`UPDATE mirror SET last_scan_ok_at = now()`.execute(database.db)
    } finally {
      await database.close()
    }
    writeFileSync(join(dir, 'mb.yaml'), 'serve:\n  poll_seconds: 1\n')
    serve = await startServe(['--root', root, '--config', join(dir, 'mb.yaml'), '--no-stats'], tdb.env)
  })

  after(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('redirects a request through a directory link or a file link to the mirror, at the target path', async () => {
    for (const path of ['/war-stable/latest/jenkins.war', '/war-stable/latest.war', `/${WAR}`]) {
      const r = await request(serve.port, path)
      expect(r.status, path).to.equal(302)
      expect(r.headers.location, path).to.equal(`http://m.example/pub/${WAR}`)
      expect(r.headers['x-mb-mirror'], path).to.equal('m.example')
    }
    const head = await request(serve.port, '/war-stable/latest/jenkins.war', {method: 'HEAD'})
    expect(head.status).to.equal(302)
  })

  it('describes the target in the metalink and the mirror list', async () => {
    const meta4 = (await request(serve.port, '/war-stable/latest/jenkins.war.meta4')).body.toString()
    expect(meta4).to.include(`<url location="de" priority="1">http://m.example/pub/${WAR}</url>`)
    expect(meta4).to.include('<file name="jenkins.war">')
    const viaQuery = await request(serve.port, '/war-stable/latest.war?meta4')
    expect(viaQuery.status).to.equal(200)
    expect(viaQuery.body.toString()).to.include(`http://m.example/pub/${WAR}</url>`)
    const list = JSON.parse((await request(serve.port, '/war-stable/latest/jenkins.war?mirrorlist', {headers: {Accept: 'application/json'}})).body.toString())
    expect(list.path).to.equal(WAR)
    expect(list.realms).to.deep.equal([{realm: 'world', mirrors: [{identifier: 'm.example', country: 'DE', continent: 'EU', url: `http://m.example/pub/${WAR}`, realm: 'world', rank: 1}]}])
  })

  it('lists the linked directory from the origin', async () => {
    const r = await request(serve.port, '/war-stable/latest/')
    expect(r.status).to.equal(200)
    expect(r.body.toString()).to.include('href="jenkins.war"')
  })

  it('never follows a link out of the root, a loop, or a link into its own ancestry', async () => {
    for (const path of ['/escape/secret.txt', '/escape/', '/escape.txt', '/loop1', '/loop1/x', '/loop2/', `/dir/up/${WAR}`, '/dir/up/', '/war-stable/latest.war/x']) {
      const r = await request(serve.port, path)
      expect(r.status, path).to.equal(404)
      expect(r.body.toString(), path).not.to.include('TOP-SECRET-BYTES')
      expect(r.headers['content-type'], path).to.equal('text/plain; charset=utf-8')
    }
  })

  it('mb file lookup and mb metalink show the resolved path', async () => {
    const lookup = await mb(['file', 'lookup', 'war-stable/latest/jenkins.war', '--json'], {env})
    expect(lookup.code, lookup.stderr).to.equal(0)
    const f = lookup.json().files[0]
    expect(f).to.deep.include({path: WAR, requested: 'war-stable/latest/jenkins.war', size: 10_000})
    expect(f.mirrors).to.deep.equal([{id: 1, identifier: 'm.example', country: 'DE', url: `http://m.example/pub/${WAR}`, by: 'scan'}])
    const text = await mb(['file', 'lookup', 'war-stable/latest.war'], {env})
    expect(text.stdout.split('\n')[0]).to.match(new RegExp(`^path: +${WAR.replace(/\./g, '\\.')}$`))
    expect(text.stdout.split('\n')[1]).to.match(/^via link: +war-stable\/latest\.war -> war-stable\/2\.249\.1\/jenkins\.war$/)
    const missing = await mb(['file', 'lookup', 'escape/secret.txt'], {env})
    expect(missing.code).to.equal(1)
    const meta = await mb(['metalink', 'war-stable/latest/jenkins.war'], {env})
    expect(meta.code, meta.stderr).to.equal(0)
    expect(meta.stdout).to.include(`http://m.example/pub/${WAR}</url>`)
  })

  it('a link added later reaches the running server without a restart', async () => {
    symlinkSync('2.249.1', join(root, 'war-stable', 'current'))
    expect((await request(serve.port, '/war-stable/current/jenkins.war')).status).to.equal(404)
    const index = await mb(['index', '--json'], {env})
    expect(index.json()).to.deep.include({links: 3, added: 0, removed: 0})
    const r = await eventually(serve.port, '/war-stable/current/jenkins.war', (x) => x.status === 302)
    expect(r.headers.location).to.equal(`http://m.example/pub/${WAR}`)
    rmSync(join(root, 'war-stable', 'current'))
    expect((await mb(['index', '--json'], {env})).json()).to.deep.include({links: 2})
    const gone = await eventually(serve.port, '/war-stable/current/jenkins.war', (x) => x.status === 404)
    expect(gone.status).to.equal(404)
  })
})
