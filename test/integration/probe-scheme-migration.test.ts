import {expect} from 'chai'
import type {Kysely} from 'kysely'
import * as m0010 from '../../migrations/0010_probe_scheme.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'

/**
 * Migration 0010 fills `mirror.http_up` / `https_up` of existing mirrors from the per
 * protocol/family states that the prober already kept in `mirror.status`, and its `down`
 * removes them again.
 */
describe(`migration 0010_probe_scheme (${backend})`, function () {
  let tdb: TestDatabase
  before(async () => {
    tdb = await createTestDatabase()
  })
  after(async () => tdb?.drop())

  it('fills the per-scheme summaries from mirror.status, leaving never-probed mirrors null', async () => {
    const database = await tdb.open()
    try {
      const db = database.db as unknown as Kysely<any>
      await m0010.down(db)
      const state = (up: boolean) => ({up, ok_count: up ? 1 : 0, fail_count: up ? 0 : 1, reason: up ? 'ok' : 'tls_error', since: '2026-01-01T00:00:00.000Z'})
      const mirrors = [
        {identifier: 'both.test', status: {checks: {'http/ipv4': state(true), 'https/ipv4': state(false), 'https/ipv6': state(true)}}},
        {identifier: 'v6only.test', status: {checks: {'https/ipv6': state(true)}}},
        {identifier: 'never.test', status: {}},
      ]
      for (const m of mirrors)
        await db
          .insertInto('mirror')
          .values({identifier: m.identifier, http_url: 'http://x.test/', status: JSON.stringify(m.status)})
          .execute()
      await m0010.up(db)
      const rows = await db.selectFrom('mirror').select(['identifier', 'http_up', 'https_up']).orderBy('identifier').execute()
      expect(rows).to.deep.equal([
        {identifier: 'both.test', http_up: true, https_up: false},
        {identifier: 'never.test', http_up: null, https_up: null},
        {identifier: 'v6only.test', http_up: null, https_up: true},
      ])
    } finally {
      await database.close()
    }
  })
})
