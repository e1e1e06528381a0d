/**
 * The embedded store cannot be lost or opened to others by accident (issue 14, item 6):
 * - a missing store, a wrong MB_DATA_DIR and an unset HOME each fail with a clear error
 *   (exit 1) and create nothing; the four commands that may start a store create it and say
 *   where;
 * - under umask 000 the data directory is 0700, everything in it has no group or other bits,
 *   and the shared socket of `mb serve` is 0600;
 * - scans take the same per-mirror lock whatever the store: a second concurrent scan of one
 *   mirror, beside a running `mb serve`, is refused with a clear message and the data stays
 *   intact (both stores); on PGlite the lock is a lock file that a scan in another process
 *   respects when its holder lives, and takes over when its holder is gone.
 */
import {expect} from 'chai'
import {spawn, spawnSync} from 'node:child_process'
import {existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import net from 'node:net'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {sql} from 'kysely'
import {addMirror} from '../../src/lib/mirrors/registry.js'
import {processStartTime} from '../../src/lib/db/owner-lock.js'
import {acquireLockFile} from '../../src/lib/db/embedded-locks.js'
import {BIN, type CliResult, hermeticEnv, mb} from '../helpers/cli.js'
import {backend, createEmbeddedTestDatabase, createTestDatabase, seedFiles, type TestDatabase, withDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const GEOIP = new URL('../fixtures/geoip/GeoIP2-City-Test.mmdb', import.meta.url).pathname
const T = 1_767_323_040 // 02-Jan-2026 03:04 UTC
/** Environment without any store setting, so each test says which store it means. */
const NO_STORE = {MB_DATABASE_URL: undefined, MB_DATA_DIR: undefined, XDG_DATA_HOME: undefined}

/** Every path under `dir` (and `dir`) whose mode has group or other bits, with its mode. */
function openEntries(dir: string): string[] {
  const found: string[] = []
  const walk = (path: string) => {
    const stat = lstatSync(path)
    if (stat.isSymbolicLink()) return
    if (stat.mode & 0o077) found.push(`${path} ${(stat.mode & 0o7777).toString(8)}`)
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name))
  }
  walk(dir)
  return found
}

/** Runs the compiled `mb ARGS` under umask 000 through sh, as a careless cron line would. */
function mbUmask000(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const quoted = [process.execPath, BIN, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  return new Promise((resolve, reject) => {
    const fullEnv = hermeticEnv(env)
    const child = spawn('sh', ['-c', `umask 000; exec ${quoted}`], {env: fullEnv, stdio: ['ignore', 'pipe', 'pipe']})
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('error', reject)
    child.on('close', (code) => resolve({code: code ?? -1, stdout, stderr, json: () => JSON.parse(stdout)}))
  })
}

/**
 * An HTTP mirror whose index page (`/`, one file `a.iso` of 100 bytes) is held back for the
 * first request until `release()`; `requested` resolves when that request arrives, i.e. when
 * the first scan is inside its lock.
 */
async function startHeldMirror(): Promise<{url: string; requested: Promise<void>; release: () => void; close: () => Promise<void>}> {
  const page = `<html><head><title>Index of /</title></head><body><h1>Index of /</h1><hr><pre><a href="../">../</a>\n<a href="a.iso">a.iso</a>                                              02-Jan-2026 03:04                 100\n</pre><hr></body></html>\n`
  let arrived!: () => void
  const requested = new Promise<void>((resolve) => (arrived = resolve))
  let release!: () => void
  const gate = new Promise<void>((resolve) => (release = resolve))
  let first = true
  const sockets = new Set<net.Socket>()
  const server = net.createServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
    socket.on('error', () => {})
    let head = ''
    socket.on('data', async (data) => {
      if (head.includes('\r\n\r\n')) return
      head += data.toString('latin1')
      if (!head.includes('\r\n\r\n')) return
      if (head.split(' ')[1] !== '/') return void socket.end('HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n')
      if (first) {
        first = false
        arrived()
        await gate
      }
      socket.end(`HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: ${Buffer.byteLength(page)}\r\nConnection: close\r\n\r\n${page}`)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}/`,
    requested,
    release,
    close: () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy()
        server.close(() => resolve())
      }),
  }
}

/** An origin tree holding `a.iso` (100 bytes, mtime T). */
function makeRoot(parent: string): string {
  const root = join(parent, 'root')
  mkdirSync(root)
  writeFileSync(join(root, 'a.iso'), Buffer.alloc(100, 1))
  utimesSync(join(root, 'a.iso'), T, T)
  return root
}

describe('the embedded store on disk (item 6)', function () {
  this.timeout(240_000)
  let dir: string

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-storefiles-'))
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  describe('no store is created by accident', () => {
    it('a command on a missing store fails, names the path and how to point mb elsewhere, and creates nothing', async () => {
      const missing = join(dir, 'nothing', 'here')
      const result = await mb(['mirror', 'list'], {env: {...NO_STORE, MB_DATA_DIR: missing}})
      expect(result.code).to.equal(1)
      expect(result.stderr).to.contain(`No embedded store in ${missing}.`)
      expect(result.stderr).to.contain('MB_DATA_DIR')
      expect(result.stderr).to.contain('MB_DATABASE_URL')
      expect(result.stderr).to.contain('data_dir:')
      expect(existsSync(join(dir, 'nothing'))).to.equal(false)
      const json = await mb(['stats', '--json'], {env: {...NO_STORE, MB_DATA_DIR: missing}})
      expect(json.code).to.equal(1)
      expect(json.json().error.code).to.equal('STORE_NOT_FOUND')
      expect(existsSync(join(dir, 'nothing'))).to.equal(false)
    })

    it('a misspelt MB_DATA_DIR fails for every kind of command and creates nothing; an empty directory stays empty', async () => {
      {
        const typo = join(dir, 'stroe')
        for (const args of [
          ['mirror', 'list'],
          ['scan', '--all'],
          ['db', 'status'],
          ['probe', '--all'],
          ['mirror', 'disable', 'm.example'],
        ]) {
          const result = await mb(args, {env: {...NO_STORE, MB_DATA_DIR: typo}})
          expect(result.code, `${args.join(' ')}: ${result.stderr}`).to.equal(1)
          expect(result.stderr).to.contain(`No embedded store in ${typo}.`)
          expect(existsSync(typo)).to.equal(false)
        }
        const empty = join(dir, 'empty')
        mkdirSync(empty)
        const result = await mb(['mirror', 'list'], {env: {...NO_STORE, MB_DATA_DIR: empty}})
        expect(result.code).to.equal(1)
        expect(readdirSync(empty)).to.deep.equal([])
      }
    })

    it('without HOME (or with a relative one) no default store exists: a clear error, and nothing is created, even by `mb db migrate`', async () => {
      for (const home of [undefined, '', 'relative/home']) {
        for (const args of [
          ['mirror', 'list'],
          ['db', 'migrate'],
        ]) {
          const result = await mb(args, {env: {...NO_STORE, HOME: home, XDG_DATA_HOME: 'relative/xdg'}, cwd: dir})
          expect(result.code, result.stderr).to.equal(1)
          expect(result.stderr).to.contain('No embedded store directory')
          expect(result.stderr).to.contain('HOME')
          expect(result.stderr).to.contain('MB_DATA_DIR')
          expect(readdirSync(dir)).to.deep.equal([])
        }
      }
    })

    it('`mb db migrate` creates a store, says where, and under umask 000 keeps it private (0700, no group/other bits)', async () => {
      const store = join(dir, 'new', 'store')
      const result = await mbUmask000(['db', 'migrate'], {...NO_STORE, MB_DATA_DIR: store})
      expect(result.code, result.stderr).to.equal(0)
      expect(result.stderr).to.contain(`Creating a new embedded store in ${store}`)
      expect(existsSync(join(store, 'PG_VERSION'))).to.equal(true)
      expect(lstatSync(store).mode & 0o7777).to.equal(0o700)
      expect(openEntries(store)).to.deep.equal([])
      // a second run finds the store: nothing is created, nothing said
      const again = await mbUmask000(['db', 'status'], {...NO_STORE, MB_DATA_DIR: store})
      expect(again.code, again.stderr).to.equal(0)
      expect(again.stderr).to.not.contain('Creating')
      // a store whose modes were opened (an older mb, a careless copy) is made private when opened
      spawnSync('chmod', ['-R', 'go+rwX', store])
      expect(openEntries(store).length).to.be.greaterThan(100)
      const reopened = await mb(['mirror', 'list', '--json'], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(reopened.code, reopened.stderr).to.equal(0)
      expect(openEntries(store)).to.deep.equal([])
    })

    it('`mb mirror add` and `mb index` create a store and say where; a relative MB_DATA_DIR is named absolutely', async () => {
      const added = await mb(['mirror', 'add', '--no-locate', 'm.example', '--http-url', 'http://m.example/'], {env: {...NO_STORE, MB_DATA_DIR: 'rel-store'}, cwd: dir})
      expect(added.code, added.stderr).to.equal(0)
      expect(added.stderr).to.contain(`Creating a new embedded store in ${join(dir, 'rel-store')}`)
      const root = makeRoot(dir)
      const store = join(dir, 'index-store')
      const indexed = await mb(['index', '--root', root], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(indexed.code, indexed.stderr).to.equal(0)
      expect(indexed.stderr).to.contain(`Creating a new embedded store in ${store}`)
      const lookup = await mb(['file', 'lookup', 'a.iso', '--json'], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(lookup.code, lookup.stderr).to.equal(0)
    })

    it('--quiet creates a store without a word; MB_DEBUG names the config and the store before opening it, also when that fails', async () => {
      const store = join(dir, 'quiet-store')
      const quiet = await mb(['mirror', 'add', '--quiet', '--no-locate', 'q.example', '--http-url', 'http://q.example/'], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(quiet.code, quiet.stderr).to.equal(0)
      expect([quiet.stdout, quiet.stderr]).to.deep.equal(['', ''])
      expect(existsSync(join(store, 'PG_VERSION'))).to.equal(true)
      const missing = join(dir, 'no-such-store')
      const debug = await mb(['mirror', 'list'], {env: {...NO_STORE, MB_DATA_DIR: missing, MB_DEBUG: '1'}})
      expect(debug.code).to.equal(1)
      expect(debug.stderr.split('\n')[0]).to.equal(`mb: config none, store pglite ${missing}`)
      expect(debug.stderr).to.contain('No embedded store in')
    })
  })

  describe('`mb serve` on a new store', () => {
    let serve: ServeProcess | undefined
    afterEach(async () => {
      await serve?.stop()
      serve = undefined
    })

    it('creates it, says where, and under umask 000 keeps the store private and its socket 0600', async () => {
      const store = join(dir, 'served')
      const root = makeRoot(dir)
      const umask = process.umask(0) // inherited by mb serve
      try {
        serve = await startServe(['--root', root, '--geoip', GEOIP], {...NO_STORE, MB_DATA_DIR: store})
      } finally {
        process.umask(umask)
      }
      expect(serve.output()).to.contain(`Creating a new embedded store in ${store}`)
      const socket = join(store, '.s.PGSQL.5432')
      expect(lstatSync(socket).isSocket()).to.equal(true)
      expect(lstatSync(socket).mode & 0o777).to.equal(0o600)
      expect(lstatSync(store).mode & 0o7777).to.equal(0o700)
      // a client of the socket writes through it
      const added = await mb(['mirror', 'add', '--no-locate', 'm.example', '--http-url', 'http://m.example/'], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(added.code, added.stderr).to.equal(0)
      expect(added.stderr).to.not.contain('Creating')
      expect(openEntries(store)).to.deep.equal([])
    })
  })

  describe('socket_group', () => {
    let serve: ServeProcess | undefined
    afterEach(async () => {
      await serve?.stop()
      serve = undefined
    })

    it('lets one group reach the socket: socket 0660, data directory 0710 and locks 2770 of that group; files stay private', async () => {
      const gid = Number(spawnSync('getent', ['group', 'daemon'], {encoding: 'utf8'}).stdout.split(':')[2])
      expect(gid).to.be.a('number').and.not.NaN
      const store = join(dir, 'grouped')
      const config = join(dir, 'mb.yaml')
      writeFileSync(config, 'socket_group: daemon\n')
      serve = await startServe(['--root', makeRoot(dir), '--geoip', GEOIP, '--config', config], {...NO_STORE, MB_DATA_DIR: store})
      const socket = lstatSync(join(store, '.s.PGSQL.5432'))
      expect([socket.mode & 0o7777, socket.gid]).to.deep.equal([0o660, gid])
      const top = lstatSync(store)
      expect([top.mode & 0o7777, top.gid]).to.deep.equal([0o710, gid])
      const locks = lstatSync(join(store, 'locks'))
      expect([locks.mode & 0o7777, locks.gid]).to.deep.equal([0o2770, gid])
      const others = openEntries(store).filter((e) => !e.startsWith(`${store} `) && !e.startsWith(join(store, 'locks')) && !e.includes('.s.PGSQL'))
      expect(others).to.deep.equal([])
      const listed = await mb(['mirror', 'list', '--json', '--config', config], {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(listed.code, listed.stderr).to.equal(0)
    })

    it('an unknown group is a usage error (exit 2) that creates nothing', async () => {
      const config = join(dir, 'mb.yaml')
      writeFileSync(config, 'socket_group: no-such-group-mb\n')
      const result = await mb(['db', 'migrate', '--config', config], {env: {...NO_STORE, MB_DATA_DIR: join(dir, 'store')}})
      expect(result.code).to.equal(2)
      expect(result.stderr).to.contain('there is no group no-such-group-mb')
      expect(readdirSync(dir)).to.deep.equal(['mb.yaml'])
    })
  })

  describe('the per-mirror scan lock', () => {
    let test: TestDatabase | undefined
    let serve: ServeProcess | undefined
    let mirror: Awaited<ReturnType<typeof startHeldMirror>> | undefined

    afterEach(async () => {
      mirror?.release()
      await serve?.stop()
      await mirror?.close()
      serve = undefined
      mirror = undefined
      await test?.drop()
      test = undefined
    })

    /**
     * A store (`embedded`: a PGlite one whatever the test backend) holding the origin's `a.iso`
     * and the held mirror, seeded in-process as `mb index` and `mb mirror add --no-probe` would;
     * returns its env.
     */
    async function prepare(embedded = false): Promise<{env: Record<string, string | undefined>; root: string}> {
      test = embedded ? await createEmbeddedTestDatabase() : await createTestDatabase()
      const root = makeRoot(dir)
      mirror = await startHeldMirror()
      const url = mirror.url
      await withDatabase(test, async (database) => {
        await seedFiles(database, root, ['a.iso'], [])
        await addMirror(database.db, {identifier: 'held.example', http_url: url})
      })
      return {env: {...NO_STORE, ...test.env}, root}
    }

    /** The mirrors the store says hold `a.iso`. */
    function holders(): Promise<string[]> {
      return withDatabase(test!, async (database) => {
        const rows = await sql<{identifier: string}>`SELECT m.identifier FROM file f JOIN mirror m ON m.id = ANY(f.mirrors) WHERE f.path = 'a.iso'`.execute(database.db)
        return rows.rows.map((r) => r.identifier)
      })
    }

    it('beside a running `mb serve` (umask 000): a second scan of one mirror is refused, the first completes, the data is intact, the socket is 0600', async () => {
      const {env, root} = await prepare()
      expect(await holders()).to.deep.equal([])
      const start = (env: Record<string, string | undefined>) => startServe(['--root', root, '--geoip', GEOIP], env)
      const umask = process.umask(0) // inherited by mb serve
      try {
        serve = await start(env)
      } finally {
        process.umask(umask)
      }
      if (backend === 'pglite') {
        const socket = join(test!.dataDir!, '.s.PGSQL.5432')
        expect(lstatSync(socket).isSocket()).to.equal(true)
        expect(lstatSync(socket).mode & 0o777).to.equal(0o600)
      }
      const first = mb(['scan', 'held.example', '--json'], {env})
      await mirror!.requested
      const second = await mb(['scan', 'held.example', '--json'], {env})
      expect(second.code, second.stdout + second.stderr).to.equal(1)
      expect(second.stdout + second.stderr).to.contain('held.example is being scanned by another process right now; this scan was refused')
      mirror!.release()
      const done = await first
      expect(done.code, done.stdout + done.stderr).to.equal(0)
      expect(await holders()).to.deep.equal(['held.example'])
      // the lock is free again: a third scan runs
      const third = await mb(['scan', 'held.example', '--json'], {env})
      expect(third.code, third.stdout + third.stderr).to.equal(0)
      if (backend === 'pglite') {
        expect(readdirSync(join(test!.dataDir!, 'locks'))).to.deep.equal([])
        expect(openEntries(test!.dataDir!).filter((e) => !e.includes('.s.PGSQL'))).to.deep.equal([])
      }
    })

    it('on PGlite, a scan lock file of a live process refuses the scan; one of a dead process, or of a reused pid, is taken over', async () => {
      const {env} = await prepare(true)
      mirror!.release()
      const locks = join(test!.dataDir!, 'locks')
      const release = acquireLockFile(locks, 'scan:1')
      expect(release).to.be.a('function')
      expect(acquireLockFile(locks, 'scan:1')).to.equal(undefined) // busy within one process too
      const refused = await mb(['scan', 'held.example'], {env})
      expect(refused.code).to.equal(1)
      expect(refused.stderr).to.contain('held.example is being scanned by another process right now; this scan was refused')
      // Not a failure of the protocol tried: no "http: " before the reason.
      expect(refused.stdout + refused.stderr).to.match(/held\.example: FAILED after [\d.]+ s: Mirror held\.example is being scanned/)
      release!()
      const dead = spawnSync(process.execPath, ['-e', 'console.log(process.pid)'], {encoding: 'utf8'})
      writeFileSync(join(locks, 'scan:1'), `${Number(dead.stdout)} 12345\n`)
      const afterDead = await mb(['scan', 'held.example'], {env})
      expect(afterDead.code, afterDead.stderr).to.equal(0)
      expect(existsSync(join(locks, 'scan:1'))).to.equal(false)
      writeFileSync(join(locks, 'scan:1'), `${process.pid} ${Number(processStartTime(process.pid)) + 1}\n`)
      const afterReuse = await mb(['scan', 'held.example'], {env})
      expect(afterReuse.code, afterReuse.stderr).to.equal(0)
      expect(readdirSync(locks)).to.deep.equal([])
    })
  })
})
