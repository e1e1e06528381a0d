// @store-independent: aria2c and zsync, the torrent and zsync formats
/**
 * The client formats with their own clients, through `mb serve` and real nginx mirrors on
 * loopback:
 * - aria2c downloads an 8 MiB file from mb's `.torrent` and from its `.magnet` using the web
 *   seeds only (DHT, LPD and peer exchange off, no tracker), and routes around a mirror whose
 *   copy is corrupted by the SHA-1 piece hashes;
 * - zsync 0.6.2 updates an older local copy to the new version through mb's `.zsync` from a
 *   mirror, whose access log shows Range requests for only part of the file.
 */
import {createHash, randomBytes} from 'node:crypto'
import {mkdirSync, readFileSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import bencode from 'bencode'
import {expect} from 'chai'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import type {Database} from '../../src/lib/db/index.js'
import {hashIndex} from '../../src/lib/origin/hash.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer as Serve, startServe} from '../../src/lib/redirector/run.js'
import {requireBinary} from '../helpers/cli.js'
import {aria2Repeatable, runClient} from '../helpers/clients.js'
import {type MirroredFile, mirroredFile} from '../helpers/mirrored-file.js'
import {backend} from '../helpers/db.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const SIZE = 8 * 1024 * 1024
const PIECE = 256 * 1024
const ZSYNC_MIN = 1024 * 1024

const run = (command: string, args: string[], cwd?: string) => runClient(command, args, {cwd, limitMs: 180_000})

/** aria2c on web seeds only: no DHT, local peer discovery or peer exchange, and no seeding once complete. */
const ARIA2 = [
  ...aria2Repeatable('info'),
  '--timeout=20',
  '--enable-dht=false',
  '--enable-dht6=false',
  '--bt-enable-lpd=false',
  '--enable-peer-exchange=false',
  '--seed-time=0',
  '--bt-stop-timeout=120',
  '--follow-torrent=mem',
]

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex')

describe(`BitTorrent web seeds and zsync through mb serve (${backend})`, function () {
  let world: MirroredFile
  let database: Database
  let root: string
  let out: string
  let serve: Serve
  /** A plain HTTP server of the origin tree (serve.origin_url), as slow per connection as the mirrors. */
  let originServer: RunningServer
  let mirrors: RunningServer[] = []
  let trees: string[] = []
  const data = randomBytes(SIZE)

  /**
   * The config of an `mb serve` here, `extra` on top. Every request comes from 127.0.0.1: with
   * retries on, each run's .torrent would rank the web seeds anew as a retry.
   */
  const serveConfig = (extra: Record<string, unknown>) =>
    ConfigSchema.parse({root, zsync: {min_size: ZSYNC_MIN}, log_level: 'silent', probe: {content_interval_seconds: 0}, select: {retry_window_seconds: 0}, ...extra})

  before(async function () {
    requireBinary(this, 'aria2c', 'aria2')
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'zsync', 'zsync')
    // Each web seed on its own loopback address: aria2c keeps one connection per host name, so
    // on one address it could fetch every piece from whichever seed it reached first.
    const ranges = (hostname: string) => (tree: string) => ({
      hostname,
      httpConfig: 'log_format ranges \'$request_method $uri $status $body_bytes_sent "$http_range"\';',
      // Slow enough per connection that aria2c spreads its requests over both web seeds.
      serverConfig: `access_log ${join(tree, 'access.log')} ranges; limit_rate 2m;`,
    })
    world = await mirroredFile({
      prefix: 'fmt',
      path: 'pub/big.bin',
      data,
      mirrors: [
        {identifier: 'a.mirror', nginx: ranges('127.0.0.2')},
        {identifier: 'b.mirror', nginx: ranges('127.0.0.3')},
      ],
      hash: {jobs: 2, zsyncMinSize: ZSYNC_MIN},
    })
    ;({database, root, out, mirrors, trees} = world)
    originServer = await startNginx({root, hostname: '127.0.0.4', serverConfig: 'limit_rate 2m;'})
    const zsync = await database.db.selectFrom('file_zsync').select('file_id').execute()
    expect(zsync.length, 'the index wrote zsync sums').to.equal(1)
    // Two mirrors: the web seeds end with the origin only below three (serve.origin_fallback_mirrors, default 2).
    serve = await startServe(serveConfig({serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, origin_url: originServer.url, origin_fallback_mirrors: 3}}), {database})
  })

  after(async () => {
    await serve?.close()
    await originServer?.stop()
    await world?.close()
  })

  it('downloads from the .torrent over the web seeds only, routing around a corrupted copy by the SHA-1 pieces', async () => {
    const torrent = Buffer.from(await (await fetch(`${serve.url}/pub/big.bin.torrent`)).arrayBuffer())
    const seeds = (bencode.decode(torrent)['url-list'] as Uint8Array[]).map((u) => Buffer.from(u).toString())
    expect(seeds.slice(0, 2).sort()).to.deep.equal(mirrors.map((m) => `${m.url}pub/big.bin`).sort())
    expect(seeds[2]).to.equal(`${originServer.url}pub/big.bin`) // serve.origin_url, the last resort
    // The first web seed is the mirror the selection ranks first: corrupt every piece there.
    const bad = mirrors.findIndex((m) => seeds[0] === `${m.url}pub/big.bin`)
    const corrupted = Buffer.from(data)
    for (let at = 0; at < SIZE; at += PIECE) corrupted.fill(0x55, at + 100, at + 9000)
    writeFileSync(join(trees[bad], 'pub', 'big.bin'), corrupted)
    try {
      // An 8 MiB file is below aria2c's --min-split-size (20 MiB): it would take every piece over
      // one connection, from whichever seed it reached first. Split in three, over three hosts,
      // it asks every seed. Should a run still miss the bad one, it runs again (a fresh download).
      let asked = false
      for (let attempt = 0; attempt < 3 && !asked; attempt++) {
        writeFileSync(join(trees[bad], 'access.log'), '')
        const dir = join(out, `torrent-${attempt}`)
        const {code, log} = await run('aria2c', [...ARIA2, '--uri-selector=inorder', '--split=3', '--min-split-size=1M', '--dir', dir, `${serve.url}/pub/big.bin.torrent`])
        expect(code, log.slice(-3000)).to.equal(0)
        expect(sha256(readFileSync(join(dir, 'big.bin')))).to.equal(sha256(data))
        expect(log).to.not.match(/announce/i) // no tracker was asked
        asked = /^GET \/pub\/big\.bin 206 \d+ "bytes=\d+-\d+"$/m.test(readFileSync(join(trees[bad], 'access.log'), 'utf8'))
        // What the bad mirror sent failed its SHA-1 and came again from elsewhere.
        if (asked) expect(log).to.match(/Chunk checksum validation failed/)
      }
      expect(asked, 'aria2c never asked the mirror with the corrupted copy').to.equal(true)
    } finally {
      writeFileSync(join(trees[bad], 'pub', 'big.bin'), data)
    }
  })

  it('downloads from the .magnet: its xs= .torrent is the metadata, the web seeds carry the bytes', async () => {
    const magnet = (await (await fetch(`${serve.url}/pub/big.bin.magnet`)).text()).trim()
    const btih = (await (await fetch(`${serve.url}/pub/big.bin.btih`)).text()).trim()
    const seeds = mirrors.map((m) => `ws=${encodeURIComponent(`${m.url}pub/big.bin`)}`)
    expect(magnet).to.be.oneOf(
      [seeds, [...seeds].reverse()].map(
        (ws) =>
          `magnet:?xt=urn:btih:${btih}&dn=big.bin&xl=${SIZE}&${ws.join('&')}&ws=${encodeURIComponent(`${originServer.url}pub/big.bin`)}&xs=${encodeURIComponent(`${serve.url}/pub/big.bin.torrent`)}`,
      ),
    )
    // aria2c takes a magnet's metadata from peers only (BEP 9) and reads no xs=; what a client
    // that honours xs= does is fetch it. Here that goes into aria2c's metadata cache
    // (<info hash>.torrent, --bt-load-saved-metadata), which aria2c accepts only when the
    // info hash matches the magnet's xt=.
    const dir = join(out, 'magnet')
    mkdirSync(dir, {recursive: true})
    const xs = decodeURIComponent(/&xs=([^&]+)$/.exec(magnet)![1])
    writeFileSync(join(dir, `${btih}.torrent`), Buffer.from(await (await fetch(xs)).arrayBuffer()))
    const {code, log} = await run('aria2c', [...ARIA2, '--bt-load-saved-metadata=true', '--dir', dir, magnet])
    expect(code, log.slice(-3000)).to.equal(0)
    expect(log).to.not.match(/announce/i)
    expect(sha256(readFileSync(join(dir, 'big.bin')))).to.equal(sha256(data))
  })

  it('updates an older local copy with zsync through the .zsync, fetching only part of the file from a mirror', async () => {
    const dir = join(out, 'zsync')
    mkdirSync(dir, {recursive: true})
    for (const tree of trees) writeFileSync(join(tree, 'access.log'), '') // nginx appends: the earlier tests' lines go
    // The older version: the same file with 64 KiB changed in the middle.
    const old = Buffer.from(data)
    randomBytes(64 * 1024).copy(old, SIZE / 2)
    writeFileSync(join(dir, 'big.bin.old'), old)
    const {code, log} = await run('zsync', ['-q', '-i', 'big.bin.old', '-o', 'big.bin', `${serve.url}/pub/big.bin.zsync`], dir)
    expect(code, log).to.equal(0)
    expect(sha256(readFileSync(join(dir, 'big.bin')))).to.equal(sha256(data))
    const lines = mirrors.flatMap((_, i) => readFileSync(join(trees[i], 'access.log'), 'utf8').split('\n')).filter((l) => l.startsWith('GET /pub/big.bin '))
    // Only the 32 changed blocks (2,048 bytes each) were fetched, in one Range request.
    expect(lines).to.deep.equal([`GET /pub/big.bin 206 65536 "bytes=${SIZE / 2}-${SIZE / 2 + 64 * 1024 - 1}"`])
  })

  it('names the .torrent in a Link header of the 302, and in the meta4 only with torrent.meta4_metaurl, after every URL', async () => {
    expect(await (await fetch(`${serve.url}/pub/big.bin.meta4`)).text()).not.to.include('<metaurl')
    const withMetaurl = await startServe(serveConfig({serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, origin_fallback_mirrors: 3}, torrent: {meta4_metaurl: true}}), {database})
    try {
      const meta4 = await (await fetch(`${withMetaurl.url}/pub/big.bin.meta4`)).text()
      const priorities = [...meta4.matchAll(/<url [^>]*priority="(\d+)"/g)].map((m) => Number(m[1]))
      expect(priorities).to.deep.equal([1, 2, 3])
      expect(meta4).to.include(`    <metaurl mediatype="torrent" priority="4">${withMetaurl.url}/pub/big.bin.torrent</metaurl>\n  </file>`)
    } finally {
      await withMetaurl.close()
    }
    const redirect = await fetch(`${serve.url}/pub/big.bin`, {redirect: 'manual', headers: {accept: '*/*'}})
    expect(redirect.status).to.equal(302)
    expect(redirect.headers.get('link')).to.include(`<${serve.url}/pub/big.bin.torrent>; rel=describedby; type="application/x-bittorrent"`)
    const btih = await fetch(`${serve.url}/pub/big.bin.btih`)
    expect(btih.headers.get('content-type')).to.equal('text/plain; charset=utf-8')
    expect((await btih.text()).trim()).to.match(/^[0-9a-f]{40}$/)
    const torrent = await fetch(`${serve.url}/pub/big.bin.torrent`, {method: 'HEAD'})
    expect(torrent.headers.get('content-type')).to.equal('application/x-bittorrent')
    expect(torrent.headers.get('content-disposition')).to.equal('attachment; filename="big.bin.torrent"')
    const zsync = await fetch(`${serve.url}/pub/big.bin.zsync`, {method: 'HEAD'})
    expect(zsync.headers.get('content-type')).to.equal('application/x-zsync')
  })

  it('answers 404 with the reason for a .torrent or .zsync of a file without that data', async () => {
    writeFileSync(join(root, 'pub', 'small.bin'), randomBytes(5000))
    await indexOrigin(database.db, root)
    for (let i = 0; i < 100; i++) {
      if ((await fetch(`${serve.url}/pub/small.bin.torrent`)).status === 404 && (await fetch(`${serve.url}/pub/small.bin.mirrorlist`)).status === 200) break
      await new Promise((r) => setTimeout(r, 100))
    }
    const torrent = await fetch(`${serve.url}/pub/small.bin.torrent`)
    expect(torrent.status).to.equal(404)
    expect(await torrent.text()).to.equal('No BitTorrent piece hashes of /pub/small.bin: it has not been hashed since it last changed (run `mb index --hashes` on the origin).\n')
    await hashIndex(database, root, {jobs: 1, zsyncMinSize: ZSYNC_MIN})
    let zsync: Response | undefined
    for (let i = 0; i < 100; i++) {
      zsync = await fetch(`${serve.url}/pub/small.bin.zsync`)
      if ((await fetch(`${serve.url}/pub/small.bin.btih`)).status === 200) break
      await new Promise((r) => setTimeout(r, 100))
    }
    zsync = await fetch(`${serve.url}/pub/small.bin.zsync`)
    expect(zsync.status).to.equal(404)
    expect(await zsync.text()).to.equal(`/pub/small.bin is smaller than ${ZSYNC_MIN} bytes (zsync.min_size): no .zsync is made for it; download it whole.\n`)
  })
})
