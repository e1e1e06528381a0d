// @store-independent: signature links and the meta4 format
/**
 * Detached signatures beside origin files: the 302 links `FILE.asc` (or `.sig`) as
 * `rel=describedby; type="application/pgp-signature"`, the meta4 carries an armored one in
 * `<signature>` (valid against the RFC 5854 schema), and a "signature" larger than its file
 * is none.
 */
import {randomBytes} from 'node:crypto'
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {validateXML} from 'xmllint-wasm'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {backend, useTestDatabase} from '../helpers/db.js'

const SCHEMA = readFileSync(new URL('../fixtures/metalink/metalink4.rng', import.meta.url), 'utf8')
const ARMORED = '-----BEGIN PGP SIGNATURE-----\n\niHUEABYKAB0WIQTexample<&>\n=abcd\n-----END PGP SIGNATURE-----'

describe(`signatures beside files in mb serve (${backend})`, () => {
  const store = useTestDatabase()
  let root: string
  let running: RunningServer
  let base: string

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-signature-'))
    writeFileSync(join(root, 'signed.iso'), randomBytes(100_000))
    writeFileSync(join(root, 'signed.iso.asc'), `${ARMORED}\n`)
    writeFileSync(join(root, 'binary.iso'), randomBytes(100_000))
    writeFileSync(join(root, 'binary.iso.sig'), randomBytes(119))
    writeFileSync(join(root, 'tiny.iso'), randomBytes(5000))
    writeFileSync(join(root, 'tiny.iso.asc'), randomBytes(6000))
    writeFileSync(join(root, 'plain.iso'), randomBytes(100_000))
    await indexOrigin(store.database.db, root)
    const row = await store.database.db
      .insertInto('mirror')
      .values({identifier: 'm.mirror', http_url: 'http://m.mirror/pub/', country: 'DE', continent: 'EU', last_scan_ok_at: new Date()} as any)
      .returning('id')
      .executeTakeFirstOrThrow()
    await store.database.db
      .updateTable('file')
      .set({mirrors: [row.id]})
      .execute()
    // Retries off: every request here comes from 127.0.0.1, and repeats would walk the ranking.
    running = await startServe(ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, select: {retry_window_seconds: 0}, log_level: 'silent'}), {database: store.database})
    base = running.url
  })

  after(async () => {
    await running?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  const signatureLinks = async (path: string) => {
    const res = await fetch(`${base}/${path}`, {redirect: 'manual'})
    expect(res.status, path).to.equal(302)
    return (res.headers.get('link') ?? '').split(', ').filter((link) => link.includes('application/pgp-signature'))
  }

  it('links the signature from the redirect', async () => {
    expect(await signatureLinks('signed.iso')).to.deep.equal([`<${base}/signed.iso.asc>; rel=describedby; type="application/pgp-signature"`])
    expect(await signatureLinks('binary.iso')).to.deep.equal([`<${base}/binary.iso.sig>; rel=describedby; type="application/pgp-signature"`])
    expect(await signatureLinks('tiny.iso')).to.deep.equal([])
    expect(await signatureLinks('plain.iso')).to.deep.equal([])
  })

  it('carries an armored signature in the meta4, and leaves a binary one out', async () => {
    const signed = await (await fetch(`${base}/signed.iso.meta4`)).text()
    const escaped = ARMORED.replace('<&>', '&lt;&amp;&gt;')
    expect(signed).to.include(`    <signature mediatype="application/pgp-signature">${escaped}</signature>\n`)
    const result = await validateXML({xml: {fileName: 'doc.meta4', contents: signed}, schema: {fileName: 'metalink4.rng', contents: SCHEMA}, extension: 'relaxng'})
    expect(result.valid, result.rawOutput).to.equal(true)
    for (const path of ['binary.iso', 'tiny.iso', 'plain.iso']) expect(await (await fetch(`${base}/${path}.meta4`)).text(), path).to.not.include('<signature')
  })

  it('follows mb index: a signature added later is linked, a removed one no more', async () => {
    writeFileSync(join(root, 'plain.iso.asc'), `${ARMORED}\n`)
    rmSync(join(root, 'signed.iso.asc'))
    await indexOrigin(store.database.db, root)
    let plain: string[] = []
    for (let i = 0; i < 100 && plain.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      plain = await signatureLinks('plain.iso')
    }
    expect(plain).to.deep.equal([`<${base}/plain.iso.asc>; rel=describedby; type="application/pgp-signature"`])
    expect(await signatureLinks('signed.iso')).to.deep.equal([])
    const rows = await store.database.db.selectFrom('file').select(['path', 'signature']).where('signature', 'is not', null).orderBy('path').execute()
    expect(rows).to.deep.equal([
      {path: 'binary.iso', signature: '.sig'},
      {path: 'plain.iso', signature: '.asc'},
    ])
  })
})
