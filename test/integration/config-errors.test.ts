// @store-independent: flag and config-file errors
/**
 * Configuration errors and warnings as an operator sees them from `mb`: a bad flag value is
 * reported under the flag that was typed, with what was wrong on the first line (for flags
 * that oclif parses and for flags that the config schema checks); and a config file holding
 * a database password that others can read gets a warning naming the file and the fix.
 */
import {expect} from 'chai'
import {chmodSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {mb} from '../helpers/cli.js'

function firstLine(text: string): string {
  return text.split('\n')[0]
}

describe('config errors and warnings (mb CLI)', function () {
  this.timeout(60_000)
  let dir: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-config-errors-'))
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  it('names the flag typed (--stats-flush-interval) and the bad value on the first line', async () => {
    const result = await mb(['serve', '--root', dir, '--stats-flush-interval', 'abc'])
    expect(result.code).to.equal(2)
    expect(firstLine(result.stderr)).to.equal('Error: Invalid value for --stats-flush-interval (setting stats.flush_interval_seconds): expected a number, but received "abc".')
    const negative = await mb(['serve', '--root', dir, '--stats-flush-interval', '-3'])
    expect(firstLine(negative.stderr)).to.equal('Error: Invalid value for --stats-flush-interval (setting stats.flush_interval_seconds): expected a number above 0, at most 3600, but received "-3".')
  })

  it('refuses a number out of its range alike in `mb config show` and at the start of `mb serve`: exit 2, the key and the range', async () => {
    const file = join(dir, 'huge.yaml')
    writeFileSync(file, 'serve:\n  max_connections_per_client: 1e12\n')
    const expected = `Error: Invalid setting serve.max_connections_per_client in ${file}: expected an integer from 1 to 1000000, but received 1000000000000.`
    const show = await mb(['config', 'show', '--config', file])
    expect(show.code).to.equal(2)
    expect(firstLine(show.stderr)).to.equal(expected)
    const serve = await mb(['serve', '--config', file, '--root', dir, '--listen', '127.0.0.1:0'])
    expect(serve.code).to.equal(2)
    expect(firstLine(serve.stderr)).to.equal(expected)
  })

  it('puts what was wrong with an integer flag on the first line', async () => {
    const result = await mb(['serve', '--root', dir, '--min-size', 'abc'])
    expect(result.code).to.equal(2)
    expect(firstLine(result.stderr)).to.equal('Error: Invalid value for --min-size: expected an integer but received "abc". See --help.')
    const range = await mb(['stats', 'prune', '--daily-retention-days', '0'])
    expect(firstLine(range.stderr)).to.equal('Error: Invalid value for --daily-retention-days: expected an integer greater than or equal to 1 but received "0". See --help.')
    const json = await mb(['serve', '--root', dir, '--workers', '100', '--json'])
    expect(json.code).to.equal(2)
    expect(json.json().error.message).to.equal('Invalid value for --workers: expected an integer less than or equal to 64 but received "100". See --help.')
  })

  it('suggests the flag meant for an unknown one (by name, or by its description), keeping exit 2', async () => {
    const explain = await mb(['file', 'lookup', '--explain', 'a.iso'])
    expect(explain.code).to.equal(2)
    expect(firstLine(explain.stderr)).to.equal('Error: Unknown flag --explain: did you mean --client-ip? See --help.')
    const typo = await mb(['serve', '--root', dir, '--lsiten', '127.0.0.1:0', '--json'])
    expect(typo.code).to.equal(2)
    expect(typo.json().error).to.include({code: 'USAGE', message: 'Unknown flag --lsiten: did you mean --listen? See --help.'})
    const far = await mb(['mirror', 'list', '--frobnicate'])
    expect(far.code).to.equal(2)
    expect(firstLine(far.stderr)).to.equal('Error: Unknown flag --frobnicate. See --help.')
  })

  it('suggests the setting meant for an unknown key in the config file', async () => {
    const file = join(dir, 'typo.yaml')
    writeFileSync(file, 'serve:\n  listne: 127.0.0.1:8080\n')
    const result = await mb(['config', 'show', '--config', file])
    expect(result.code).to.equal(2)
    expect(firstLine(result.stderr)).to.equal(`Error: Invalid setting serve in ${file}: unknown key "listne" (did you mean listen?).`)
    writeFileSync(file, 'roots: /srv/pub\n')
    const top = await mb(['config', 'show', '--config', file])
    expect(top.code).to.equal(2)
    expect(firstLine(top.stderr)).to.equal(`Error: Invalid setting (top level) in ${file}: unknown key "roots" (did you mean root?).`)
  })

  it('names the file for a bad value in a config file', async () => {
    const file = join(dir, 'bad.yaml')
    writeFileSync(file, 'stats:\n  flush_interval_seconds: soon\n')
    const result = await mb(['config', 'show', '--config', file])
    expect(result.code).to.equal(2)
    expect(firstLine(result.stderr)).to.equal(`Error: Invalid setting stats.flush_interval_seconds in ${file}: expected a number, but received "soon".`)
  })

  it('warns when a config file with a database password is readable by all users, not when only its group may read it', async () => {
    const file = join(dir, 'mb.yaml')
    writeFileSync(file, 'database_url: postgres://mb:s3cret@127.0.0.1:1/mb\n')
    chmodSync(file, 0o644)
    const open = await mb(['config', 'show', '--config', file, '--json'])
    expect(open.code).to.equal(0)
    expect(open.stderr).to.contain(`Warning: config file ${file} holds a database password and is readable by all users (mode 644). Restrict it: chmod o-r ${file} (or chmod 600 ${file})`)
    expect(open.stderr).not.to.contain('s3cret')
    chmodSync(file, 0o640)
    const group = await mb(['config', 'show', '--config', file, '--json'])
    expect(group.code).to.equal(0)
    expect(group.stderr).to.equal('')
    chmodSync(file, 0o600)
    const closed = await mb(['config', 'show', '--config', file, '--json'])
    expect(closed.code).to.equal(0)
    expect(closed.stderr).to.equal('')
    // No password, no warning, whatever the mode.
    const plain = join(dir, 'plain.yaml')
    writeFileSync(plain, 'database_url: postgres://mb@127.0.0.1:1/mb\n')
    chmodSync(plain, 0o644)
    expect((await mb(['config', 'show', '--config', plain, '--json'])).stderr).to.equal('')
  })
})
