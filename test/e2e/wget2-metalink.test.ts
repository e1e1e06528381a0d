// @store-independent: wget2 and the metalink format
/**
 * wget2 (Debian's wget2) downloads a 3 MiB file from `mb serve`'s Metalink 4 document, as
 * it comes by default (one list of SHA-1 pieces), from two real nginx mirrors on loopback,
 * and must end by itself with the right bytes. (wget2 1.99 adds every `<pieces>` list of a
 * file up into one: with a second list it asks for pieces past the end of the file forever.
 * It also re-fetches a piece that fails its hash from the same mirror, so a corrupt first
 * mirror keeps it busy until stopped: docs/selection.md, "Clients and bad mirrors".)
 */
import {createHash, randomBytes} from 'node:crypto'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {requireBinary} from '../helpers/cli.js'
import {runClient} from '../helpers/clients.js'
import {type MirroredFile, mirroredFile} from '../helpers/mirrored-file.js'
import {backend} from '../helpers/db.js'

const SIZE = 3 * 1024 * 1024
const LIMIT_MS = 20_000

/** Runs wget2 with `args` in `cwd` (where it writes a metalink's file, whatever --directory-prefix says), killed after {@link LIMIT_MS} (code -1). */
const wget2 = (args: string[], cwd: string) => runClient('wget2', args, {cwd, limitMs: LIMIT_MS})

describe(`wget2 through mb serve's meta4 (${backend})`, function () {
  this.timeout(120_000)
  let world: MirroredFile
  let database: Database
  let root: string
  let out: string
  let serve: Serve
  const data = randomBytes(SIZE)
  const sha256 = createHash('sha256').update(data).digest('hex')

  before(async function () {
    requireBinary(this, 'wget2', 'wget2')
    requireBinary(this, 'nginx', 'nginx-light')
    world = await mirroredFile({
      prefix: 'wget2',
      path: 'pub/file.bin',
      data,
      mirrors: [
        {identifier: '0.mirror', nginx: () => ({hostname: '127.0.0.2'})},
        {identifier: '1.mirror', nginx: () => ({hostname: '127.0.0.3'})},
      ],
    })
    ;({database, root, out} = world)
    serve = await startServe(ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, log_level: 'silent', probe: {content_interval_seconds: 0}}), {database})
  })

  after(async () => {
    await serve?.close()
    await world?.close()
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
