/**
 * Files the origin pruned (`serve.mirror_only`, src/lib/origin/mirror-only.ts), end to end: a
 * mirror copies the tree with real rsync and real nginx serves it; the origin then deletes an
 * old release under `archive/` and a file elsewhere. `mb index` keeps the archive file as
 * mirror-only (hashes and mirror set kept) and `mb serve` redirects it and answers its meta4;
 * the other file leaves the index (404) with a warning naming the mirror that still holds it;
 * `mb file forget` ends the archive file everywhere; a file put back is an ordinary file
 * again; a glob that cannot match is refused.
 */
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

describe(`files the origin pruned stay redirected while mirrors hold them (${backend})`, function () {
  this.timeout(180_000)
  let tdb: TestDatabase
  let work: string
  let root: string
  let config: string
  let nginx: RunningServer | undefined
  let serve: ServeProcess | undefined
  const mirrorTree = () => join(work, 'mirror')

  async function run(args: string[]) {
    const result = await mb([...args, '--config', config], {env: tdb.env})
    expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(0)
    return result
  }
  /** The status and the mirror (or origin reason) a GET of `path` gets. */
  async function answer(path: string): Promise<string> {
    const res = await request(serve!.port, `/${path}`)
    if (res.status === 302) return `302 ${res.headers['x-mb-mirror']}`
    return `${res.status}${res.headers['x-mb-origin-reason'] ? ` ${res.headers['x-mb-origin-reason']}` : ''}`
  }
  async function until(path: string, expected: string): Promise<string> {
    let got = ''
    for (let i = 0; i < 50 && got !== expected; i++) {
      got = await answer(path)
      if (got !== expected) await new Promise((r) => setTimeout(r, 200))
    }
    return got
  }

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'rsync', 'rsync')
    work = mkdtempSync(join(tmpdir(), 'mb-mirror-only-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'archive', '1.0'), {recursive: true})
    mkdirSync(join(root, 'pub'), {recursive: true})
    writeFileSync(join(root, 'archive', '1.0', 'old.iso'), Buffer.alloc(300_000, 'o'))
    writeFileSync(join(root, 'pub', 'gone.iso'), Buffer.alloc(300_000, 'g'))
    writeFileSync(join(root, 'pub', 'kept.iso'), Buffer.alloc(300_000, 'k'))
    config = join(work, 'mb.yaml')
    writeFileSync(config, `root: ${root}\nserve:\n  poll_seconds: 0.5\n  mirror_only: ['archive/**']\nindex:\n  min_ratio: 0\n`)
    tdb = await createTestDatabase()
    await run(['index', '--hashes'])
    const copied = spawnSync('rsync', ['-a', `${root}/`, `${mirrorTree()}/`], {encoding: 'utf8'})
    expect(copied.status, copied.stderr).to.equal(0)
    nginx = await startNginx({root: mirrorTree(), autoindex: 'json'})
    await run(['mirror', 'add', 'archive.test', '--http-url', nginx.url, '--country', 'DE', '--no-probe'])
    await run(['scan', 'archive.test'])
    // The origin prunes the old release and another file.
    unlinkSync(join(root, 'archive', '1.0', 'old.iso'))
    unlinkSync(join(root, 'pub', 'gone.iso'))
  })

  after(async () => {
    await serve?.stop()
    await nginx?.stop()
    await tdb?.drop()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  it('mb index keeps the pruned archive file as mirror-only and names the mirror still holding a file it drops', async () => {
    const index = await mb(['index', '--json', '--config', config], {env: tdb.env})
    expect(index.code, index.stderr).to.equal(0)
    const result = index.json()
    expect(result).to.include({removed: 1, mirrorOnly: 1})
    expect(result.warnings).to.deep.equal(['pub/gone.iso left the origin and the index; mirrors still hold it: archive.test (under serve.mirror_only it would stay redirected)'])
    const lookup = (await run(['file', 'lookup', 'archive/1.0/old.iso', '--json'])).json().files[0]
    expect(lookup).to.include({mirror_only: true})
    expect(lookup.hashes).to.not.equal(null)
    expect(lookup.mirrors.map((m: any) => m.identifier)).to.deep.equal(['archive.test'])
    expect((await run(['file', 'lookup', 'archive/1.0/old.iso'])).stdout).to.match(/^origin:\s+mirror-only: pruned from the origin/m)
    // A second run keeps it (the mirror still holds it).
    expect((await run(['index', '--json'])).json()).to.include({removed: 0, mirrorOnly: 1})
  })

  it('mb serve redirects the mirror-only file and answers its meta4; the dropped file is 404', async () => {
    serve = await startServe(['--config', config], tdb.env)
    expect(await answer('archive/1.0/old.iso')).to.equal('302 archive.test')
    const meta4 = await request(serve.port, '/archive/1.0/old.iso.meta4')
    expect(meta4.status).to.equal(200)
    expect(meta4.body.toString())
      .to.contain(`${nginx!.url}archive/1.0/old.iso`)
      .and.to.match(/<hash type="sha-256">[0-9a-f]{64}<\/hash>/)
    expect(await answer('pub/gone.iso')).to.equal('404')
    expect(await answer('pub/kept.iso')).to.equal('302 archive.test')
  })

  it('mb file forget ends it everywhere; a file put back on the origin is an ordinary file again', async () => {
    const forget = await run(['file', 'forget', 'archive/1.0/old.iso', '--json'])
    expect(forget.json()).to.deep.equal({path: 'archive/1.0/old.iso', mirror_only: true, mirrors: ['archive.test']})
    expect(await until('archive/1.0/old.iso', '404')).to.equal('404')
    const again = await mb(['file', 'forget', 'archive/1.0/old.iso', '--config', config], {env: tdb.env})
    expect(again.code).to.equal(1)
    expect(again.stderr).to.contain('No indexed file archive/1.0/old.iso: nothing was changed')
    const glob = await mb(['file', 'forget', 'archive/*.iso', '--config', config], {env: tdb.env})
    expect(glob.code).to.equal(2)
    // Put back: indexed as an ordinary file.
    writeFileSync(join(root, 'archive', '1.0', 'old.iso'), Buffer.alloc(300_000, 'o'))
    await run(['index'])
    expect((await run(['file', 'lookup', 'archive/1.0/old.iso', '--json'])).json().files[0]).to.include({mirror_only: false})
  })

  it('a mirror_only glob that cannot match an origin path is refused with the key', async () => {
    const bad = join(work, 'bad.yaml')
    writeFileSync(bad, `root: ${root}\nserve:\n  mirror_only: ['/archive/**']\n`)
    const show = await mb(['config', 'show', '--config', bad], {env: tdb.env})
    expect(show.code).to.equal(2)
    expect(show.stderr).to.contain('serve.mirror_only').and.to.contain('origin paths have no leading slash: write "archive/**"')
  })
})
