// @store-independent: the CLI's refusal of hostile names and globs
/**
 * Names and globs the attack run got stored or matched (issue 36 item 10), through the
 * compiled CLI: each is refused with exit 2 and a message, and nothing changes.
 */
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

describe(`attack-run refusals through the CLI (${backend})`, function () {
  this.timeout(300_000)
  let tdb: TestDatabase
  let env: Record<string, string>

  before(async () => {
    tdb = await createTestDatabase()
    env = tdb.env
    const added = await mb(['mirror', 'add', 'm1', '--http-url', 'http://m1.example/pub/', '--country', 'DE', '--no-probe'], {env})
    expect(added.code, added.stderr).to.equal(0)
  })

  after(async () => {
    await tdb?.drop()
  })

  it('refuses a --sign-secret-file that is a device without end, too large, empty or blank, naming the file, and changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-secret-'))
    try {
      writeFileSync(join(dir, 'large'), `${'x'.repeat(5000)}\n`)
      writeFileSync(join(dir, 'empty'), '')
      writeFileSync(join(dir, 'blank'), '\n\n  \n')
      mkdirSync(join(dir, 'dir'))
      const cases: Array<[string, string]> = [
        ['/dev/zero', '--sign-secret-file /dev/zero holds more than 4096 bytes'],
        [join(dir, 'large'), `--sign-secret-file ${join(dir, 'large')} holds more than 4096 bytes`],
        [join(dir, 'empty'), `--sign-secret-file ${join(dir, 'empty')} holds no secret (it is empty or blank)`],
        [join(dir, 'blank'), `--sign-secret-file ${join(dir, 'blank')} holds no secret (it is empty or blank)`],
        [join(dir, 'dir'), `--sign-secret-file ${join(dir, 'dir')} cannot be read: EISDIR`],
      ]
      for (const [file, message] of cases) {
        const r = await mb(['mirror', 'edit', 'm1', '--sign', 'nginx_secure_link_md5', '--sign-secret-file', file], {env})
        expect(r.code, `${file}: ${r.stderr}`).to.equal(2)
        expect(r.stderr).to.contain(message)
      }
      const show = (await mb(['mirror', 'show', 'm1', '--json'], {env})).json()
      expect(show.sign_scheme).to.equal(null)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('clears --sign and --sign-secret-file by their flag names, as the refusal of an unknown --clear lists them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-secret-'))
    try {
      writeFileSync(join(dir, 'secret'), 'abcdefghijklmnopqrstuvwx\n')
      const signed = await mb(
        ['mirror', 'add', 'signed', '--http-url', 'http://signed.example/pub/', '--country', 'DE', '--no-probe', '--sign', 'nginx_secure_link_md5', '--sign-secret-file', join(dir, 'secret')],
        {env},
      )
      expect(signed.code, signed.stderr).to.equal(0)
      const unknown = await mb(['mirror', 'edit', 'signed', '--clear', 'nosuch'], {env})
      expect(unknown.code).to.equal(2)
      expect(unknown.stderr).to.contain(', sign, sign-secret-file.')
      const secretOnly = await mb(['mirror', 'edit', 'signed', '--clear', 'sign-secret-file'], {env})
      expect(secretOnly.code).to.equal(2)
      expect(secretOnly.stderr).to.contain('--sign nginx_secure_link_md5 needs the secret the mirror checks')
      const off = await mb(['mirror', 'edit', 'signed', '--clear', 'sign', '--clear', 'sign-secret-file'], {env})
      expect(off.code, off.stderr).to.equal(0)
      expect(off.stdout).to.contain('Updated mirror signed: sign_scheme, sign_secret.')
      const database = await tdb.open()
      try {
        const row = await database.db.selectFrom('mirror').select(['sign_scheme', 'sign_secret']).where('identifier', '=', 'signed').executeTakeFirstOrThrow()
        expect(row).to.deep.equal({sign_scheme: null, sign_secret: null})
      } finally {
        await database.close()
      }
    } finally {
      await mb(['mirror', 'remove', 'signed', '--yes'], {env})
      rmSync(dir, {recursive: true, force: true})
    }
  })

  it('forgets a file whose name holds glob characters (exact path), and refuses a glob that names no file', async () => {
    const root = mkdtempSync(join(tmpdir(), 'mb-forget-'))
    try {
      mkdirSync(join(root, 'q?dir'))
      writeFileSync(join(root, 'q?dir', 'what?.txt'), 'q')
      writeFileSync(join(root, 'b[1]{x}*.iso'), 'b')
      writeFileSync(join(root, 'keep.iso'), 'k')
      const index = await mb(['index', '--root', root], {env})
      expect(index.code, index.stderr).to.equal(0)
      for (const path of ['q?dir/what?.txt', 'b[1]{x}*.iso']) {
        const r = await mb(['file', 'forget', path, '--json'], {env})
        expect(r.code, `${path}: ${r.stderr}`).to.equal(0)
        expect(r.json()).to.include({path, mirror_only: false})
      }
      const glob = await mb(['file', 'forget', '*.iso'], {env})
      expect(glob.code).to.equal(2)
      expect(glob.stderr).to.contain('No indexed file "*.iso": mb file forget takes one exact path, not a glob; nothing was changed')
      const left = (await mb(['file', 'lookup', '*', '--json'], {env})).json()
      expect(left.files.map((f: {path: string}) => f.path)).to.deep.equal(['keep.iso'])
    } finally {
      rmSync(root, {recursive: true, force: true})
    }
  })

  it('refuses a mirror name that add refuses ("m1\\n") in add, edit, show, disable and remove, and changes nothing', async () => {
    const add = await mb(['mirror', 'add', 'm2\n', '--http-url', 'http://m2.example/pub/', '--country', 'DE', '--no-probe'], {env})
    expect(add.code).to.equal(2)
    expect(add.stderr).to.contain('Invalid NAME "m2\\n": character U+000A')
    for (const args of [
      ['mirror', 'edit', 'm1\n', '--score', '5'],
      ['mirror', 'show', 'm1\n'],
      ['mirror', 'disable', ' m1'],
      ['mirror', 'remove', 'm1\n'],
    ]) {
      const r = await mb(args, {env})
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2)
      expect(r.stderr).to.match(/Invalid NAME .*is not allowed/)
    }
    const list = (await mb(['mirror', 'list', '--json'], {env})).json()
    expect(list.map((m: {identifier: string; score: number; enabled: boolean}) => [m.identifier, m.score, m.enabled])).to.deep.equal([['m1', 100, true]])
  })

  it("refuses --include '[' and rule add --path '[' and stores nothing", async () => {
    const include = await mb(['mirror', 'edit', 'm1', '--include', '['], {env})
    expect(include.code).to.equal(2)
    expect(include.stderr).to.contain('Invalid --include "[": not a valid glob pattern: a "[" is not closed by "]"')
    const added = await mb(['mirror', 'add', 'm3', '--http-url', 'http://m3.example/pub/', '--country', 'DE', '--no-probe', '--exclude', '*.{iso'], {env})
    expect(added.code).to.equal(2)
    expect(added.stderr).to.contain('Invalid --exclude "*.{iso"')
    const show = (await mb(['mirror', 'show', 'm1', '--json'], {env})).json()
    expect(show.include_patterns).to.deep.equal([])
    const rule = await mb(['rule', 'add', 'r1', '--path', '[', '--to', 'https://elsewhere.example/'], {env})
    expect(rule.code).to.equal(2)
    expect(rule.stderr).to.contain('Invalid --path "[": not a valid glob')
    expect((await mb(['rule', 'list', '--json'], {env})).json()).to.deep.equal([])
    expect((await mb(['mirror', 'list', '--json'], {env})).json()).to.have.length(1)
  })
})
