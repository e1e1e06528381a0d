/**
 * Mirror-only files (`serve.mirror_only`) the origin always delivered while it held them:
 * once the origin prunes a file under `select.min_size` or matching `select.origin_only`
 * (a checksum file, a repomd.xml beside the ISOs of an archive tree), `mb serve` redirects it
 * to the mirrors that hold it, and its metalink lists them, instead of a 404 from the origin
 * that no longer has it; `mb file lookup` explains it so. Files still on the origin keep
 * their origin exceptions.
 */
import {mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'

describe(`mb serve: mirror-only files the origin delivered itself (${backend})`, function () {
  this.timeout(240_000)
  let dir: string
  let root: string
  let config: string
  let tdb: TestDatabase
  let serve: ServeProcess

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mb-mirror-only-'))
    root = join(dir, 'root')
    mkdirSync(join(root, 'archive', '1.0'), {recursive: true})
    writeFileSync(join(root, 'archive', '1.0', 'old.iso'), Buffer.alloc(10_000, 'o'))
    writeFileSync(join(root, 'archive', '1.0', 'old.iso.sha256'), `${'0'.repeat(64)}  old.iso\n`)
    writeFileSync(join(root, 'archive', '1.0', 'notes.txt'), 'small')
    writeFileSync(join(root, 'archive', '1.0', 'kept.txt'), 'small, kept')
    config = join(dir, 'mb.yaml')
    writeFileSync(config, `root: ${root}\nserve:\n  poll_seconds: 1\n  mirror_only: ['archive/**']\n`)
    tdb = await createTestDatabase()
    const env = {...tdb.env, MB_CONFIG: config}
    const add = await mb(['mirror', 'add', 'm.example', '--http-url', 'http://m.example/pub/', '--country', 'DE', '--no-probe'], {env})
    expect(add.code, add.stderr).to.equal(0)
    const first = await mb(['index'], {env})
    expect(first.code, first.stderr).to.equal(0)
    const database = await tdb.open()
    try {
      await sql`UPDATE file SET mirrors = '{1}'`.execute(database.db)
      await sql`UPDATE mirror SET last_scan_ok_at = now()`.execute(database.db)
    } finally {
      await database.close()
    }
    for (const name of ['old.iso', 'old.iso.sha256', 'notes.txt']) unlinkSync(join(root, 'archive', '1.0', name))
    // Three of four files went: past index.min_ratio, as an archive's pruning can be.
    const index = await mb(['index', '--json', '--min-ratio', '0'], {env})
    expect(index.code, index.stderr).to.equal(0)
    expect(index.json().mirrorOnly).to.equal(3)
    serve = await startServe(['--config', config, '--no-stats'], tdb.env)
  })

  after(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('redirects a pruned small or origin_only file to the mirror that holds it, and its metalink lists the mirror', async () => {
    for (const path of ['archive/1.0/old.iso', 'archive/1.0/old.iso.sha256', 'archive/1.0/notes.txt']) {
      const r = await request(serve.port, `/${path}`)
      expect(r.status, `${path}: ${r.body.toString()}`).to.equal(302)
      expect(r.headers.location).to.equal(`http://m.example/pub/${path}`)
      const meta4 = await request(serve.port, `/${path}.meta4`)
      expect(meta4.status, path).to.equal(200)
      expect(meta4.body.toString()).to.contain(`<url location="de" priority="1">http://m.example/pub/${path}</url>`)
    }
  })

  it('mb file lookup explains the redirect of a pruned small file, and the origin for one still held', async () => {
    const env = {...tdb.env, MB_CONFIG: config}
    const explain = async (path: string) => {
      const r = await mb(['file', 'lookup', path, '--client-ip', '81.2.69.142', '--json'], {env})
      expect(r.code, r.stderr).to.equal(0)
      return r.json().files[0].explain
    }
    const pruned = await explain('archive/1.0/notes.txt')
    expect(pruned.origin).to.equal(null)
    expect(pruned.ranked[0].mirror).to.equal('m.example')
    expect((await explain('archive/1.0/kept.txt')).origin).to.include({reason: 'small_file'})
  })

  it('keeps delivering a small file the origin still holds from the origin', async () => {
    const r = await request(serve.port, '/archive/1.0/kept.txt')
    expect(r.status).to.equal(200)
    expect(r.headers['x-mb-origin-reason']).to.equal('small_file')
    expect(r.body.toString()).to.equal('small, kept')
  })
})
