// @store-independent: the HTTP lister against nginx and lighttpd (no store)
/**
 * The HTTP lister against real nginx (HTML and JSON autoindex) and lighttpd (mod_dirlisting) on
 * loopback, on the shared mirror tree, plus fault cases: connection refused, a server that
 * never answers, a base that redirects to ftp://, a base that does not exist.
 */
import {expect} from 'chai'
import {readdir, stat, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {createHttpLister, type HttpListerOptions} from '../../src/lib/scan/http.js'
import type {ListOptions, ListingEntry} from '../../src/lib/scan/types.js'
import {requireBinary} from '../helpers/cli.js'
import {collectListing, listingFailure as failure} from '../helpers/listing.js'
import {createMirrorTree, expectedFileSet, MIRROR_TREE_MTIME, type MirrorTree} from '../helpers/mirror-tree.js'
import {refusedPort, startLighttpd, startNginx, startSilentServer, type RunningServer} from '../helpers/servers.js'

const collect = (url: string, options: HttpListerOptions = {}, listOptions: ListOptions = {}) => collectListing((onWarning) => createHttpLister({...options, onWarning}), url, listOptions)

/** Asserts the listing holds exactly the expected files, each size exact or its range holding the true size. */
function expectSameFiles(entries: ListingEntry[], expected: Map<string, number>, exact: boolean): void {
  const got = new Map(entries.filter((e) => e.type === 'file').map((e) => [e.path, e]))
  expect(
    [...got.keys()].filter((p) => !expected.has(p)),
    'extra paths',
  ).to.deep.equal([])
  expect(
    [...expected.keys()].filter((p) => !got.has(p)),
    'missing paths',
  ).to.deep.equal([])
  for (const [path, size] of expected) {
    const e = got.get(path)!
    if (exact) {
      expect(e.size, path).to.equal(size)
      expect(e.sizeApproximate, path).to.equal(undefined)
    } else {
      expect(e.sizeApproximate, path).to.equal(true)
      expect(e.sizeMin! <= size && size <= e.sizeMax!, `${path}: ${size} in [${e.sizeMin}, ${e.sizeMax}]`).to.equal(true)
    }
  }
  expect(entries.some((e) => e.path.split('/').includes('.~tmp~'))).to.equal(false)
  const dirs = new Set(entries.filter((e) => e.type === 'dir').map((e) => e.path))
  for (const d of ['empty-dir', 'linked-dir', 'linked-dir/nested', 'a:b dir', 'dir with space/sub#dir', 'ünï', 'bulk/099']) expect(dirs.has(d), d).to.equal(true)
}

describe('e2e: HTTP lister against nginx and lighttpd', function () {
  let tree: MirrorTree
  let expected: Map<string, number>
  let html: RunningServer
  let json: RunningServer
  let lighttpd: RunningServer

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    requireBinary(this, 'lighttpd', 'lighttpd')
    tree = await createMirrorTree()
    expected = await expectedFileSet(tree.root)
    html = await startNginx({
      root: tree.root,
      autoindex: 'html',
      serverConfig: `
        location = /to-ftp/ { return 301 ftp://127.0.0.1/pub/; }
        location = /to-other-port/ { return 302 http://127.0.0.1:9/; }
        location = /moved/ { return 301 /real%20dir/; }
        location = /file-base/ { default_type text/plain; return 200 "not an index"; }`,
    })
    json = await startNginx({root: tree.root, autoindex: 'json'})
    lighttpd = await startLighttpd({root: tree.root})
  })

  after(async () => {
    await html?.stop()
    await json?.stop()
    await lighttpd?.stop()
    await tree?.cleanup()
  })

  it('nginx HTML autoindex: the same file set with exact sizes, UTC minutes', async () => {
    const {entries, warnings} = await collect(html.url)
    expect(expected.size).to.be.greaterThan(10_000)
    expectSameFiles(entries, expected, true)
    expect(warnings).to.deep.equal([])
    const readme = entries.find((e) => e.path === 'README.txt')!
    expect(readme).to.deep.equal({path: 'README.txt', type: 'file', size: 42, mtime: MIRROR_TREE_MTIME - 5, mtimePrecision: 60})
  })

  it('nginx JSON autoindex: the same file set with exact sizes, UTC seconds', async () => {
    const {entries} = await collect(json.url)
    expectSameFiles(entries, expected, true)
    expect(entries.find((e) => e.path === 'ütf8-ñame-日本.txt')).to.deep.equal({path: 'ütf8-ñame-日本.txt', type: 'file', size: 17, mtime: MIRROR_TREE_MTIME, mtimePrecision: 1})
  })

  it('lighttpd mod_dirlisting: the same file set, rounded sizes as ranges holding the true size', async () => {
    const {entries} = await collect(lighttpd.url)
    expectSameFiles(entries, expected, false)
    expect(entries.find((e) => e.path === 'linked-dir/big.iso')).to.deep.include({mtime: MIRROR_TREE_MTIME, mtimePrecision: 1})
  })

  it('lighttpd with exactSizes: head resolves rounded sizes exactly', async () => {
    const {entries} = await collect(lighttpd.url, {exactSizes: 'head'}, {subdir: 'sizes'})
    expect(entries.map((e) => `${e.path} ${e.size} ${e.sizeApproximate ?? 'exact'}`).sort()).to.deep.equal([
      'sizes/1023.bin 1023 exact',
      'sizes/1024.bin 1024 exact',
      'sizes/1048576.bin 1048576 exact',
      'sizes/5000.bin 5000 exact',
      'sizes/972.bin 972 exact',
      'sizes/99.bin 99 exact',
      'sizes/one.bin 1 exact',
      'sizes/zero.bin 0 exact',
    ])
  })

  it('lists one subtree with `subdir`, paths still relative to the base', async () => {
    for (const server of [html, json, lighttpd]) {
      const {entries} = await collect(server.url, {}, {subdir: 'dir with space'})
      expect(entries.map((e) => `${e.type} ${e.path}`).sort(), server.url).to.deep.equal([
        'dir dir with space/sub#dir',
        'file dir with space/inner file.txt',
        'file dir with space/sub#dir/deep+file.txt',
      ])
    }
  })

  it('lists one folder with `recursive: false`: its entries, no subfolder entered', async () => {
    for (const server of [html, json, lighttpd]) {
      const {entries} = await collect(server.url, {}, {subdir: 'dir with space', recursive: false})
      expect(entries.map((e) => `${e.type} ${e.path}`).sort(), server.url).to.deep.equal(['dir dir with space/sub#dir', 'file dir with space/inner file.txt'])
    }
  })

  it('tells a --dir folder the mirror lacks (base answers: SCAN_DIR_ABSENT) from a broken base (SCAN_BASE_MISSING)', async () => {
    for (const recursive of [false, true]) {
      const absent = await failure(collect(html.url, {}, {subdir: 'new', recursive}))
      expect(absent.code).to.equal('SCAN_DIR_ABSENT')
      expect(absent.message).to.match(/^HTTP directory http:\/\/127\.0\.0\.1:\d+\/new\/ answered 404: the folder is not on the mirror$/)
    }
    const broken = await failure(collect(html.url + 'no/such/base/', {}, {subdir: 'new', recursive: false}))
    expect(broken.code).to.equal('SCAN_BASE_MISSING')
    expect(broken.message).to.match(/answered 404 and the base URL http:\/\/127\.0\.0\.1:\d+\/no\/such\/base\/ answered 404; check the mirror's HTTP URL/)
  })

  it('follows a redirect of the base within the same origin', async () => {
    const {entries} = await collect(html.url + 'moved/')
    expect(entries.map((e) => `${e.type} ${e.path} ${e.size}`).sort()).to.deep.equal(['dir nested 0', 'file big.iso 100000', 'file nested/leaf.txt 23', 'file target file.bin 1536'])
  })

  it('refuses a base URL that redirects to ftp:// or another port, with a clear reason', async () => {
    const error = await failure(collect(html.url + 'to-ftp/'))
    expect(error.message).to.match(/^HTTP base URL http:\/\/127\.0\.0\.1:\d+\/to-ftp\/ redirects to ftp:\/\/127\.0\.0\.1\/pub\/; refusing to scan/)
    expect(error.code).to.equal('SCAN_REDIRECT')
    const other = await failure(collect(html.url + 'to-other-port/'))
    expect(other.message).to.match(/redirects to http:\/\/127\.0\.0\.1:9\/; refusing to scan/)
  })

  it('fails with a clear reason when the base does not exist or is not an index', async () => {
    const missing = await failure(collect(html.url + 'no/such/dir/'))
    expect(missing.message).to.match(/^HTTP base URL http:\/\/127\.0\.0\.1:\d+\/no\/such\/dir\/ answered 404; check the mirror's HTTP URL/)
    expect(missing.code).to.equal('SCAN_BASE_MISSING')
    const file = await failure(collect(html.url + 'file-base/'))
    expect(file.message).to.match(/is not a directory index \(Content-Type text\/plain\)/)
  })

  it('fails with a clear reason when the connection is refused, without showing credentials', async () => {
    const port = await refusedPort()
    const error = await failure(collect(`http://user:hunter2@127.0.0.1:${port}/pub/`))
    expect(error.message).to.equal(`HTTP connection to 127.0.0.1:${port} refused (ECONNREFUSED); is a web server running there?`)
    expect(error.code).to.equal('SCAN_CONNECT')
  })

  it('fails with a clear reason when the server accepts and never answers', async () => {
    const silent = await startSilentServer()
    try {
      const error = await failure(collect(silent.url('http'), {}, {connectTimeoutSeconds: 1, ioTimeoutSeconds: 1}))
      expect(error.message).to.equal(`HTTP server 127.0.0.1:${silent.port} did not answer http://127.0.0.1:${silent.port}/ within 1 s (idle timeout)`)
      expect(error.code).to.equal('SCAN_TIMEOUT')
    } finally {
      await silent.stop()
    }
  })

  it('https: refuses a self-signed certificate by default, lists with allowSelfSigned', async function () {
    requireBinary(this, 'openssl', 'openssl')
    const secure = await startNginx({root: tree.root, autoindex: 'json', https: true})
    try {
      const error = await failure(collect(secure.url, {}, {subdir: 'sizes'}))
      expect(error.message).to.match(/^HTTPS certificate of 127\.0\.0\.1:\d+ is not trusted \((DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)\)/)
      expect(error.code).to.equal('SCAN_TLS')
      const {entries} = await collect(secure.url, {allowSelfSigned: true}, {subdir: 'sizes'})
      expect(entries.map((e) => `${e.path} ${e.size}`).sort()).to.deep.equal([
        'sizes/1023.bin 1023',
        'sizes/1024.bin 1024',
        'sizes/1048576.bin 1048576',
        'sizes/5000.bin 5000',
        'sizes/972.bin 972',
        'sizes/99.bin 99',
        'sizes/one.bin 1',
        'sizes/zero.bin 0',
      ])
    } finally {
      await secure.stop()
    }
  })

  it('skips a subdirectory that redirects out of the base tree, with a warning; follows one that stays inside', async () => {
    const web = await startNginx({
      root: tree.root,
      autoindex: 'html',
      serverConfig: `
        location = "/dir with space/sub#dir/" { return 301 /real%20dir/; }
        location = "/dir with space/elsewhere/" { return 302 http://127.0.0.1:9/x/; }`,
    })
    try {
      const {entries, warnings} = await collect(web.url + 'dir%20with%20space/')
      expect(entries.map((e) => `${e.type} ${e.path}`).sort()).to.deep.equal(['dir sub#dir', 'file inner file.txt'])
      expect(warnings).to.have.length(1)
      expect(warnings[0]).to.match(
        /^HTTP directory http:\/\/127\.0\.0\.1:\d+\/dir%20with%20space\/sub%23dir\/ redirects to http:\/\/127\.0\.0\.1:\d+\/real%20dir\/, outside the mirror's tree; skipped$/,
      )
      // From the root, the same redirect stays inside the tree: its target is listed under the linking path.
      const inside = await collect(web.url, {}, {subdir: 'dir with space'})
      expect(inside.entries.map((e) => e.path).sort()).to.deep.equal([
        'dir with space/inner file.txt',
        'dir with space/sub#dir',
        'dir with space/sub#dir/big.iso',
        'dir with space/sub#dir/nested',
        'dir with space/sub#dir/nested/leaf.txt',
        'dir with space/sub#dir/target file.bin',
      ])
    } finally {
      await web.stop()
    }
  })

  it('stops cleanly when the consumer stops early', async () => {
    const lister = createHttpLister({concurrency: 4})
    let seen = 0
    for await (const _ of lister.list(json.url, {})) if (++seen === 100) break
    expect(seen).to.equal(100)
  })
})

/** apr_strfsize() as Apache's mod_autoindex prints sizes: bytes below 973, else 1.2K / 12K style. */
function aprStrfsize(bytes: number): string {
  if (bytes < 973) return `${bytes} `
  const units = 'KMGTPE'
  let size = bytes
  let o = 0
  for (;;) {
    let remain = size & 1023
    size = Math.floor(size / 1024)
    if (size >= 973) {
      o++
      continue
    }
    if (size < 9 || (size === 9 && remain < 973)) {
      remain = Math.floor((remain * 5 + 256) / 512)
      if (remain >= 10) {
        size++
        remain = 0
      }
      return `${size}.${remain}${units[o]}`
    }
    if (remain >= 512) size++
    return `${String(size).padStart(3)}${units[o]}`
  }
}

/** Writes an Apache 2.4 HTMLTable-style index.html (mod_autoindex's documented layout) into every directory. */
async function writeApacheIndexes(dir: string, urlPath: string): Promise<void> {
  const rows: string[] = []
  for (const entry of (await readdir(dir)).sort()) {
    if (entry.startsWith('.') || entry === 'index.html') continue
    const st = await stat(join(dir, entry)).catch(() => undefined)
    if (!st) continue
    const date = new Date(st.mtimeMs).toISOString().slice(0, 16).replace('T', ' ')
    // Apache escapes the path and prefixes names holding a colon with "./".
    const href = (entry.includes(':') ? './' : '') + encodeURIComponent(entry).replace(/%3A/g, ':').replace(/%2B/g, '+') + (st.isDirectory() ? '/' : '')
    const text = entry.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')
    const size = st.isDirectory() ? '  - ' : aprStrfsize(st.size)
    rows.push(
      `<tr><td valign="top"><img src="/icons/${st.isDirectory() ? 'folder' : 'unknown'}.gif" alt="[${st.isDirectory() ? 'DIR' : '   '}]"></td><td><a href="${href}">${text}${st.isDirectory() ? '/' : ''}</a></td><td align="right">${date}  </td><td align="right">${size}</td><td>&nbsp;</td></tr>`,
    )
    if (st.isDirectory()) await writeApacheIndexes(join(dir, entry), `${urlPath}${entry}/`)
  }
  const title = `Index of ${urlPath}`.replace(/&/g, '&amp;').replace(/</g, '&lt;')
  await writeFile(
    join(dir, 'index.html'),
    `<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 3.2 Final//EN">
<html>
 <head>
  <title>${title}</title>
 </head>
 <body>
<h1>${title}</h1>
  <table>
   <tr><th valign="top"><img src="/icons/blank.gif" alt="[ICO]"></th><th><a href="?C=N;O=D">Name</a></th><th><a href="?C=M;O=A">Last modified</a></th><th><a href="?C=S;O=A">Size</a></th><th><a href="?C=D;O=A">Description</a></th></tr>
   <tr><th colspan="5"><hr></th></tr>
<tr><td valign="top"><img src="/icons/back.gif" alt="[PARENTDIR]"></td><td><a href="../">Parent Directory</a></td><td>&nbsp;</td><td align="right">  - </td><td>&nbsp;</td></tr>
${rows.join('\n')}
   <tr><th colspan="5"><hr></th></tr>
</table>
<address>Apache/2.4.62 (Debian) Server at 127.0.0.1 Port 80</address>
</body></html>
`,
    {mode: 0o644},
  )
}

describe('e2e: HTTP lister on Apache-style (mod_autoindex HTMLTable) indexes served as static pages', function () {
  let tree: MirrorTree
  let web: RunningServer
  let expected: Map<string, number>

  before(async function () {
    requireBinary(this, 'nginx', 'nginx-light')
    tree = await createMirrorTree({bulkFiles: 300})
    expected = await expectedFileSet(tree.root)
    await writeApacheIndexes(tree.root, '/')
    web = await startNginx({root: tree.root})
  })

  after(async () => {
    await web?.stop()
    await tree?.cleanup()
  })

  it('lists the same file set; sizes below 973 bytes exact, larger ones as ranges holding the true size', async () => {
    const {entries, warnings} = await collect(web.url)
    expect(warnings).to.deep.equal([])
    const got = new Map(entries.filter((e) => e.type === 'file').map((e) => [e.path, e]))
    expect([...got.keys()].sort()).to.deep.equal([...expected.keys()].sort())
    for (const [path, size] of expected) {
      const e = got.get(path)!
      if (size < 973)
        expect(e, path)
          .to.deep.include({size, mtime: MIRROR_TREE_MTIME - 5, mtimePrecision: 60})
          .and.not.have.property('sizeApproximate')
      else expect(e.sizeMin! <= size && size <= e.sizeMax!, `${path}: ${size} in [${e.sizeMin}, ${e.sizeMax}]`).to.equal(true)
    }
    // With HEAD, every size is exact.
    const exact = await collect(web.url, {exactSizes: 'head'}, {subdir: 'sizes'})
    expect(exact.entries.map((e) => `${e.path} ${e.size} ${e.sizeApproximate ?? 'exact'}`).sort()).to.deep.equal([
      'sizes/1023.bin 1023 exact',
      'sizes/1024.bin 1024 exact',
      'sizes/1048576.bin 1048576 exact',
      'sizes/5000.bin 5000 exact',
      'sizes/972.bin 972 exact',
      'sizes/99.bin 99 exact',
      'sizes/one.bin 1 exact',
      'sizes/zero.bin 0 exact',
    ])
  })
})
