// @store-independent: the MirrorManager formats
/**
 * `mb serve`'s MirrorManager-style routes (run in the first pass only: the formats do not
 * depend on the store, whose part is plain SQL that both run alike): the repomd.xml history that
 * `mb index` keeps, the answers for unknown repos and missing parameters, the
 * repomd.xml.metalink forms, `mm0:private`, and countme values that are ignored.
 */
import {mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {sql} from 'kysely'
import {ConfigSchema} from '../../src/lib/config/schema.js'
import {indexOrigin} from '../../src/lib/origin/index.js'
import {type RunningServer, startServe} from '../../src/lib/redirector/run.js'
import {backend, useTestDatabase} from '../helpers/db.js'

const DIR = 'f/42/x86_64/os'
const repomd = (stamp: number) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<repomd xmlns="http://linux.duke.edu/metadata/repo"><revision>${stamp}</revision><data type="primary"><timestamp>${stamp}</timestamp></data></repomd>\n`

describe(`MirrorManager-style dnf routes of mb serve (${backend})`, () => {
  const store = useTestDatabase()
  let root: string
  let running: RunningServer
  let base: string
  let ids: Record<string, number>

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'mb-yum-'))
    mkdirSync(join(root, DIR, 'repodata'), {recursive: true})
    const file = join(root, DIR, 'repodata', 'repomd.xml')
    writeFileSync(file, repomd(1000))
    utimesSync(file, 1000, 1000)
    // An apt archive beside the dnf repository, for mirrors.txt.
    mkdirSync(join(root, 'debian', 'dists', 'bookworm'), {recursive: true})
    writeFileSync(join(root, 'debian', 'dists', 'bookworm', 'Release'), 'Suite: bookworm\n')
    await indexOrigin(store.database.db, root)
    ids = {}
    for (const [identifier, extra] of [
      ['pub.mirror', {}],
      ['campus.mirror', {prefix_only: true, prefixes: ['127.0.0.0/8']}],
    ] as const) {
      const row = await store.database.db
        .insertInto('mirror')
        .values({identifier, http_url: `http://${identifier}/pub/`, https_url: `https://${identifier}/pub/`, country: 'DE', continent: 'EU', last_scan_ok_at: new Date(), ...extra} as any)
        .returning('id')
        .executeTakeFirstOrThrow()
      ids[identifier] = row.id
    }
    await store.database.db
      .updateTable('file')
      .set({mirrors: [ids['pub.mirror'], ids['campus.mirror']]})
      .execute()
    // Version 2: the index records it and keeps version 1, with the mirrors that held it.
    writeFileSync(file, repomd(2000))
    utimesSync(file, 2000, 2000)
    await indexOrigin(store.database.db, root)
    const config = ConfigSchema.parse({
      root,
      serve: {listen: '127.0.0.1:0', poll_seconds: 0.2},
      stats: {flush_interval_seconds: 0.2},
      log_level: 'silent',
      yum: {
        repos: [
          {repo: 'f-42', arch: 'x86_64', path: 'f/42/$arch/os'},
          {repo: 'f-42-source', arch: 'x86_64', path: 'f/42/source'},
        ],
      },
    })
    running = await startServe(config, {database: store.database})
    base = running.url
  })

  after(async () => {
    await running?.close()
    if (root) rmSync(root, {recursive: true, force: true})
  })

  it('keeps each repomd.xml version with the mirrors of the one it replaced', async () => {
    const rows = await sql<{repo_timestamp: string | number; mirrors: string; replaced: boolean}>`
      SELECT repo_timestamp, array_to_string(mirrors, ',') AS mirrors, replaced_at IS NOT NULL AS replaced FROM repomd_history ORDER BY repo_timestamp`.execute(store.database.db)
    expect(rows.rows.map((r) => [Number(r.repo_timestamp), r.mirrors, r.replaced])).to.deep.equal([
      [1000, `${ids['pub.mirror']},${ids['campus.mirror']}`, true],
      [2000, '', false],
    ])
  })

  it('answers /metalink with the current version, the alternate and the mirrors that held it', async () => {
    const res = await fetch(`${base}/metalink?repo=f-42&arch=x86_64`)
    expect(res.status).to.equal(200)
    expect(res.headers.get('content-type')).to.equal('application/metalink+xml')
    const doc = await res.text()
    expect([...doc.matchAll(/<mm0:timestamp>(\d+)</g)].map((m) => Number(m[1]))).to.deep.equal([2000, 1000])
    expect([...doc.matchAll(/<url [^>]*>[^<]+<\/url>/g)].map((m) => m[0])).to.deep.equal([
      '<url protocol="https" type="https" location="DE" preference="100" mm0:private="True">https://campus.mirror/pub/f/42/x86_64/os/repodata/repomd.xml</url>',
      '<url protocol="http" type="http" location="DE" preference="100" mm0:private="True">http://campus.mirror/pub/f/42/x86_64/os/repodata/repomd.xml</url>',
      '<url protocol="https" type="https" location="DE" preference="99">https://pub.mirror/pub/f/42/x86_64/os/repodata/repomd.xml</url>',
      '<url protocol="http" type="http" location="DE" preference="99">http://pub.mirror/pub/f/42/x86_64/os/repodata/repomd.xml</url>',
      `<url protocol="http" type="http" preference="98">${base}/_origin/f/42/x86_64/os/repodata/repomd.xml</url>`,
    ])
    // The last URL is the origin's own: delivered, not redirected.
    const last = await fetch(`${base}/_origin/f/42/x86_64/os/repodata/repomd.xml`, {redirect: 'manual'})
    expect([last.status, last.headers.get('x-mb-origin-reason')]).to.deep.equal([200, 'origin_fallback'])
    const strip = (text: string) => text.replace(/pubdate="[^"]+"/, '')
    for (const other of [`${base}/${DIR}/repodata/repomd.xml.metalink`, `${base}/${DIR}/repodata/repomd.xml?metalink`, `${base}/metalink?path=/${DIR}/`]) {
      expect(strip(await (await fetch(other)).text()), other).to.equal(strip(doc))
    }
  })

  it('answers /mirrorlist with one directory URL per mirror', async () => {
    const res = await fetch(`${base}/mirrorlist?repo=f-42&arch=x86_64`)
    expect(res.status).to.equal(200)
    expect(await res.text()).to.equal(`# repo = f-42 arch = x86_64 \nhttps://campus.mirror/pub/f/42/x86_64/os/\nhttps://pub.mirror/pub/f/42/x86_64/os/\n${base}/_origin/f/42/x86_64/os/\n`)
  })

  it('leaves a mirror with a known-bad copy under the repository out of its metalink and mirror list, as mirrors.txt does; a cleared copy brings it back', async () => {
    const db = store.database.db
    const lists = async () => ({
      mirrorlist: await (await fetch(`${base}/mirrorlist?repo=f-42&arch=x86_64`)).text(),
      metalink: await (await fetch(`${base}/metalink?repo=f-42&arch=x86_64`)).text(),
      apt: await (await fetch(`${base}/debian/mirrors.txt`)).text(),
    })
    const until = async (ok: (l: Awaited<ReturnType<typeof lists>>) => boolean) => {
      for (let i = 0; i < 50; i++) {
        const l = await lists()
        if (ok(l)) return l
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      return lists()
    }
    const file = await db.selectFrom('file').select(['id', 'size', 'mtime']).where('path', '=', `${DIR}/repodata/repomd.xml`).executeTakeFirstOrThrow()
    await db
      .insertInto('mirror_file_bad')
      .values({mirror_id: ids['pub.mirror'], file_id: file.id, size: file.size, mtime: Number(file.mtime), piece: 0})
      .execute()
    const out = await until((l) => !l.mirrorlist.includes('pub.mirror'))
    await db.deleteFrom('mirror_file_bad').execute()
    for (const list of [out.mirrorlist, out.metalink]) {
      expect(list).to.not.contain('pub.mirror')
      expect(list).to.contain('campus.mirror')
    }
    const back = await until((l) => l.mirrorlist.includes('pub.mirror'))
    expect(back.mirrorlist).to.contain('pub.mirror')
    expect(back.metalink).to.contain('pub.mirror')
  })

  it("filters by dnf's protocol= as MirrorManager does: comma-separated or repeated, the whole list when no mirror has it", async () => {
    const lines = async (query: string) => (await (await fetch(`${base}/mirrorlist?repo=f-42&arch=x86_64&${query}`)).text()).trimEnd().split('\n')
    expect(await lines('protocol=https')).to.deep.equal(['# repo = f-42 arch = x86_64 protocol = https', 'https://campus.mirror/pub/f/42/x86_64/os/', 'https://pub.mirror/pub/f/42/x86_64/os/'])
    const both = ['https://campus.mirror/pub/f/42/x86_64/os/', 'http://campus.mirror/pub/f/42/x86_64/os/', 'https://pub.mirror/pub/f/42/x86_64/os/', 'http://pub.mirror/pub/f/42/x86_64/os/']
    for (const query of ['protocol=http,https', 'protocol=HTTPS&protocol=http', 'protocol=https,,http,https']) {
      const answer = await lines(query)
      expect(answer.slice(1, 5), query).to.deep.equal(both)
      expect(answer, query).to.have.length(6) // and the origin, whose scheme (http) was asked for
      expect(answer[5].startsWith(`${base}/`), query).to.equal(true)
    }
    // No mirror (nor the origin) offers ftp: MirrorManager then answers the untrimmed list.
    const ftp = await lines('protocol=ftp')
    expect(ftp[0]).to.equal('# repo = f-42 arch = x86_64 protocol = ftp')
    expect(ftp.slice(1, 3)).to.deep.equal(['https://campus.mirror/pub/f/42/x86_64/os/', 'https://pub.mirror/pub/f/42/x86_64/os/'])
    const metalink = await (await fetch(`${base}/metalink?repo=f-42&arch=x86_64&protocol=https`)).text()
    expect([...metalink.matchAll(/<url [^>]*>([^<]+)<\/url>/g)].map((m) => m[1])).to.deep.equal([
      'https://campus.mirror/pub/f/42/x86_64/os/repodata/repomd.xml',
      'https://pub.mirror/pub/f/42/x86_64/os/repodata/repomd.xml',
    ])
  })

  it('names serve.public_url, not the Host, in the dnf and apt lists it writes', async () => {
    const config = ConfigSchema.parse({
      root,
      serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, public_url: 'https://dl.example.org/mb'},
      stats: {enabled: false},
      log_level: 'silent',
      yum: {repos: [{repo: 'f-42', arch: 'x86_64', path: 'f/42/$arch/os'}]},
    })
    const other = await startServe(config, {database: store.database})
    try {
      const list = (await (await fetch(`${other.url}/mirrorlist?repo=f-42&arch=x86_64`)).text()).trimEnd().split('\n')
      expect(list.at(-1)).to.match(/^https:\/\/dl\.example\.org\/mb\//)
      const metalink = await (await fetch(`${other.url}/metalink?repo=f-42&arch=x86_64`)).text()
      expect(metalink).to.match(/>https:\/\/dl\.example\.org\/mb\/[^<]*repomd\.xml<\/url>/)
      expect(metalink).to.not.contain(other.url)
      const apt = (await (await fetch(`${other.url}/debian/mirrors.txt`)).text()).trimEnd().split('\n')
      expect(apt.length).to.be.greaterThan(1)
      expect(apt.at(-1)).to.match(/^https:\/\/dl\.example\.org\/mb\/\S*debian\/\tpriority:\d+$/)
    } finally {
      await other.close()
    }
  })

  it("gives MirrorManager's answers to unknown repos, bad paths and missing parameters", async () => {
    const known = '# following repositories are available:\n# repo=f-42&arch=x86_64\n# repo=f-42-source&arch=x86_64\n'
    const list = await fetch(`${base}/mirrorlist?repo=f-41&arch=x86_64`)
    expect([list.status, await list.text()]).to.deep.equal([404, `# repo = f-41 arch = x86_64 error: invalid repo or arch\n${known}`])
    const metalink = await fetch(`${base}/metalink?repo=f-41&arch=x86_64`)
    expect(metalink.status).to.equal(404)
    expect(metalink.headers.get('content-type')).to.equal('application/metalink+xml')
    expect((await metalink.text()).replace(/pubdate="[^"]+"/, '')).to.equal(
      `<?xml version="1.0" encoding="utf-8"?>\n<metalink version="3.0" xmlns="http://www.metalinker.org/" type="dynamic"  generator="mb/0.1.0" xmlns:mm0="http://fedorahosted.org/mirrormanager">\n<!-- # repo = f-41 arch = x86_64 error: invalid repo or arch\n${known}\n-->\n</metalink>\n`,
    )
    // A source repo is arch=source whatever arch= says (MirrorManager).
    expect(await (await fetch(`${base}/mirrorlist?repo=f-42-source&arch=x86_64`)).text()).to.match(/^# repo = f-42-source arch = source error: invalid repo or arch\n/)
    const missing = await fetch(`${base}/mirrorlist?repo=f-42`)
    expect([missing.status, await missing.text()]).to.deep.equal([200, '# either path=, or repo= and arch= must be specified'])
    const badPath = await fetch(`${base}/mirrorlist?path=nowhere/at/all`)
    expect([badPath.status, await badPath.text()]).to.deep.equal([404, 'error: invalid path'])
  })

  it('never lets a query value write a line of the list: a newline or a URL in protocol= is dropped, in repo= or arch= refused', async () => {
    const lines = async (query: string) => (await (await fetch(`${base}/mirrorlist?${query}`)).text()).trimEnd().split('\n')
    const injected = await lines('repo=f-42&arch=x86_64&protocol=https%0Ahttp://evil.example/')
    expect(injected).to.deep.equal(await lines('repo=f-42&arch=x86_64'))
    expect(injected.join('\n')).to.not.contain('evil')
    expect(await lines('repo=f-42&arch=x86_64&protocol=https%0Ahttp://evil.example/,https')).to.deep.equal(await lines('repo=f-42&arch=x86_64&protocol=https'))
    for (const query of ['repo=f-41%0Ahttp://evil.example/&arch=x86_64', 'repo=f-42&arch=x86_64%0D%0Ahttp://evil.example/', 'repo=http://evil.example/&arch=x86_64']) {
      for (const route of ['mirrorlist', 'metalink']) {
        const res = await fetch(`${base}/${route}?${query}`)
        const text = await res.text()
        expect(res.status, `${route}?${query}`).to.equal(400)
        expect(text, `${route}?${query}`).to.not.contain('evil')
        expect(text, `${route}?${query}`).to.contain('invalid repo or arch')
      }
    }
  })

  it('leaves out the URLs of a scheme that probing found refused, and lists them again once it answers', async () => {
    // The client here comes over HTTP, so the mirror stays eligible while its HTTPS is refused;
    // an HTTPS client's list drops a refused HTTP URL the same way (mirrorUrls in src/lib/yum/routes.ts).
    const urls = async () => [...(await (await fetch(`${base}/metalink?repo=f-42&arch=x86_64`)).text()).matchAll(/<url [^>]*>([^<]+)<\/url>/g)].map((m) => m[1])
    const until = async (done: (list: string[]) => boolean) => {
      let list: string[] = []
      for (let i = 0; i < 50; i++) {
        list = await urls()
        if (done(list)) break
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      return list
    }
    const pubHttp = 'http://pub.mirror/pub/f/42/x86_64/os/repodata/repomd.xml'
    const pubHttps = 'https://pub.mirror/pub/f/42/x86_64/os/repodata/repomd.xml'
    expect(await urls()).to.include.members([pubHttp, pubHttps])
    await store.database.db.updateTable('mirror').set({http_up: true, https_up: false}).where('id', '=', ids['pub.mirror']).execute()
    try {
      const list = await until((l) => !l.includes(pubHttps))
      expect(list).to.include(pubHttp)
      expect(list).to.not.include(pubHttps)
    } finally {
      await store.database.db.updateTable('mirror').set({http_up: null, https_up: null}).where('id', '=', ids['pub.mirror']).execute()
    }
    const back = await until((l) => l.includes(pubHttps))
    expect(back, JSON.stringify(back)).to.include.members([pubHttp, pubHttps])
  })

  it('counts countme 1..4 by repo and ignores huge or odd values', async () => {
    for (const value of ['99999999999999999999', '0', '-1', '2.5', 'x', '7']) {
      const res = await fetch(`${base}/metalink?repo=f-42&arch=x86_64&countme=${value}`)
      expect(res.status, value).to.equal(200)
      await res.text()
    }
    await (await fetch(`${base}/mirrorlist?repo=f-42&arch=x86_64&countme=3`)).text()
    await (await fetch(`${base}/metalink?repo=f-41&arch=x86_64&countme=3`)).text() // unknown: not counted
    let rows: Array<{repo: string; arch: string; bucket: number; hits: number}> = []
    for (let i = 0; i < 50 && rows.length === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 200))
      rows = (await sql<{repo: string; arch: string; bucket: number; hits: string | number}>`SELECT repo, arch, bucket, hits FROM stats_countme`.execute(store.database.db)).rows.map((r) => ({
        ...r,
        hits: Number(r.hits),
      }))
    }
    expect(rows).to.deep.equal([{repo: 'f-42', arch: 'x86_64', bucket: 3, hits: 1}])
  })

  it('records a repomd.xml change that mb serve --watch sees, with the mirrors of the version it replaces', async () => {
    await store.database.db
      .updateTable('file')
      .set({mirrors: [ids['pub.mirror']]})
      .execute()
    const watching = await startServe(
      ConfigSchema.parse({root, serve: {listen: '127.0.0.1:0', poll_seconds: 0.2, watch: true}, log_level: 'silent', yum: {repos: [{repo: 'f-42', arch: 'x86_64', path: 'f/42/$arch/os'}]}}),
      {database: store.database},
    )
    try {
      await new Promise((resolve) => setTimeout(resolve, 500))
      const file = join(root, DIR, 'repodata', 'repomd.xml')
      writeFileSync(file, repomd(3000))
      utimesSync(file, 3000, 3000)
      let rows: Array<[number, string, boolean]> = []
      for (let i = 0; i < 100 && rows.length < 3; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100))
        const result = await sql<{repo_timestamp: string | number; mirrors: string; replaced: boolean}>`
          SELECT repo_timestamp, array_to_string(mirrors, ',') AS mirrors, replaced_at IS NOT NULL AS replaced FROM repomd_history ORDER BY repo_timestamp`.execute(store.database.db)
        rows = result.rows.map((r) => [Number(r.repo_timestamp), r.mirrors, r.replaced])
      }
      expect(rows).to.deep.equal([
        [1000, `${ids['pub.mirror']},${ids['campus.mirror']}`, true],
        [2000, `${ids['pub.mirror']}`, true],
        [3000, '', false],
      ])
      const doc = await (await fetch(`${watching.url}/metalink?repo=f-42&arch=x86_64`)).text()
      expect([...doc.matchAll(/<mm0:timestamp>(\d+)</g)].map((m) => Number(m[1]))).to.deep.equal([3000, 2000, 1000])
    } finally {
      await watching.close()
    }
  })
})
