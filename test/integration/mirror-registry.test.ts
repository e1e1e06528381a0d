import {expect} from 'chai'
import {MbError, UsageError} from '../../src/lib/errors.js'
import {addMirror, editMirror, listMirrors, removeMirror, resolveMirror, setEnabled} from '../../src/lib/mirrors/registry.js'
import {publicMirror} from '../../src/lib/mirrors/public.js'
import {backend, useTestDatabase} from '../helpers/db.js'

async function caught(promise: Promise<unknown>): Promise<MbError> {
  try {
    await promise
  } catch (error) {
    expect(error).to.be.instanceOf(MbError)
    return error as MbError
  }
  throw new Error('expected an MbError, but the call succeeded')
}

describe(`mirror registry (${backend})`, () => {
  const store = useTestDatabase()

  it('adds mirrors with defaults, derives the continent from the country, and stores 4-byte ASNs', async () => {
    const de = await addMirror(store.database.db, {identifier: 'ftp.example.de', http_url: 'http://ftp.example.de/pub', country: 'de', asn: '4294967295', prefixes: ['192.0.2.0/24', '2001:db8::/32']})
    expect(de).to.include({identifier: 'ftp.example.de', http_url: 'http://ftp.example.de/pub/', country: 'DE', continent: 'EU', score: 100, enabled: true, base_path: '', needs_rescan: false})
    expect(Number(de.asn)).to.equal(4294967295)
    expect(publicMirror(de).prefixes).to.deep.equal(['192.0.2.0/24', '2001:db8::/32'])
    const ru = await addMirror(store.database.db, {identifier: 'mirror.example.ru', https_url: 'https://mirror.example.ru/', country: 'RU', continent: 'as', enabled: false})
    expect(ru).to.include({country: 'RU', continent: 'AS', enabled: false})
    await addMirror(store.database.db, {identifier: 'ftp.example.dk', https_url: 'https://ftp.example.dk/', country: 'DK'})
  })

  it('refuses a duplicate name, ignoring case, with MIRROR_EXISTS (exit 1)', async () => {
    const error = await caught(addMirror(store.database.db, {identifier: 'FTP.Example.DE', http_url: 'http://other.example/'}))
    expect(error.code).to.equal('MIRROR_EXISTS')
    expect(error.exitCode).to.equal(1)
    expect(error.message).to.contain('"ftp.example.de" already exists')
    expect((await listMirrors(store.database.db)).length).to.equal(3)
  })

  it('resolves exact names, names in another case, and unambiguous prefixes', async () => {
    await addMirror(store.database.db, {identifier: 'ftp.example.d', http_url: 'http://ftp.example.d.example/'})
    expect((await resolveMirror(store.database.db, 'ftp.example.d')).identifier).to.equal('ftp.example.d') // exact beats the prefix of .de/.dk
    expect((await resolveMirror(store.database.db, 'FTP.EXAMPLE.DK')).identifier).to.equal('ftp.example.dk')
    expect((await resolveMirror(store.database.db, 'mirror.ex')).identifier).to.equal('mirror.example.ru')
    const ambiguous = await caught(resolveMirror(store.database.db, 'ftp.ex'))
    expect(ambiguous).to.be.instanceOf(UsageError)
    expect(ambiguous.code).to.equal('AMBIGUOUS_MIRROR')
    expect(ambiguous.exitCode).to.equal(2)
    expect(ambiguous.message).to.contain('ftp.example.d, ftp.example.de, ftp.example.dk')
    const missing = await caught(resolveMirror(store.database.db, 'nope'))
    expect(missing.code).to.equal('MIRROR_NOT_FOUND')
    expect(missing.exitCode).to.equal(1)
    // LIKE wildcards in a name are literal characters, not patterns ('%' is no valid name at all).
    expect((await caught(resolveMirror(store.database.db, '%'))).code).to.equal('INVALID_MIRROR_FIELD')
    expect((await caught(resolveMirror(store.database.db, 'ftp_example'))).code).to.equal('MIRROR_NOT_FOUND')
    await removeMirror(store.database.db, 'ftp.example.d')
  })

  it('refuses to remove by a mere prefix unless it is confirmed', async () => {
    await addMirror(store.database.db, {identifier: 'zz.throwaway', http_url: 'http://zz.throwaway/pub/'})
    const refused = await caught(removeMirror(store.database.db, 'zz'))
    expect(refused.code).to.equal('PREFIX_NOT_CONFIRMED')
    expect(refused.exitCode).to.equal(2)
    expect(refused.message).to.contain('mb mirror remove zz.throwaway')
    expect((await resolveMirror(store.database.db, 'zz.throwaway')).identifier).to.equal('zz.throwaway')
    expect((await removeMirror(store.database.db, 'zz', {allowPrefix: true})).identifier).to.equal('zz.throwaway')
    expect((await caught(resolveMirror(store.database.db, 'zz.throwaway'))).code).to.equal('MIRROR_NOT_FOUND')
  })

  it('edits only the given fields, follows the country with the continent; a URL change is url_changed, a base_path change needs a rescan', async () => {
    const before = await resolveMirror(store.database.db, 'ftp.example.de')
    const {mirror, changed} = await editMirror(store.database.db, 'ftp.example.de', {score: '150', country: 'at'})
    expect(changed).to.deep.equal(['score', 'country']) // the continent stays EU
    expect(mirror).to.include({score: 150, country: 'AT', continent: 'EU', http_url: before.http_url, needs_rescan: false})
    expect(Number(mirror.asn)).to.equal(4294967295)
    const moved = await editMirror(store.database.db, 'ftp.example.de', {country: 'US', https_url: 'https://ftp.example.de/pub/'})
    expect(moved.mirror).to.include({country: 'US', continent: 'NA', https_url: 'https://ftp.example.de/pub/', needs_rescan: false, range_ok: null})
    expect(moved.mirror.url_changed_at).to.be.instanceOf(Date)
    const rebased = await editMirror(store.database.db, 'ftp.example.de', {base_path: 'sub'})
    expect(rebased.mirror).to.include({needs_rescan: true})
    const unchanged = await editMirror(store.database.db, 'ftp.example.de', {score: 150})
    expect(unchanged.changed).to.deep.equal([])
  })

  it("forgets a scheme's probe result when that scheme's URL changes, and keeps the other's", async () => {
    const {id} = await resolveMirror(store.database.db, 'ftp.example.de')
    await store.database.db.updateTable('mirror').set({http_up: true, https_up: false}).where('id', '=', id).execute()
    await editMirror(store.database.db, 'ftp.example.de', {https_url: 'https://mirror2.example.de/pub/'})
    expect(await resolveMirror(store.database.db, 'ftp.example.de')).to.include({http_up: true, https_up: null})
    await editMirror(store.database.db, 'ftp.example.de', {score: 151})
    expect(await resolveMirror(store.database.db, 'ftp.example.de')).to.include({http_up: true, https_up: null})
    await editMirror(store.database.db, 'ftp.example.de', {http_url: 'http://mirror2.example.de/pub/'})
    expect(await resolveMirror(store.database.db, 'ftp.example.de')).to.include({http_up: null, https_up: null})
  })

  it('clears optional fields with an empty value or --clear', async () => {
    await editMirror(store.database.db, 'ftp.example.de', {latitude: '48.2', longitude: '16.4', comment: 'Vienna'})
    const {mirror} = await editMirror(store.database.db, 'ftp.example.de', {asn: '', comment: ''}, ['prefix', 'lat'])
    expect(mirror).to.include({asn: null, comment: null, latitude: null, longitude: null})
    expect(publicMirror(mirror).prefixes).to.deep.equal([])
    const bad = await caught(editMirror(store.database.db, 'ftp.example.de', {}, ['score']))
    expect(bad).to.be.instanceOf(UsageError)
    expect(bad.message).to.match(/Cannot clear "score"/)
    const both = await caught(editMirror(store.database.db, 'ftp.example.de', {asn: '3320'}, ['asn']))
    expect(both.message).to.match(/both set and cleared/)
  })

  it('a refused edit changes nothing', async () => {
    const before = await resolveMirror(store.database.db, 'ftp.example.dk')
    const attempts: Array<[Parameters<typeof editMirror>[2], RegExp]> = [
      [{score: '120', country: 'XX'}, /--country "XX"/],
      [{score: '120', latitude: '10'}, /--lat and --lon go together/],
      [{country_only: true, as_only: true}, /exclude each other/],
      [{https_url: ''}, /needs a base URL/],
      [{score: '120', base_path: '../etc'}, /--base-path/],
      [{}, /Nothing to change/],
    ]
    for (const [input, message] of attempts) {
      const error = await caught(editMirror(store.database.db, 'ftp.example.dk', input))
      expect(error.exitCode, String(message)).to.equal(2)
      expect(error.message).to.match(message)
    }
    await editMirror(store.database.db, 'ftp.example.dk', {country_only: true})
    const conflict = await caught(editMirror(store.database.db, 'ftp.example.dk', {region_only: true}))
    expect(conflict.message).to.match(/--country-only and --region-only exclude each other.*--no-country-only/)
    const renamed = await caught(editMirror(store.database.db, 'ftp.example.dk', {identifier: 'MIRROR.example.ru'}))
    expect(renamed.code).to.equal('MIRROR_EXISTS')
    const after = await resolveMirror(store.database.db, 'ftp.example.dk')
    expect({...after, country_only: false, updated_at: null, txid: null}).to.deep.equal({...before, updated_at: null, txid: null})
    const switched = await editMirror(store.database.db, 'ftp.example.dk', {country_only: false, region_only: true})
    expect(switched.mirror).to.include({country_only: false, region_only: true})
  })

  it('renames, enables and disables mirrors', async () => {
    const {mirror} = await editMirror(store.database.db, 'ftp.example.dk', {identifier: 'mirror.example.dk'})
    expect(mirror.identifier).to.equal('mirror.example.dk')
    expect((await setEnabled(store.database.db, 'mirror.example.dk', false)).changed).to.equal(true)
    expect((await setEnabled(store.database.db, 'mirror.example.dk', false)).changed).to.equal(false)
    expect((await setEnabled(store.database.db, 'mirror.example.ru', true)).mirror.enabled).to.equal(true)
  })

  it('lists with filters', async () => {
    const names = async (filter: Parameters<typeof listMirrors>[1]) => (await listMirrors(store.database.db, filter)).map((m) => m.identifier)
    expect(await names({})).to.deep.equal(['ftp.example.de', 'mirror.example.dk', 'mirror.example.ru'])
    expect(await names({country: 'dk'})).to.deep.equal(['mirror.example.dk'])
    expect(await names({continent: 'AS'})).to.deep.equal(['mirror.example.ru'])
    expect(await names({enabled: false})).to.deep.equal(['mirror.example.dk'])
    expect((await caught(listMirrors(store.database.db, {country: 'XX'}))).exitCode).to.equal(2)
  })

  it('removes a mirror together with its place in file mirror sets and its stale records', async () => {
    const de = await resolveMirror(store.database.db, 'ftp.example.de')
    const dk = await resolveMirror(store.database.db, 'mirror.example.dk')
    const file = await store.database.db
      .insertInto('file')
      .values({path: 'a.iso', size: 10, mtime: 1, mirrors: [de.id, dk.id]})
      .returning('id')
      .executeTakeFirstOrThrow()
    await store.database.db.insertInto('mirror_file_stale').values({mirror_id: dk.id, file_id: file.id, size: 9}).execute()
    const removed = await removeMirror(store.database.db, 'mirror.example.dk')
    expect(removed.identifier).to.equal('mirror.example.dk')
    const row = await store.database.db.selectFrom('file').select('mirrors').where('id', '=', file.id).executeTakeFirstOrThrow()
    expect(row.mirrors).to.deep.equal([de.id])
    expect(await store.database.db.selectFrom('mirror_file_stale').selectAll().execute()).to.deep.equal([])
    expect((await caught(removeMirror(store.database.db, 'mirror.example.dk'))).code).to.equal('MIRROR_NOT_FOUND')
  })
})
