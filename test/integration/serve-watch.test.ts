import {expect} from 'chai'
import {mkdtempSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {backend, createTestDatabase, seedOneMirror, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

describe(`mb serve --watch (${backend})`, () => {
  let tdb: TestDatabase
  let root: string
  let serve: ServeProcess

  before(async () => {
    tdb = await createTestDatabase()
    root = mkdtempSync(join(tmpdir(), 'mb-serve-watch-'))
    writeFileSync(join(root, 'a.iso'), Buffer.alloc(8000, 'a'))
    await seedOneMirror(tdb, {path: 'a.iso', size: 8000, mtime: Math.floor(statSync(join(root, 'a.iso')).mtimeMs / 1000)})
    // The disk check off, so that the watch's own answer is what the test sees (the disk check shares its watch otherwise, and wins).
    writeFileSync(`${root}.yaml`, 'serve:\n  disk_check_seconds: 0\n')
    serve = await startServe(['--root', root, '--watch', '--config', `${root}.yaml`], tdb.env)
  })

  after(async () => {
    await serve?.stop()
    await tdb?.drop()
    if (root) rmSync(root, {recursive: true, force: true})
    if (root) rmSync(`${root}.yaml`, {force: true})
  })

  it('delivers a file rewritten on disk from the origin at once, before any re-index', async () => {
    expect((await request(serve.port, '/a.iso')).headers.location).to.equal('http://m.example/a.iso')
    const changed = Buffer.alloc(9000, 'z')
    writeFileSync(join(root, 'a.iso'), changed)
    let res = await request(serve.port, '/a.iso')
    for (let i = 0; i < 50 && res.status !== 200; i++) {
      await sleep(100)
      res = await request(serve.port, '/a.iso')
    }
    expect(res.status).to.equal(200)
    expect(res.body.equals(changed)).to.equal(true)
    // The log line is written beside the response; give the pipe a moment.
    for (let i = 0; i < 50 && !serve.output().includes('origin file changed on disk'); i++) await sleep(100)
    expect(serve.output()).to.include('origin file changed on disk')
  })
})
