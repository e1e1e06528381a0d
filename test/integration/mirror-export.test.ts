/**
 * `mb mirror export --format mirmon`: mirmon's mirror list, `cc url [email]` per public URL
 * of each enabled mirror; credentials never leave, disabled mirrors only with --disabled.
 */
import {mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {mb} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

describe(`mb mirror export --format mirmon (${backend})`, function () {
  this.timeout(120_000)
  let t: TestDatabase
  let secretDir: string | undefined

  before(async () => {
    t = await createTestDatabase()
    const add = async (args: string[]) => {
      const r = await mb(['mirror', 'add', ...args, '--no-probe'], {env: t.env})
      expect(r.code, r.stderr).to.equal(0)
    }
    await add([
      'ftp.example.de',
      '--http-url',
      'http://ftp.example.de/pub/',
      '--https-url',
      'https://ftp.example.de/pub/',
      '--rsync-url',
      'ftp.example.de::pub/',
      '--country',
      'DE',
      '--admin-email',
      'admin@example.de',
    ])
    await add(['private.example.org', '--http-url', 'http://private.example.org/m', '--ftp-url', 'ftp://user:secret@private.example.org/m/', '--country', 'US'])
    await add(['off.example.se', '--http-url', 'http://off.example.se/', '--country', 'SE', '--disabled'])
    secretDir = await mkdtemp(join(tmpdir(), 'mb-export-'))
    const secret = join(secretDir, 'sign-secret')
    await writeFile(secret, 'a-secret-of-enough-length-1234567890')
    await add([
      'signed.example.fr',
      '--https-url',
      'https://signed.example.fr/pub/',
      '--ftp-url',
      'ftp://signed.example.fr/pub/',
      '--country',
      'FR',
      '--sign',
      'nginx_secure_link_md5',
      '--sign-secret-file',
      secret,
    ])
  })

  after(async () => {
    await t?.drop()
    if (secretDir) await rm(secretDir, {recursive: true, force: true})
  })

  it('writes one cc url email line per public URL of each enabled mirror', async () => {
    const r = await mb(['mirror', 'export', '--format', 'mirmon'], {env: t.env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.stdout).to.equal(
      [
        'de http://ftp.example.de/pub/ admin@example.de',
        'de https://ftp.example.de/pub/ admin@example.de',
        'de rsync://ftp.example.de/pub/ admin@example.de',
        'us http://private.example.org/m/',
        // A signing mirror's HTTPS URL refuses unsigned requests; its FTP URL does not.
        'fr ftp://signed.example.fr/pub/',
        '',
      ].join('\n'),
    )
    expect(r.stdout).to.not.contain('secret')
  })

  it('adds disabled mirrors with --disabled, and gives the entries with --json', async () => {
    const r = await mb(['mirror', 'export', '--format', 'mirmon', '--disabled', '--json'], {env: t.env})
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json()).to.deep.include({country: 'se', url: 'http://off.example.se/', email: null})
    expect(r.json()).to.have.length(6)
    const bad = await mb(['mirror', 'export', '--format', 'csv'], {env: t.env})
    expect(bad.code).to.equal(2)
  })
})
