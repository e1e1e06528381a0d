import {mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, unlinkSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import type {Database} from '../../src/lib/db/index.js'
import type {MbError} from '../../src/lib/errors.js'
import {indexOrigin, walkOrigin} from '../../src/lib/origin/index.js'
import type {OriginLink} from '../../src/lib/origin/walk.js'
import {mb} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'

const T = 1_700_000_000

function write(root: string, rel: string, content: string, mtime = T): void {
  const full = join(root, rel)
  mkdirSync(join(full, '..'), {recursive: true})
  writeFileSync(full, content)
  utimesSync(full, mtime, mtime)
}

describe('origin index (mb index library)', function () {
  let tdb: TestDatabase
  let database: Database
  let root: string
  let outside: string

  beforeEach(async () => {
    tdb = await createTestDatabase()
    database = await tdb.open()
    root = mkdtempSync(join(tmpdir(), 'mb-index-root-'))
    outside = mkdtempSync(join(tmpdir(), 'mb-index-outside-'))
    write(root, 'a.iso', 'aaaa')
    write(root, 'dir one/b #+%:ü.txt', 'bb')
    write(root, 'dir one/deep/c.txt', 'c', T + 60)
    mkdirSync(join(root, 'empty'))
    write(outside, 'secret.txt', 'secret')
    symlinkSync('a.iso', join(root, 'latest.iso'))
    symlinkSync('dir one', join(root, 'linked-dir'))
    symlinkSync(join(outside, 'secret.txt'), join(root, 'escape.txt'))
    symlinkSync(outside, join(root, 'escape-dir'))
    symlinkSync('..', join(root, 'dir one', 'loop'))
    symlinkSync('missing-target', join(root, 'dangling'))
  })
  afterEach(async () => {
    await database.close()
    await tdb.drop()
    rmSync(root, {recursive: true, force: true})
    rmSync(outside, {recursive: true, force: true})
  })

  async function rows() {
    return (await sql<{path: string; size: number; mtime: number}>`SELECT path, size, mtime FROM file ORDER BY path`.execute(database.db)).rows
  }

  it('walks regular files, records symlinks inside the root with their targets, and skips the others', async () => {
    const warnings: string[] = []
    const files = []
    const links: OriginLink[] = []
    for await (const f of walkOrigin(root, {onWarning: (w) => warnings.push(w), onLink: (l) => links.push(l)})) files.push(f)
    expect(files.map((f) => f.path).sort()).to.deep.equal(['a.iso', 'dir one/b #+%:ü.txt', 'dir one/deep/c.txt'])
    expect(links.sort((a, b) => (a.path < b.path ? -1 : 1))).to.deep.equal([
      {path: 'latest.iso', target: 'a.iso', directory: false},
      {path: 'linked-dir', target: 'dir one', directory: true},
    ])
    expect(warnings.sort()).to.deep.equal([
      'skipped symlink dangling: its target does not exist',
      'skipped symlink dir one/loop: it loops back to .',
      `skipped symlink escape-dir: it points outside the root (${realpathSync(outside)})`,
      `skipped symlink escape.txt: it points outside the root (${realpathSync(join(outside, 'secret.txt'))})`,
    ])
  })

  it('indexes the tree and re-runs incrementally: added, changed, removed, unchanged', async () => {
    const first = await indexOrigin(database.db, root)
    expect(first).to.deep.include({files: 3, added: 3, changed: 0, removed: 0, unchanged: 0, links: 2})
    expect(first.warnings).to.have.length(4)
    const links = (await sql`SELECT path, target, directory FROM file_link ORDER BY path`.execute(database.db)).rows
    expect(links).to.deep.equal([
      {path: 'latest.iso', target: 'a.iso', directory: false},
      {path: 'linked-dir', target: 'dir one', directory: true},
    ])
    expect((await rows()).find((r) => r.path === 'dir one/deep/c.txt')).to.deep.equal({path: 'dir one/deep/c.txt', size: 1, mtime: T + 60})

    const again = await indexOrigin(database.db, root)
    expect(again).to.deep.include({files: 3, added: 0, changed: 0, removed: 0, unchanged: 3})

    write(root, 'new.txt', 'new')
    write(root, 'a.iso', 'aaaaaaaa', T + 10) // latest.iso is a link to it, not a file of its own
    unlinkSync(join(root, 'dir one', 'deep', 'c.txt'))
    const third = await indexOrigin(database.db, root)
    expect(third).to.deep.include({files: 3, added: 1, changed: 1, removed: 1, unchanged: 1})
    const byPath = Object.fromEntries((await rows()).map((r) => [r.path, r]))
    expect(Object.keys(byPath).sort()).to.deep.equal(['a.iso', 'dir one/b #+%:ü.txt', 'new.txt'])
    expect(byPath['a.iso']).to.deep.equal({path: 'a.iso', size: 8, mtime: T + 10})
    const tombstones = (await sql<{path: string}>`SELECT path FROM file_tombstone ORDER BY path`.execute(database.db)).rows.map((r) => r.path)
    expect(tombstones).to.deep.equal(['dir one/deep/c.txt'])
    unlinkSync(join(root, 'linked-dir'))
    expect(await indexOrigin(database.db, root)).to.deep.include({links: 1})
    expect((await sql`SELECT path FROM file_link`.execute(database.db)).rows).to.deep.equal([{path: 'latest.iso'}])
  })

  it('a changed file loses its mirror set and stale records; unchanged files keep theirs', async () => {
    await indexOrigin(database.db, root)
    const mirror = await database.db.insertInto('mirror').values({identifier: 'm1', http_url: 'http://m1/'}).returning('id').executeTakeFirstOrThrow()
    await sql`UPDATE file SET mirrors = ARRAY[${mirror.id}]::smallint[]`.execute(database.db)
    await sql`INSERT INTO mirror_file_stale (mirror_id, file_id, size, mtime) SELECT ${mirror.id}, id, 1, 1 FROM file WHERE path IN ('a.iso', 'new.txt', 'dir one/b #+%:ü.txt')`.execute(database.db)
    write(root, 'a.iso', 'changed!', T)
    const result = await indexOrigin(database.db, root)
    expect(result).to.deep.include({changed: 1, unchanged: 2})
    const sets = Object.fromEntries((await sql<{path: string; mirrors: number[]}>`SELECT path, mirrors FROM file`.execute(database.db)).rows.map((r) => [r.path, r.mirrors]))
    expect(sets['a.iso']).to.deep.equal([])
    expect(sets['dir one/b #+%:ü.txt']).to.deep.equal([mirror.id])
    const stale = (await sql<{path: string}>`SELECT f.path FROM mirror_file_stale s JOIN file f ON f.id = s.file_id`.execute(database.db)).rows.map((r) => r.path)
    expect(stale).to.deep.equal(['dir one/b #+%:ü.txt'])
  })

  it('--dir indexes one subtree and leaves the rest alone', async () => {
    await indexOrigin(database.db, root)
    unlinkSync(join(root, 'a.iso'))
    write(root, 'dir one/added.txt', 'x')
    const result = await indexOrigin(database.db, root, {subdir: 'dir one'})
    expect(result).to.deep.include({files: 3, added: 1, removed: 0})
    expect((await rows()).map((r) => r.path)).to.include('a.iso')
    expect((await sql`SELECT path FROM file_link ORDER BY path`.execute(database.db)).rows).to.deep.equal([{path: 'latest.iso'}, {path: 'linked-dir'}])
  })

  it('a missing root is an error and changes nothing', async () => {
    await indexOrigin(database.db, root)
    const before = await rows()
    let message = ''
    try {
      await indexOrigin(database.db, join(root, 'nope'))
    } catch (error) {
      message = (error as Error).message
    }
    expect(message).to.match(/is not a readable directory \(.*\): pass --root DIR, set MB_ROOT, or set `root:` in the config file\.$/)
    expect(await rows()).to.deep.equal(before)
  })

  it('a walk keeping fewer than minRatio of the files indexed before (an empty mount point) is refused and changes nothing; 0 accepts it', async () => {
    await indexOrigin(database.db, root)
    const before = await rows()
    const links = (await sql`SELECT path FROM file_link ORDER BY path`.execute(database.db)).rows
    const empty = mkdtempSync(join(tmpdir(), 'mb-index-unmounted-'))
    try {
      /** The error a call threw, or undefined. */
      const refusal = (run: Promise<unknown>) =>
        run.then(
          () => undefined,
          (e: MbError) => e,
        )
      const error = await refusal(indexOrigin(database.db, empty, {minRatio: 0.5}))
      expect(error?.code).to.equal('INDEX_TOO_FEW')
      expect(error?.message).to.include(`The walk of ${empty} found 0 of the 3 files indexed there (less than index.min_ratio 0.5); nothing was changed.`)
      expect(await rows()).to.deep.equal(before)
      expect((await sql`SELECT path FROM file_link ORDER BY path`.execute(database.db)).rows).to.deep.equal(links)
      // The share is of the scope walked: two of the three files are under `dir one`, and the walk keeps one of them.
      unlinkSync(join(root, 'dir one', 'deep', 'c.txt'))
      expect(await indexOrigin(database.db, root, {subdir: 'dir one', minRatio: 0.5})).to.deep.include({removed: 1})
      unlinkSync(join(root, 'dir one', 'b #+%:ü.txt'))
      write(root, 'dir one/other.txt', 'x') // a new file is no old file kept
      const inSubdir = await refusal(indexOrigin(database.db, root, {subdir: 'dir one', minRatio: 0.5}))
      expect(inSubdir?.message).to.include(`The walk of ${join(root, 'dir one')} found 0 of the 1 files indexed there`)
      expect(await indexOrigin(database.db, empty, {minRatio: 0})).to.deep.include({files: 0, removed: 2})
      expect(await rows()).to.deep.equal([])
    } finally {
      rmSync(empty, {recursive: true, force: true})
    }
  })

  it('mb index refuses a walk of an empty tree over an index (exit 1, INDEX_TOO_FEW) unless --min-ratio 0; a ratio outside 0..1 is a usage error', async () => {
    await database.close()
    const empty = mkdtempSync(join(tmpdir(), 'mb-index-unmounted-'))
    try {
      expect((await mb(['index', '--root', root], {env: tdb.env})).code).to.equal(0)
      const refused = await mb(['index', '--root', empty, '--json'], {env: tdb.env})
      expect(refused.code, refused.stderr).to.equal(1)
      expect(refused.json().error).to.include({code: 'INDEX_TOO_FEW'})
      expect(refused.json().error.message).to.include('run again with --min-ratio 0')
      const badRatio = await mb(['index', '--root', empty, '--min-ratio', '1.5', '--json'], {env: tdb.env})
      expect(badRatio.code, badRatio.stderr).to.equal(2)
      const accepted = await mb(['index', '--root', empty, '--min-ratio', '0', '--json'], {env: tdb.env})
      expect(accepted.code, accepted.stderr).to.equal(0)
      expect(accepted.json()).to.include({files: 0, removed: 3})
    } finally {
      rmSync(empty, {recursive: true, force: true})
      database = await tdb.open()
    }
  })

  it('mb index leaves out dotfiles, dot directories and rsync partials by default (index.exclude), keeps .treeinfo, and indexes them all with index.exclude: []', async () => {
    await database.close()
    write(root, '.git/config', '[core]')
    write(root, '.htaccess', 'deny')
    write(root, 'dir one/.b.txt.Xa81Qz', 'partial')
    write(root, '.~tmp~/dir one/b.txt', 'delayed')
    write(root, 'os/.treeinfo', '[general]')
    write(root, 'os/.discinfo', '1')
    symlinkSync('a.iso', join(root, '.latest.iso'))
    const config = join(root, '..', `${root.split('/').at(-1)}.yaml`)
    try {
      const first = await mb(['index', '--root', root, '--json'], {env: tdb.env})
      expect(first.code, first.stderr).to.equal(0)
      database = await tdb.open()
      expect((await rows()).map((r) => r.path)).to.deep.equal(['a.iso', 'dir one/b #+%:ü.txt', 'dir one/deep/c.txt', 'os/.discinfo', 'os/.treeinfo'])
      expect((await sql<{path: string}>`SELECT path FROM file_link ORDER BY path`.execute(database.db)).rows.map((r) => r.path)).to.deep.equal(['latest.iso', 'linked-dir'])
      await database.close()
      writeFileSync(config, 'index:\n  exclude: []\n')
      const all = await mb(['index', '--root', root, '--config', config, '--json'], {env: tdb.env})
      expect(all.code, all.stderr).to.equal(0)
      expect(all.json()).to.include({added: 4, links: 3})
      // Back to the default: what it leaves out is removed from the index.
      const again = await mb(['index', '--root', root, '--json'], {env: tdb.env})
      expect(again.json()).to.include({removed: 4})
    } finally {
      rmSync(config, {force: true})
      database = await tdb.open()
    }
  })

  it('mb index with a missing --root or --dir is a usage error (exit 2), like mb serve', async () => {
    await database.close()
    const missing = await mb(['index', '--root', join(root, 'nope'), '--json'], {env: tdb.env})
    expect(missing.code, missing.stderr).to.equal(2)
    expect(missing.json().error.code).to.equal('ROOT_INVALID')
    // No root at all: the wording mb serve and mb push use too (src/lib/origin/root.ts).
    for (const command of [['index'], ['serve']]) {
      const none = await mb([...command, '--json'], {env: {...tdb.env, MB_ROOT: undefined}})
      expect(none.code, none.stderr).to.equal(2)
      expect(none.json().error.message).to.equal('No origin root given: pass --root DIR, set MB_ROOT, or set `root:` in the config file.')
    }
    const outsideDir = await mb(['index', '--root', root, '--dir', 'escape-dir', '--json'], {env: tdb.env})
    expect(outsideDir.code, outsideDir.stderr).to.equal(2)
    expect(outsideDir.json().error.code).to.equal('ROOT_INVALID')
    database = await tdb.open()
  })
})
