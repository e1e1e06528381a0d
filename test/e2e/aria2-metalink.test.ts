// @store-independent: aria2c, the metalink and Link/Digest headers, nginx mirrors
/**
 * aria2c (Debian's aria2) downloads a 16 MiB file through `mb serve` from two real nginx
 * mirrors on loopback, one of which has one piece corrupted on disk: first from the .meta4
 * (its SHA-1 piece hashes let aria2c re-fetch the bad piece), then run with no flags at all against the default
 * server (`aria2c URL`, `aria2c URL.meta4`, `aria2c --metalink-location=CC URL.meta4`: each
 * ends by itself with the right bytes, the last from the mirror in CC), then by following
 * the plain 302 with its
 * Link rel=duplicate / Digest headers (a wrong Digest must make aria2c fail); last, after the
 * origin file changes without `mb index`, the .meta4 leads aria2c to the new bytes.
 */
import {createHash, randomBytes} from 'node:crypto'
import {readFileSync, rmSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {requireBinary} from '../helpers/cli.js'
import {aria2Plain, aria2Repeatable, runClient} from '../helpers/clients.js'
import {type MirroredFile, mirroredFile} from '../helpers/mirrored-file.js'
import {backend} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const SIZE = 16 * 1024 * 1024
const PIECE = 256 * 1024
// The first piece on the mirror ranked first: aria2c's first connection asks that mirror for it.
const BAD_PIECE = 0

/** Runs aria2c with `args`; a run still going after `limitMs` is killed and reported with code -1. */
const aria2c = (args: string[], limitMs = 120_000) => runClient('aria2c', args, {limitMs})

/** `HOST:PORT` of `server` as a regular expression. */
const hostPort = (server: RunningServer) => `${server.host.replaceAll('.', '\\.')}:${server.port}`

const sha256Of = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex')

/** No download options at all: only what keeps the run hermetic (no user config) and its log readable. */
const PLAIN = aria2Plain('debug')

const COMMON = [...aria2Repeatable('debug'), '--timeout=20']

describe(`aria2c through mb serve (${backend})`, function () {
  let world: MirroredFile
  let database: Database
  let root: string
  let out: string
  let serve: Serve
  let mirrors: RunningServer[] = []
  const data = randomBytes(SIZE)
  const sha256 = createHash('sha256').update(data).digest('hex')
  let goodMirror: RunningServer
  let badMirror: RunningServer
  let badCopy: string

  before(async function () {
    requireBinary(this, 'aria2c', 'aria2')
    requireBinary(this, 'nginx', 'nginx-light')
    // Two host names: aria2c keeps one connection per host name unless told otherwise.
    world = await mirroredFile({
      prefix: 'aria2',
      path: 'pub/big.bin',
      data,
      mirrors: [
        {identifier: 'a.mirror', country: 'DE', nginx: () => ({hostname: '127.0.0.2'})},
        {identifier: 'b.mirror', country: 'SE', nginx: () => ({hostname: '127.0.0.3'})},
      ],
      hash: {jobs: 2},
    })
    ;({database, root, out, mirrors} = world)
    const trees = world.trees
    // The defaults: the file has BitTorrent data, and the meta4 names no .torrent (torrent.meta4_metaurl).
    // Retries off: every request here comes from 127.0.0.1, and with them on, a fetch that waits
    // for a change would count as a retry and move the next client's 302 along the ranking.
    serve = await startServe(
      ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2}, log_level: 'silent', probe: {content_interval_seconds: 0}, select: {retry_window_seconds: 0}}),
      {database},
    )
    // Corrupt one piece on the mirror that the selection ranks first for this client.
    const first = /<url[^>]*priority="1"[^>]*>([^<]+)</.exec(await (await fetch(`${serve.url}/pub/big.bin.meta4`)).text())![1]
    const index = mirrors.findIndex((m) => first.startsWith(m.url))
    expect(index).to.be.oneOf([0, 1])
    badMirror = mirrors[index]
    goodMirror = mirrors[1 - index]
    badCopy = join(trees[index], 'pub', 'big.bin')
    const corrupted = Buffer.from(data)
    corrupted.fill(0x55, BAD_PIECE * PIECE + 1000, BAD_PIECE * PIECE + 5000)
    writeFileSync(badCopy, corrupted)
  })

  after(async () => {
    await serve?.close()
    await world?.close()
  })

  it('downloads from the .meta4 using both mirrors and re-fetches the corrupted piece', async () => {
    const meta4 = await (await fetch(`${serve.url}/pub/big.bin.meta4`)).text()
    expect([...meta4.matchAll(/<pieces length="262144" type="([^"]+)">/g)].map((m) => m[1])).to.deep.equal(['sha-1'])
    expect(meta4).not.to.include('<metaurl')
    const {code, log} = await aria2c([...COMMON, '--dir', out, '--split=8', '--max-connection-per-server=4', '--min-split-size=1M', '--follow-metalink=mem', `${serve.url}/pub/big.bin.meta4`])
    expect(code, log.slice(-3000)).to.equal(0)
    const got = readFileSync(join(out, 'big.bin'))
    expect(got.length).to.equal(SIZE)
    expect(createHash('sha256').update(got).digest('hex')).to.equal(sha256)
    // Both mirrors served ranges.
    for (const m of [goodMirror, badMirror]) {
      expect(log, `no ranged request to ${m.url}`).to.match(new RegExp(`Host: ${hostPort(m)}[\\s\\S]{0,400}?Range: bytes=\\d+-`))
    }
    // The corrupted piece failed its hash and was fetched again.
    expect(log).to.match(new RegExp(`Chunk checksum validation failed\\. checksumIndex=${BAD_PIECE},`))
    expect(log).to.match(
      new RegExp(
        `Good chunk checksum\\. hash=${createHash('sha1')
          .update(data.subarray(BAD_PIECE * PIECE, (BAD_PIECE + 1) * PIECE))
          .digest('hex')}`,
      ),
    )
  })

  it('`aria2c URL` with no flags takes the meta4 (its Accept asks for one) and ends by itself with the right bytes, a corrupt mirror in the list', async () => {
    const dir = join(out, 'plain')
    const started = Date.now()
    const {code, log} = await aria2c([...PLAIN, '--dir', dir, `${serve.url}/pub/big.bin`], 60_000)
    expect(code, log.slice(-3000)).to.equal(0)
    expect(Date.now() - started).to.be.below(60_000)
    expect(log).to.match(/Content-Type: application\/metalink4\+xml/)
    expect(log).to.not.match(/BitTorrent|seeding/i)
    expect(sha256Of(readFileSync(join(dir, 'big.bin')))).to.equal(sha256)
  })

  it('`aria2c URL.meta4` ends by itself with the right bytes', async () => {
    writeFileSync(badCopy, data)
    const plain = await aria2c([...PLAIN, '--dir', join(out, 'meta4'), `${serve.url}/pub/big.bin.meta4`], 60_000)
    expect(plain.code, plain.log.slice(-3000)).to.equal(0)
    expect(sha256Of(readFileSync(join(out, 'meta4', 'big.bin')))).to.equal(sha256)
  })

  it('`aria2c --metalink-location=CC URL.meta4` ends by itself with the bytes of the mirror in CC, although mb ranks it second', async () => {
    // aria2c prefers a host it has already fetched from fast (here mb's, for the meta4): the
    // origin form on that host would win over every mirror. With two mirrors the meta4 names no
    // origin at all (serve.origin_fallback_mirrors), not even a plain origin server of its own
    // (serve.origin_url), so the locations decide.
    const originServer = await startNginx({root, hostname: '127.0.0.4'})
    const withOrigin = await startServe(
      ConfigSchema.parse({
        root,
        serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, origin_url: originServer.url},
        log_level: 'silent',
        probe: {content_interval_seconds: 0},
        select: {retry_window_seconds: 0},
      }),
      {database},
    )
    try {
      const meta4 = await (await fetch(`${withOrigin.url}/pub/big.bin.meta4`)).text()
      expect(meta4).to.not.include(originServer.url)
      expect(meta4).to.not.include('priority="3"')
      const [, cc, url] = /<url location="(\w\w)" priority="2">([^<]+)<\/url>/.exec(meta4)!
      const wanted = mirrors.find((m) => url.startsWith(m.url))!
      const local = await aria2c([...PLAIN, `--metalink-location=${cc}`, '--dir', join(out, cc), `${withOrigin.url}/pub/big.bin.meta4`], 60_000)
      expect(local.code, local.log.slice(-3000)).to.equal(0)
      expect(sha256Of(readFileSync(join(out, cc, 'big.bin')))).to.equal(sha256)
      // Every request for the file went to the mirror in CC: none to the other mirror or the origin.
      expect(local.log).to.match(new RegExp(`GET /pub/big\\.bin HTTP/1\\.1\\r?\\n(?:[^\\r\\n]+\\r?\\n)*?Host: ${hostPort(wanted)}\\r?\\n`))
      for (const other of [...mirrors.filter((m) => m !== wanted), originServer]) expect(local.log).to.not.match(new RegExp(`Host: ${hostPort(other)}\\r?\\n`))
    } finally {
      await withOrigin.close()
      await originServer.stop()
    }
  })

  it('follows the plain 302 with Link rel=duplicate and Digest, and fails on a wrong Digest', async () => {
    writeFileSync(badCopy, data) // both copies good: the whole-file Digest covers every range
    rmSync(join(out, 'big.bin'), {force: true})
    // aria2c asks for metalinks in Accept by default (and mb answers those with the meta4);
    // a client that knows only Metalink/HTTP sends a plain Accept.
    const ok = await aria2c([...COMMON, '--header=Accept: */*', '--dir', out, '--split=4', '--max-connection-per-server=2', '--min-split-size=1M', `${serve.url}/pub/big.bin`])
    expect(ok.code, ok.log.slice(-3000)).to.equal(0)
    // The 302 carried the alternatives and the Digest, and aria2c took the Digest.
    expect(ok.log).to.match(/HTTP\/1\.1 302 Found/)
    expect(ok.log).to.include(`Link: <${goodMirror.url}pub/big.bin>; rel=duplicate`)
    expect(ok.log).to.include(`Link: <${serve.url}/pub/big.bin.meta4>; rel=describedby`)
    expect(ok.log).to.match(/Digest: SHA-256=/)
    expect(ok.log).to.match(/Setting digest: type=sha-256/)
    expect(
      createHash('sha256')
        .update(readFileSync(join(out, 'big.bin')))
        .digest('hex'),
    ).to.equal(sha256)

    // A wrong SHA-256 in the index (still "fresh") makes the Digest header lie.
    await database.db
      .updateTable('file')
      .set({sha256: 'f'.repeat(64), md5: '0'.repeat(32), sha1: '1'.repeat(40)})
      .where('path', '=', 'pub/big.bin')
      .execute()
    let digest: string | null = null
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${serve.url}/pub/big.bin`, {redirect: 'manual'})
      digest = res.headers.get('digest')
      if (digest?.startsWith(`SHA-256=${Buffer.from('f'.repeat(64), 'hex').toString('base64')}`)) break
      await sleep(100)
    }
    expect(digest).to.include(Buffer.from('f'.repeat(64), 'hex').toString('base64'))
    rmSync(join(out, 'big.bin'), {force: true})
    const bad = await aria2c([...COMMON, '--header=Accept: */*', '--dir', out, '--max-tries=1', `${serve.url}/pub/big.bin`])
    expect(bad.code, bad.log.slice(-2000)).to.not.equal(0)
    expect(bad.log).to.match(/Checksum validation failed\. expected=f{64}/)
    expect(bad.log).to.include('Checksum error detected')
  })

  it('after the origin file changes (no `mb index`), `aria2c URL.meta4` ends with the new bytes', async () => {
    // The mirrors keep the old copy; the origin gets new content of another size.
    const changed = randomBytes(SIZE + 4096)
    writeFileSync(join(root, 'pub', 'big.bin'), changed)
    await sleep(1100) // serve.disk_check_seconds: one stat vouches for at most 1 s
    rmSync(join(out, 'big.bin'), {force: true})
    const {code, log} = await aria2c([...COMMON, '--dir', out, '--split=4', '--max-connection-per-server=2', '--min-split-size=1M', '--follow-metalink=mem', `${serve.url}/pub/big.bin.meta4`])
    expect(code, log.slice(-3000)).to.equal(0)
    const got = readFileSync(join(out, 'big.bin'))
    expect(got.length).to.equal(SIZE + 4096)
    expect(createHash('sha256').update(got).digest('hex')).to.equal(createHash('sha256').update(changed).digest('hex'))
    // No range came from the mirrors' old copies.
    for (const m of mirrors) expect(log).to.not.match(new RegExp(`Host: ${hostPort(m)}\\r?\\n`))
  })
})
