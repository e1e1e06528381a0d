// @store-independent: wget2 and the metalink format
/**
 * wget2 (Debian's wget2) downloads a 3 MiB file from `mb serve`'s Metalink 4 document, as
 * it comes by default (one list of SHA-1 pieces), from two real nginx mirrors on loopback,
 * and must end by itself with the right bytes. (wget2 1.99 adds every `<pieces>` list of a
 * file up into one: with a second list it asks for pieces past the end of the file forever.
 * It also re-fetches a piece that fails its hash from the same mirror, so a corrupt first
 * mirror keeps it busy until stopped: docs/selection.md, "Clients and bad mirrors".)
 */
import {spawn} from 'node:child_process'
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/serve/lifecycle/run.js'
import {requireBinary} from '../helpers/cli.js'
import {backend, createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const SIZE = 3 * 1024 * 1024
const LIMIT_MS = 20_000

/** Runs wget2 with `args` in `cwd` (where it writes a metalink's file, whatever --directory-prefix says), killed after {@link LIMIT_MS} (code -1). */
function wget2(args: string[], cwd: string): Promise<{code: number; log: string}> {
  return new Promise((resolve, reject) => {
    const child = spawn('wget2', args, {cwd, stdio: ['ignore', 'pipe', 'pipe']})
    let log = ''
    child.stdout.on('data', (d) => (log += d))
    child.stderr.on('data', (d) => (log += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), LIMIT_MS)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({code: code ?? -1, log})
    })
  })
}

describe(`wget2 through mb serve's meta4 (${backend})`, function () {
  this.timeout(120_000)
  let test: TestDatabase
  let database: Database
  let root: string
  let out: string
  let serve: Serve
  const mirrors: RunningServer[] = []
  const trees: string[] = []
  const data = randomBytes(SIZE)
  const sha256 = createHash('sha256').update(data).digest('hex')

  before(async function () {
    requireBinary(this, 'wget2', 'wget2')
    requireBinary(this, 'nginx', 'nginx-light')
    test = await createTestDatabase()
    database = await test.open()
    root = mkdtempSync(join(tmpdir(), 'mb-wget2-origin-'))
    out = mkdtempSync(join(tmpdir(), 'mb-wget2-out-'))
    mkdirSync(join(root, 'pub'))
    writeFileSync(join(root, 'pub', 'file.bin'), data)
    for (const [i, name] of ['a', 'b'].entries()) {
      const tree = mkdtempSync(join(tmpdir(), `mb-wget2-${name}-`))
      mkdirSync(join(tree, 'pub'))
      writeFileSync(join(tree, 'pub', 'file.bin'), data)
      trees.push(tree)
      mirrors.push(await startNginx({root: tree, hostname: `127.0.0.${i + 2}`}))
    }
    await indexOrigin(database.db, root)
    await hashIndex(database, root, {jobs: 1})
    const ids: number[] = []
    for (const [i, m] of mirrors.entries()) {
      const row = await database.db
        .insertInto('mirror')
        .values({identifier: `${i}.mirror`, http_url: m.url, country: 'DE', continent: 'EU', last_scan_ok_at: new Date()} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      ids.push(row.id)
    }
    await database.db.updateTable('file').set({mirrors: ids}).execute()
    serve = await startServe(ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, log_level: 'silent', probe: {content_interval_seconds: 0}}), {database})
  })

  after(async () => {
    await serve?.close()
    for (const m of mirrors) await m.stop()
    await database?.close()
    await test?.drop()
    for (const dir of [root, out, ...trees]) if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('downloads FILE.meta4 (one list of SHA-1 pieces) and ends by itself with the right bytes', async () => {
    const meta4 = await (await fetch(`${serve.url}/pub/file.bin.meta4`)).text()
    // One list: wget2 adds every <pieces> of a file up into one, so a second list would put
    // pieces past the end of the file, which it would ask for forever.
    expect([...meta4.matchAll(/<pieces length="262144" type="([^"]+)">/g)].map((m) => m[1])).to.deep.equal(['sha-1'])
    const {code, log} = await wget2(['--no-config', '--tries=3', '--timeout=10', `${serve.url}/pub/file.bin.meta4`], out)
    expect(log).to.include("Checksum OK for 'file.bin'")
    expect(code, log.slice(-3000)).to.equal(0)
    expect(
      createHash('sha256')
        .update(readFileSync(join(out, 'file.bin')))
        .digest('hex'),
    ).to.equal(sha256)
  })
})
