// @store-independent: the directory index's HTML and two mirroring tools
/**
 * Mirroring tools take the origin's files and nothing else from mb's directory index: `wget -m`
 * and lftp's `mirror` walk the listing of a tree whose files are indexed (each with a
 * "details" button to its mirror list) and save exactly the origin's files (and wget its
 * index pages), no `NAME.mirrorlist` junk beside them; the button's target answers the mirror
 * list.
 */
import {execFile} from 'node:child_process'
import {promisify} from 'node:util'
import {mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join, relative} from 'node:path'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {requireBinary} from '../helpers/cli.js'
import {backend, useTestDatabase} from '../helpers/db.js'

/** Runs a client to its end (the server under test runs in this process: a synchronous spawn would stall it). */
const run = promisify(execFile)

/** Every regular file under `dir`, relative to it, sorted. */
function filesUnder(dir: string): string[] {
  return (readdirSync(dir, {recursive: true, withFileTypes: true}) as Array<{name: string; parentPath?: string; path?: string; isFile(): boolean}>)
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath ?? e.path ?? dir, e.name)))
    .sort()
}

describe(`mirroring tools and the directory index (${backend})`, function () {
  this.timeout(120_000)
  const store = useTestDatabase()
  let work: string
  let root: string
  let running: RunningServer

  before(async function () {
    requireBinary(this, 'wget', 'wget')
    requireBinary(this, 'lftp', 'lftp')
    work = mkdtempSync(join(tmpdir(), 'mb-mirroring-tools-'))
    root = join(work, 'origin')
    mkdirSync(join(root, 'pub', 'sub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'a.iso'), Buffer.alloc(20_000, 'a'))
    writeFileSync(join(root, 'pub', 'sub', 'b.iso'), Buffer.alloc(30_000, 'b'))
    writeFileSync(join(root, 'pub', 'sub', 'notes.txt'), 'small\n')
    await indexOrigin(store.database.db, root)
    const config = ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, probe: {content_interval_seconds: 0}, log_level: 'silent'})
    running = await startServe(config, {database: store.database})
  })
  after(async () => {
    await running?.close()
    if (work) rmSync(work, {recursive: true, force: true})
  })

  const ORIGIN_FILES = ['pub/a.iso', 'pub/sub/b.iso', 'pub/sub/notes.txt']

  it('the listing offers each indexed file its details, and the details answer the mirror list', async () => {
    const html = await (await fetch(`${running.url}/pub/`)).text()
    expect(html).to.match(/<form class="details" method="get" action="a\.iso\.mirrorlist" rel="nofollow">/)
    expect(html).to.not.match(/<a href="[^"]*\.mirrorlist"/)
    // What a browser submitting the form asks for.
    const list = await fetch(`${running.url}/pub/a.iso.mirrorlist?`)
    expect(list.status).to.equal(200)
    expect(await list.text()).to.contain('a.iso')
  })

  it('wget -m saves the origin files and the index pages, no mirror list', async () => {
    const out = join(work, 'wget')
    mkdirSync(out)
    await run('wget', ['-q', '-m', '-np', '-nH', `${running.url}/pub/`], {cwd: out, timeout: 60_000})
    const saved = filesUnder(out)
    expect(saved.filter((f) => !f.endsWith('index.html'))).to.deep.equal(ORIGIN_FILES)
    expect(saved.filter((f) => f.includes('mirrorlist'))).to.deep.equal([])
  })

  it("lftp's mirror saves the origin files, no mirror list", async () => {
    const out = join(work, 'lftp')
    await run('lftp', ['-c', `set cmd:interactive false; mirror ${running.url}/pub/ ${out}`], {timeout: 60_000, env: {...process.env, HOME: work}})
    expect(filesUnder(out).map((f) => `pub/${f}`)).to.deep.equal(ORIGIN_FILES)
  })
})
