/**
 * Stopping PostgreSQL under a running `mb serve` leaves redirects (and redirect rules)
 * working from the last snapshot, and serve recovers by itself when the database is back. Uses a private
 * PostgreSQL cluster (initdb in a temp dir, random port), never the machine's shared one.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {chownSync, existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {createServer} from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {sql} from 'kysely'
import {openDatabase} from '../../src/lib/db/index.js'
import {backend} from '../helpers/db.js'
import {type ServeProcess, request, startServe} from '../helpers/serve-process.js'

const PG_BIN = '/usr/lib/postgresql/15/bin'
const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.on('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const {port} = s.address() as {port: number}
      s.close(() => resolve(port))
    })
  })
}

function asPostgres(args: string[]): void {
  const r = spawnSync('runuser', ['-u', 'postgres', '--', ...args], {encoding: 'utf8', timeout: 60_000})
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.status}): ${r.stderr}${r.stdout}`)
}

if (backend === 'postgres') {
  describe('mb serve survives a PostgreSQL outage (private cluster)', function () {
    let dir: string
    let port: number
    let serve: ServeProcess | undefined
    let started = false
    const pgCtl = (...args: string[]) => asPostgres([`${PG_BIN}/pg_ctl`, '-D', join(dir, 'data'), ...args])
    const startPg = () => pgCtl('-o', `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off`, '-l', join(dir, 'pg.log'), '-w', 'start')

    before(async function () {
      if (!existsSync(`${PG_BIN}/initdb`)) {
        if (process.env.CI === 'true') throw new Error(`${PG_BIN}/initdb is missing under CI: install postgresql-15`)
        this.skip()
      }
      dir = mkdtempSync(join(tmpdir(), 'mb-pg-outage-'))
      chownSync(dir, Number(spawnSync('id', ['-u', 'postgres'], {encoding: 'utf8'}).stdout.trim()), Number(spawnSync('id', ['-g', 'postgres'], {encoding: 'utf8'}).stdout.trim()))
      asPostgres([`${PG_BIN}/initdb`, '-D', join(dir, 'data'), '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'])
      port = await freePort()
      startPg()
      started = true
      const url = `postgres://postgres@127.0.0.1:${port}/postgres`
      const database = await openDatabase({url, schema: 'auto'})
      try {
        await database.db
          .insertInto('mirror')
          .values([
            {id: 1, identifier: 'gb.example.org', http_url: 'http://gb.example.org/', country: 'GB', continent: 'EU'},
            {id: 2, identifier: 'se.example.org', http_url: 'http://se.example.org/', country: 'SE', continent: 'EU'},
          ] as any)
          .execute()
        await database.db
          .insertInto('file')
          .values({path: 'big.iso', size: 10_000, mtime: 0, mirrors: [1, 2]})
          .execute()
        // A redirect rule lives in the snapshot too, and keeps applying through the outage.
        await database.db
          .insertInto('redirect_rule')
          .values({name: 'cn', priority: 1, path_glob: '**', countries: ['CN'], target: 'url', url: 'https://cn.example.org/'})
          .execute()
      } finally {
        await database.close()
      }
      const root = join(dir, 'root')
      spawnSync('mkdir', ['-p', root])
      writeFileSync(join(root, 'big.iso'), Buffer.alloc(10_000))
      // The index row says mtime 0: so does the disk (a differing file would be served by the origin).
      utimesSync(join(root, 'big.iso'), 0, 0)
      serve = await startServe(['--root', root, '--geoip', GEOIP, '--trusted-proxy', '127.0.0.1/32'], {MB_DATABASE_URL: url, MB_DATA_DIR: undefined})
    })

    after(async () => {
      await serve?.stop()
      if (started) {
        try {
          pgCtl('-m', 'immediate', 'stop')
        } catch {
          /* already stopped */
        }
      }
      if (dir) rmSync(dir, {recursive: true, force: true})
    })

    it('keeps redirecting while the database is down, then picks up changes after it returns', async () => {
      const gb = {'X-Forwarded-For': '81.2.69.142'}
      expect((await request(serve!.port, '/big.iso', {headers: gb})).headers['x-mb-mirror']).to.equal('gb.example.org')

      pgCtl('-m', 'immediate', 'stop')
      // Through several failed refreshes (poll every 2 s), every request is still redirected.
      for (let i = 0; i < 30; i++) {
        const res = await request(serve!.port, '/big.iso', {headers: gb})
        expect(res.status).to.equal(302)
        expect(res.headers.location).to.equal('http://gb.example.org/big.iso')
        const cn = await request(serve!.port, '/big.iso', {headers: {'X-Forwarded-For': '175.16.199.1'}})
        expect([cn.status, cn.headers.location, cn.headers['x-mb-rule']]).to.deep.equal([302, 'https://cn.example.org/', 'cn'])
        if (serve!.output().includes('database unavailable') && i >= 10) break
        await sleep(200)
      }
      expect(serve!.output()).to.include('database unavailable; serving from the last snapshot')
      expect(serve!.output().split('database unavailable').length - 1).to.equal(1) // logged once

      startPg()
      const database = await openDatabase({url: `postgres://postgres@127.0.0.1:${port}/postgres`})
      try {
        await sql`UPDATE mirror SET enabled = false WHERE identifier = 'gb.example.org'`.execute(database.db)
      } finally {
        await database.close()
      }
      // Recovery: backoff is at most 30 s; the change then shows up without a restart.
      let mirror: unknown
      for (let i = 0; i < 450 && mirror !== 'se.example.org'; i++) {
        mirror = (await request(serve!.port, '/big.iso', {headers: gb})).headers['x-mb-mirror']
        if (mirror !== 'se.example.org') await sleep(100)
      }
      expect(mirror).to.equal('se.example.org')
      expect(serve!.output()).to.include('database reachable again')
    })
  })
}
