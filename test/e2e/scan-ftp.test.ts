// @store-independent: the FTP lister against vsftpd (no store)
/**
 * The FTP lister against a real vsftpd on loopback (plain and explicit FTPS), on the shared
 * mirror tree, plus fault cases: connection refused, a server that never answers, a base
 * directory that does not exist (550), a refused login.
 */
import {expect} from 'chai'
import {mkdir, symlink} from 'node:fs/promises'
import {join} from 'node:path'
import {createFtpLister, type FtpListerOptions} from '../../src/lib/scan/ftp.js'
import type {ListOptions, ListingEntry} from '../../src/lib/scan/types.js'
import {requireBinary} from '../helpers/cli.js'
import {collectListing, listingFailure as failure} from '../helpers/listing.js'
import {createMirrorTree, expectedFileSet, MIRROR_TREE_MTIME, type MirrorTree} from '../helpers/mirror-tree.js'
import {refusedPort, startSilentServer, startVsftpd, type RunningServer} from '../helpers/servers.js'

const collect = (url: string, options: FtpListerOptions = {}, listOptions: ListOptions = {}) => collectListing((onWarning) => createFtpLister({...options, onWarning}), url, listOptions)

const files = (entries: ListingEntry[]) => new Map(entries.filter((e) => e.type === 'file').map((e) => [e.path, e.size]))

describe('e2e: FTP lister against vsftpd', function () {
  let tree: MirrorTree
  let expected: Map<string, number>
  let ftp: RunningServer
  let ftps: RunningServer

  before(async function () {
    requireBinary(this, 'vsftpd', 'vsftpd')
    requireBinary(this, 'openssl', 'openssl')
    tree = await createMirrorTree()
    // FTP-only extras: a loop back to an ancestor and a link to nothing.
    await mkdir(join(tree.root, 'loops'), {mode: 0o755})
    await symlink('..', join(tree.root, 'loops', 'up'))
    await symlink('../no such target', join(tree.root, 'loops', 'broken'))
    expected = await expectedFileSet(tree.root)
    ftp = await startVsftpd({root: tree.root})
    ftps = await startVsftpd({root: tree.root, tls: 'required'})
  })

  after(async () => {
    await ftp?.stop()
    await ftps?.stop()
    await tree?.cleanup()
  })

  it('lists the same file set (paths and sizes) as the tree serves, skipping .~tmp~', async () => {
    const {entries, warnings} = await collect(ftp.url)
    expect(expected.size).to.be.greaterThan(10_000)
    const got = files(entries)
    expect(got.size).to.equal(expected.size)
    for (const [path, size] of expected) expect(got.get(path), path).to.equal(size)
    expect(entries.some((e) => e.path.split('/').includes('.~tmp~'))).to.equal(false)
    // Directories, including the empty one and the symlinked one, are entries too.
    const dirs = new Set(entries.filter((e) => e.type === 'dir').map((e) => e.path))
    for (const d of ['empty-dir', 'linked-dir', 'linked-dir/nested', 'a:b dir', 'dir with space/sub#dir', 'ünï', 'bulk/099']) expect(dirs.has(d), d).to.equal(true)
    // The loop is cut and the broken link is reported, not followed.
    expect(dirs.has('loops/up')).to.equal(false)
    expect(entries.find((e) => e.path === 'loops/broken')).to.deep.include({type: 'symlink', size: 0})
    expect(warnings.some((w) => /loops\/up .*a loop/.test(w))).to.equal(true)
    expect(warnings.some((w) => /loops\/broken/.test(w))).to.equal(true)
  })

  it('gives UTC mtimes with the precision the listing has', async () => {
    const {entries} = await collect(ftp.url + 'real%20dir/')
    const big = entries.find((e) => e.path === 'big.iso')!
    // vsftpd shows "Jan 02  2026" for an old file: a date only.
    expect(big).to.deep.equal({path: 'big.iso', type: 'file', size: 100_000, mtime: Date.UTC(2026, 0, 2) / 1000, mtimePrecision: 86_400})
    expect(Math.abs(big.mtime! - MIRROR_TREE_MTIME)).to.be.below(big.mtimePrecision!)
    // A symlinked file: the target's size and its MDTM time (seconds).
    const {entries: root} = await collect(ftp.url)
    expect(root.find((e) => e.path === 'link-to-file.bin')).to.deep.equal({path: 'link-to-file.bin', type: 'file', size: 1536, mtime: MIRROR_TREE_MTIME, mtimePrecision: 1})
  })

  it('lists one subtree with `subdir`, paths still relative to the base', async () => {
    const {entries} = await collect(ftp.url, {}, {subdir: 'dir with space'})
    expect(entries.map((e) => `${e.type} ${e.path} ${e.size}`).sort()).to.deep.equal([
      'dir dir with space/sub#dir 0',
      'file dir with space/inner file.txt 18',
      'file dir with space/sub#dir/deep+file.txt 19',
    ])
  })

  it('lists one folder with `recursive: false`: its entries, no subfolder entered', async () => {
    const {entries} = await collect(ftp.url, {}, {subdir: 'dir with space', recursive: false})
    expect(entries.map((e) => `${e.type} ${e.path} ${e.size}`).sort()).to.deep.equal(['dir dir with space/sub#dir 0', 'file dir with space/inner file.txt 18'])
  })

  it('speaks explicit FTPS (AUTH TLS): refuses a self-signed certificate by default, lists with allowSelfSigned', async () => {
    const url = ftps.url.replace('ftp://', 'ftps://')
    const error = await failure(collect(url + 'sizes/'))
    expect(error.message).to.match(/^FTPS certificate of 127\.0\.0\.1:\d+ is not trusted \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)\)/)
    const {entries} = await collect(url, {allowSelfSigned: true})
    const got = files(entries)
    expect(got.size).to.equal(expected.size)
    for (const [path, size] of expected) expect(got.get(path), path).to.equal(size)
    // The same server refuses plain FTP logins (force_anon_logins_ssl).
    const plain = await failure(collect(ftps.url))
    expect(plain.message).to.match(/FTP login to 127\.0\.0\.1:\d+ refused \(530/)
  })

  it('fails with a clear reason when the base directory does not exist (550)', async () => {
    const error = await failure(collect(ftp.url + 'nope/deeper'))
    expect(error.message).to.match(/^FTP base directory \/nope\/deeper does not exist on 127\.0\.0\.1:\d+ \(550 Failed to change directory\.\); check the mirror's FTP URL$/)
    expect(error.code).to.equal('SCAN_BASE_MISSING')
  })

  it('tells a --dir folder the mirror lacks (base enters: SCAN_DIR_ABSENT) from a broken base (SCAN_BASE_MISSING)', async () => {
    for (const recursive of [false, true]) {
      const absent = await failure(collect(ftp.url, {}, {subdir: 'new', recursive}))
      expect(absent.code).to.equal('SCAN_DIR_ABSENT')
      expect(absent.message).to.match(/^FTP directory \/new does not exist on 127\.0\.0\.1:\d+ \(550 .*\): the folder is not on the mirror$/)
    }
    const broken = await failure(collect(ftp.url + 'nope/', {}, {subdir: 'new', recursive: false}))
    expect(broken.code).to.equal('SCAN_BASE_MISSING')
    expect(broken.message).to.match(/^FTP directory \/nope\/new \(--dir new\) does not exist/)
  })

  it('fails with a clear reason when the login is refused, without showing the password', async () => {
    const url = ftp.url.replace('ftp://', 'ftp://mirroruser:hunter2@')
    const error = await failure(collect(url))
    expect(error.message).to.match(/^FTP login to 127\.0\.0\.1:\d+ refused \(530 .*\); check the user and password/)
    expect(error.message).to.not.include('hunter2')
    expect(error.code).to.equal('SCAN_AUTH')
  })

  it('fails with a clear reason when the connection is refused, without showing credentials', async () => {
    const port = await refusedPort()
    const error = await failure(collect(`ftp://user:hunter2@127.0.0.1:${port}/pub/`))
    expect(error.message).to.equal(`FTP connection to 127.0.0.1:${port} refused (ECONNREFUSED); is an FTP server running there?`)
    expect(error.code).to.equal('SCAN_CONNECT')
  })

  it('fails with a clear reason when the server accepts and never answers', async () => {
    const silent = await startSilentServer()
    try {
      const error = await failure(collect(silent.url('ftp'), {}, {connectTimeoutSeconds: 1, ioTimeoutSeconds: 1}))
      expect(error.message).to.match(
        new RegExp(`^FTP server 127\\.0\\.0\\.1:${silent.port} did not (complete the connection and login within 1 s \\(connect timeout\\)|answer within 1 s while connecting \\(idle timeout\\))`),
      )
      expect(error.code).to.equal('SCAN_TIMEOUT')
    } finally {
      await silent.stop()
    }
  })

  it('stops cleanly when aborted', async () => {
    const controller = new AbortController()
    const lister = createFtpLister()
    let seen = 0
    let caught: unknown
    try {
      for await (const _ of lister.list(ftp.url, {signal: controller.signal})) {
        if (++seen === 50) controller.abort()
      }
    } catch (error) {
      caught = error
    }
    expect(caught).to.be.instanceOf(Error)
    expect(seen).to.be.at.least(50)
    expect(seen).to.be.below(expected.size)
  })
})
