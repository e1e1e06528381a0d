// @store-independent: the disk check and the directory watch on a temporary tree, no database
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, realpathSync, renameSync, rmSync, statSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {DiskVersions} from '../../src/lib/origin/disk.js'
import {OriginWatch} from '../../src/lib/origin/watch.js'

/** Calls `version` with a clock that never moves (so no stat expires) until it answers `size`; the size seen last. */
async function seenSize(disk: DiskVersions, path: string, size: number, now: number): Promise<number | undefined> {
  let seen = disk.version(path, now)?.size
  for (let i = 0; i < 100 && seen !== size; i++) {
    await sleep(20)
    seen = disk.version(path, now)?.size
  }
  return seen
}

describe('origin check with watched directories (src/lib/origin/watch.ts, disk.ts)', () => {
  let root: string
  let watch: OriginWatch | undefined

  beforeEach(() => {
    root = realpathSync(mkdtempSync(join(tmpdir(), 'mb-origin-watch-')))
    mkdirSync(join(root, 'pub/sub'), {recursive: true})
    writeFileSync(join(root, 'pub/sub/a.iso'), Buffer.alloc(100, 'a'))
  })

  afterEach(() => {
    watch?.close()
    watch = undefined
    rmSync(root, {recursive: true, force: true})
  })

  async function watched(): Promise<DiskVersions> {
    watch = new OriginWatch(root)
    await watch.ready
    const disk = new DiskVersions(root, 1, watch)
    expect(disk.version('pub/sub/a.iso', 0)?.size).to.equal(100)
    return disk
  }

  it('stats a file in a watched directory once, however much time passes, and reports one watch per directory', async () => {
    const disk = await watched()
    expect(disk.version('pub/sub/a.iso', 60_000)?.size).to.equal(100)
    expect(disk.stats).to.equal(1)
    expect(watch?.report()).to.include({watched: 3, unwatched: 0, limitHit: false})
  })

  const patterns: Array<[string, (target: string) => void]> = [
    [
      'a rename into place',
      (target) => {
        writeFileSync(`${target}.tmp`, Buffer.alloc(200, 'b'))
        renameSync(`${target}.tmp`, target)
      },
    ],
    ['an in-place rewrite (cat >)', (target) => writeFileSync(target, Buffer.alloc(200, 'b'))],
    [
      'rsync --inplace',
      (target) => {
        writeFileSync(join(root, 'new.iso'), Buffer.alloc(200, 'b'))
        execFileSync('rsync', ['--inplace', join(root, 'new.iso'), target])
      },
    ],
    [
      'rsync (temporary file renamed into place)',
      (target) => {
        writeFileSync(join(root, 'new.iso'), Buffer.alloc(200, 'b'))
        execFileSync('rsync', [join(root, 'new.iso'), target])
      },
    ],
    [
      'its directory replaced by another',
      () => {
        renameSync(join(root, 'pub/sub'), join(root, 'pub/old'))
        mkdirSync(join(root, 'pub/sub'))
        writeFileSync(join(root, 'pub/sub/a.iso'), Buffer.alloc(200, 'b'))
      },
    ],
  ]
  for (const [name, rewrite] of patterns) {
    it(`notices ${name} with no stat period passing (the event does it)`, async () => {
      const disk = await watched()
      rewrite(join(root, 'pub/sub/a.iso'))
      expect(await seenSize(disk, 'pub/sub/a.iso', 200, 0)).to.equal(200)
    })
  }

  it('notices a file removed and one created under a name that was missing', async () => {
    const disk = await watched()
    expect(disk.version('pub/sub/b.iso', 0)).to.equal(null)
    writeFileSync(join(root, 'pub/sub/b.iso'), Buffer.alloc(300))
    rmSync(join(root, 'pub/sub/a.iso'))
    expect(await seenSize(disk, 'pub/sub/b.iso', 300, 0)).to.equal(300)
    for (let i = 0; i < 100 && disk.version('pub/sub/a.iso', 0) !== null; i++) await sleep(20)
    expect(disk.version('pub/sub/a.iso', 0)).to.equal(null)
  })

  it('does not believe a symlink or a hard-linked file past the stat period', async () => {
    writeFileSync(join(root, 'pub/target.iso'), Buffer.alloc(10))
    execFileSync('ln', ['-s', '../target.iso', join(root, 'pub/sub/link.iso')])
    execFileSync('ln', [join(root, 'pub/target.iso'), join(root, 'pub/sub/hard.iso')])
    const disk = await watched()
    for (const path of ['pub/sub/link.iso', 'pub/sub/hard.iso']) {
      const before = disk.stats
      disk.version(path, 0)
      disk.version(path, 500)
      disk.version(path, 1000)
      expect(disk.stats - before, path).to.equal(2)
    }
  })

  it('falls back to a stat per period in directories over the watch limit, and says so', async () => {
    watch = new OriginWatch(root, {maxWatches: 2})
    await watch.ready
    expect(watch.report()).to.include({watched: 2, unwatched: 1, limitHit: true})
    const disk = new DiskVersions(root, 1, watch)
    disk.version('pub/sub/a.iso', 0)
    disk.version('pub/sub/a.iso', 999)
    expect(disk.stats).to.equal(1)
    writeFileSync(join(root, 'pub/sub/a.iso'), Buffer.alloc(200))
    expect(disk.version('pub/sub/a.iso', 1000)?.size).to.equal(200)
    expect(disk.stats).to.equal(2)
  })

  it('falls back to a stat per period where the kernel refuses a watch (ENOSPC)', async () => {
    const refuse = (path: string) => {
      throw Object.assign(new Error(`ENOSPC: System limit for number of file watchers reached, watch '${path}'`), {code: 'ENOSPC'})
    }
    watch = new OriginWatch(root, {watch: refuse})
    await watch.ready
    expect(watch.report()).to.include({watched: 0, unwatched: 3, limitHit: true})
    const disk = new DiskVersions(root, 1, watch)
    disk.version('pub/sub/a.iso', 0)
    writeFileSync(join(root, 'pub/sub/a.iso'), Buffer.alloc(200))
    expect(disk.version('pub/sub/a.iso', 1000)?.size).to.equal(200)
    expect(disk.stats).to.equal(2)
  })

  it('watches a directory created after the start, and reports its entries', async () => {
    watch = new OriginWatch(root)
    await watch.ready
    const heard: string[] = []
    watch.onChange((path) => heard.push(path))
    mkdirSync(join(root, 'pub/new'))
    for (let i = 0; i < 100 && watch.token('pub/new') === undefined; i++) await sleep(20)
    expect(watch.token('pub/new')).to.be.a('number')
    writeFileSync(join(root, 'pub/new/c.iso'), 'c')
    for (let i = 0; i < 100 && !heard.includes('pub/new/c.iso'); i++) await sleep(20)
    expect(heard).to.include('pub/new/c.iso')
    expect(statSync(join(root, 'pub/new/c.iso')).size).to.equal(1)
  })
})
