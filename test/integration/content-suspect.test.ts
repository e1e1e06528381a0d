/**
 * A mirror with many corrupt copies becomes suspect (`probe.suspect_bad_copies`, migration
 * 0022), as after a refused scan: a content round that finds at least that many corrupt
 * copies sets `mirror.bad_copies_suspect_at` (selection reason `bad_copies`), a round that
 * finds fewer (the copies repaired) clears it, and so does `mb mirror edit --trust-scan`.
 * A local HTTP server with Range support plays the mirror; `mb mirror show` runs as the CLI.
 */
import {expect} from 'chai'
import {randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {trustScan} from '../../src/lib/mirrors/registry.js'
import {checkMirrorContents} from '../../src/lib/probe/content-check.js'
import {compileMirror} from '../../src/lib/select/mirror.js'
import {mb} from '../helpers/cli.js'
import {backend, seedMirrorHoldingAll, type TestDatabase} from '../helpers/db.js'
import {hashedOrigin} from '../helpers/mirrored-file.js'
import {httpServer, staticHandler, type TestServer} from '../helpers/probe-servers.js'

const KiB = 1024
const FILES = ['a.iso', 'b.iso', 'c.iso']

describe(`a mirror with many corrupt copies becomes suspect (${backend})`, function () {
  this.timeout(120_000)
  let tdb: TestDatabase
  let database: Database
  let root: string
  let server: TestServer
  let mirrorId: number
  const data = new Map(FILES.map((f) => [f, randomBytes(300 * KiB)]))
  /** What the mirror serves per path: corrupt copies at first. */
  const served: Record<string, Buffer> = {}
  const corrupt = (b: Buffer) => {
    const c = Buffer.from(b)
    for (let offset = 100; offset < c.length; offset += 64 * KiB) c[offset] ^= 0xff
    return c
  }
  const config = (threshold: number) => ConfigSchema.parse({probe: {suspect_bad_copies: threshold}}).probe
  const suspectAt = async () => (await database.db.selectFrom('mirror').select('bad_copies_suspect_at').where('id', '=', mirrorId).executeTakeFirstOrThrow()).bad_copies_suspect_at

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-suspect-'))
    mkdirSync(join(root, 'pub'))
    for (const [f, b] of data) {
      writeFileSync(join(root, 'pub', f), b)
      served[`pub/${f}`] = corrupt(b)
    }
    server = await httpServer(staticHandler(served))
    ;({test: tdb, database} = await hashedOrigin(root))
    mirrorId = await seedMirrorHoldingAll(database, 'bad.test', `http://127.0.0.1:${server.port}/`)
  })

  after(async () => {
    await database?.close()
    await tdb?.drop()
    await server?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('below the threshold the mirror is not suspect; at it, it is, with reason bad_copies; mb mirror show says so', async () => {
    const first = await checkMirrorContents(database, config(4))
    expect(first.mirrors[0]).to.include({marked_bad: 3, suspect: false})
    expect(await suspectAt()).to.equal(null)
    const second = await checkMirrorContents(database, config(3))
    expect(second.mirrors[0]).to.include({marked_bad: 0, suspect: true})
    const since = await suspectAt()
    expect(since).to.be.an.instanceOf(Date)
    const row = await database.db.selectFrom('mirror').selectAll().where('id', '=', mirrorId).executeTakeFirstOrThrow()
    expect(compileMirror(row).badCopiesSuspectAt).to.equal(Math.floor(since!.getTime() / 1000))
    // Another round keeps the time it first became suspect.
    await checkMirrorContents(database, config(3))
    expect((await suspectAt())!.getTime()).to.equal(since!.getTime())
    await database.close() // PGlite: one process per data directory, and the CLI is another
    const show = await mb(['mirror', 'show', 'bad.test', '--json'], {env: tdb.env})
    expect(show.code, show.stderr).to.equal(0)
    expect(show.json()).to.include({bad_copies: 3, suspect_bad_copies: 10})
    expect(show.json().bad_copies_suspect_at).to.be.a('string')
    const text = await mb(['mirror', 'show', 'bad.test'], {env: tdb.env})
    expect(text.stdout).to.match(/suspect:?\s+yes, since .*content checks found too many corrupt copies/)
    expect(text.stdout).to.match(/bad_copies:?\s+3: .*\(the mirror is suspect from 10: probe\.suspect_bad_copies\)/)
    database = await tdb.open()
  })

  it('a round that finds fewer (copies repaired) clears it; --trust-scan clears it too', async () => {
    served['pub/a.iso'] = data.get('a.iso')!
    const repaired = await checkMirrorContents(database, config(3))
    expect(repaired.mirrors[0]).to.include({cleared: 1, suspect: false})
    expect(await suspectAt()).to.equal(null)
    // Suspect again at a lower threshold, then the operator's word.
    await checkMirrorContents(database, config(2))
    expect(await suspectAt()).to.be.an.instanceOf(Date)
    const trusted = await trustScan(database.db, 'bad.test')
    expect(trusted.changed).to.equal(true)
    expect(await suspectAt()).to.equal(null)
  })
})
