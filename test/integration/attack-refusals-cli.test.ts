// @store-independent: the CLI's refusal of hostile names and globs
/**
 * Names and globs the attack run got stored or matched (issue 36 item 10), through the
 * compiled CLI: each is refused with exit 2 and a message, and nothing changes.
 */
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
