import {expect} from 'chai'
import {repomdTimestamp, repomdVersion, isRepomdPath} from '../../src/lib/origin/repomd.js'
import {repoTable, YumConfigSchema} from '../../src/lib/yum/config.js'
import {metalinkFailure, renderRepoMetalink, renderRepoMirrorList, requestedProtocols, trimToProtocols, unknownRepoMessage} from '../../src/lib/yum/document.js'
import {countmeBucket} from '../../src/lib/yum/routes.js'

const NOW = new Date(Date.UTC(2026, 11, 2, 1, 2, 3))
const V2 = {size: 3069, timestamp: 1796177210, md5: 'a'.repeat(32), sha1: 'b'.repeat(40), sha256: 'c'.repeat(64), sha512: 'd'.repeat(128)}
const V1 = {size: 3001, timestamp: 1796170000, md5: '1'.repeat(32), sha1: '2'.repeat(40), sha256: '3'.repeat(64), sha512: '4'.repeat(128)}

describe('dnf/yum metalink in MirrorManager form', () => {
  it("writes MirrorManager's elements, mm0 prefix, indentation and order", () => {
    const doc = renderRepoMetalink({
      name: 'repomd.xml',
      current: V2,
      alternates: [V1],
      sources: [
        {urls: ['https://a.example/os/repodata/repomd.xml', 'http://a.example/os/repodata/repomd.xml', 'gopher://a.example/os/repodata/repomd.xml'], location: 'DE', private: false},
        {urls: ['http://b.example/os/repodata/repomd.xml?x&y'], location: 'SE', private: true},
        {urls: ['http://origin.example/os/repodata/repomd.xml'], location: '', private: false},
      ],
      generator: 'mb/0.1.0',
      now: NOW,
    })
    expect(doc).to.equal(`<?xml version="1.0" encoding="utf-8"?>
<metalink version="3.0" xmlns="http://www.metalinker.org/" type="dynamic" pubdate="Wed, 02 Dec 2026 01:02:03 GMT" generator="mb/0.1.0" xmlns:mm0="http://fedorahosted.org/mirrormanager">
 <files>
  <file name="repomd.xml">
   <mm0:timestamp>1796177210</mm0:timestamp>
   <size>3069</size>
   <verification>
    <hash type="md5">${V2.md5}</hash>
    <hash type="sha1">${V2.sha1}</hash>
    <hash type="sha256">${V2.sha256}</hash>
    <hash type="sha512">${V2.sha512}</hash>
   </verification>
   <mm0:alternates>
    <mm0:alternate>
      <mm0:timestamp>1796170000</mm0:timestamp>
      <size>3001</size>
      <verification>
       <hash type="md5">${V1.md5}</hash>
       <hash type="sha1">${V1.sha1}</hash>
       <hash type="sha256">${V1.sha256}</hash>
       <hash type="sha512">${V1.sha512}</hash>
      </verification>
    </mm0:alternate>
   </mm0:alternates>
   <resources maxconnections="1">
    <url protocol="https" type="https" location="DE" preference="100">https://a.example/os/repodata/repomd.xml</url>
    <url protocol="http" type="http" location="DE" preference="100">http://a.example/os/repodata/repomd.xml</url>
    <url protocol="http" type="http" location="SE" preference="99" mm0:private="True">http://b.example/os/repodata/repomd.xml?x&amp;y</url>
    <url protocol="http" type="http" preference="98">http://origin.example/os/repodata/repomd.xml</url>
   </resources>
  </file>
 </files>
</metalink>
`)
  })

  it('leaves mm0:alternates out without alternates, and never goes below preference 1', () => {
    const sources = Array.from({length: 102}, (_, i) => ({urls: [`http://m${i}.example/r`], location: 'DE', private: false}))
    const doc = renderRepoMetalink({name: 'repomd.xml', current: V2, alternates: [], sources, generator: 'mb', now: NOW})
    expect(doc).to.not.include('alternates')
    const preferences = [...doc.matchAll(/preference="(\d+)"/g)].map((m) => Number(m[1]))
    expect(preferences.slice(0, 3)).to.deep.equal([100, 99, 98])
    expect(preferences.slice(-3)).to.deep.equal([1, 1, 1])
  })

  it("writes MirrorManager's failure document and unknown-repo message", () => {
    const message = unknownRepoMessage('# repo = fedora-41 arch = x86_64 ', [
      ['fedora-42', 'x86_64'],
      ['epel-9', 'aarch64'],
      ['fedora-42', 'aarch64'],
    ])
    expect(message).to.equal(
      '# repo = fedora-41 arch = x86_64 error: invalid repo or arch\n# following repositories are available:\n# repo=epel-9&arch=aarch64\n# repo=fedora-42&arch=aarch64\n# repo=fedora-42&arch=x86_64\n',
    )
    expect(metalinkFailure('a -- b', 'mb/0.1.0', NOW)).to.equal(
      '<?xml version="1.0" encoding="utf-8"?>\n<metalink version="3.0" xmlns="http://www.metalinker.org/" type="dynamic" pubdate="Wed, 02 Dec 2026 01:02:03 GMT" generator="mb/0.1.0" xmlns:mm0="http://fedorahosted.org/mirrormanager">\n<!-- a - - b\n-->\n</metalink>\n',
    )
  })

  it('lists every URL of each source in the mirror list, after the header line', () => {
    const text = renderRepoMirrorList('# repo = f arch = x ', [
      {urls: ['https://a/os/'], location: 'DE', private: false},
      {urls: ['https://b/os/', 'ftp://b/os/'], location: 'DE', private: false},
      {urls: ['http://o/os/'], location: '', private: false},
    ])
    expect(text).to.equal('# repo = f arch = x \nhttps://a/os/\nhttps://b/os/\nftp://b/os/\nhttp://o/os/\n')
  })
})

describe('repomd.xml versions', () => {
  it("takes MirrorManager's timestamp: the newest data timestamp, else the revision, else the mtime", () => {
    const xml = (body: string) => `<?xml version="1.0"?><repomd xmlns="http://linux.duke.edu/metadata/repo">${body}</repomd>`
    expect(repomdTimestamp(xml('<revision>5</revision><data type="primary"><timestamp>100</timestamp></data><data type="other"><timestamp>300</timestamp></data>'), 7)).to.equal(300)
    expect(repomdTimestamp(xml('<revision>1796176843</revision>'), 7)).to.equal(1796176843)
    expect(repomdTimestamp(xml('<revision>f42-updates</revision>'), 7)).to.equal(7)
    expect(repomdTimestamp('not xml <', 7)).to.equal(7)
  })

  it('hashes the bytes with md5, sha1, sha256 and sha512', () => {
    const v = repomdVersion(Buffer.from('abc'), 1)
    expect(v).to.deep.equal({
      size: 3,
      timestamp: 1,
      md5: '900150983cd24fb0d6963f7d28e17f72',
      sha1: 'a9993e364706816aba3e25717850c26c9cd0d89d',
      sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
      sha512: 'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
    })
  })

  it('knows repository index paths', () => {
    expect(['repodata/repomd.xml', 'f/42/os/repodata/repomd.xml'].map(isRepomdPath)).to.deep.equal([true, true])
    expect(['xrepodata/repomd.xml', 'repodata/repomd.xml.asc', 'a/repomd.xml'].map(isRepomdPath)).to.deep.equal([false, false, false])
  })
})

describe('yum settings and countme', () => {
  it('maps (repo, arch) to directories with $arch and $repo replaced; the first entry wins', () => {
    const config = YumConfigSchema.parse({
      repos: [
        {repo: 'fedora-42', arch: ['x86_64', 'aarch64'], path: 'fedora/releases/42/$arch/os/'},
        {repo: 'epel-9', arch: 'x86_64', path: 'epel/9/$arch/$repo'},
        {repo: 'fedora-42', arch: 'x86_64', path: 'elsewhere'},
      ],
    })
    expect(config.alternates_days).to.equal(3)
    expect([...repoTable(config)]).to.deep.equal([
      ['fedora-42\nx86_64', 'fedora/releases/42/x86_64/os'],
      ['fedora-42\naarch64', 'fedora/releases/42/aarch64/os'],
      ['epel-9\nx86_64', 'epel/9/x86_64/epel-9'],
    ])
  })

  it('accepts countme 1..4 and ignores anything else', () => {
    expect(['1', '2', '3', '4'].map(countmeBucket)).to.deep.equal([1, 2, 3, 4])
    expect(['0', '5', '12', '99999999999999999999', '-1', '1.5', ' 1', '', 'x', null].map(countmeBucket)).to.deep.equal(Array(10).fill(undefined))
  })

  it("reads dnf's protocol= comma-separated and repeated, once each, in lower case", () => {
    expect(requestedProtocols(new URLSearchParams('repo=r&arch=a'))).to.equal(undefined)
    expect(requestedProtocols(new URLSearchParams('protocol='))).to.equal(undefined)
    expect(requestedProtocols(new URLSearchParams('protocol=https,HTTP&protocol=rsync&protocol=https'))).to.deep.equal(['https', 'http', 'rsync'])
  })

  it('keeps only the URLs of the protocols asked for, and everything when no source has one (MirrorManager)', () => {
    const sources = [
      {urls: ['https://a/x/', 'http://a/x/', 'ftp://a/x/'], location: 'DE', private: false},
      {urls: ['http://b/x/'], location: 'SE', private: true},
      {urls: ['rsync://c/x/'], location: 'US', private: false},
    ]
    expect(trimToProtocols(sources, ['ftp', 'rsync'])).to.deep.equal([
      {urls: ['ftp://a/x/'], location: 'DE', private: false},
      {urls: ['rsync://c/x/'], location: 'US', private: false},
    ])
    expect(trimToProtocols(sources, ['gopher'])).to.equal(sources)
    const doc = renderRepoMetalink({name: 'repomd.xml', current: V2, alternates: [], sources: trimToProtocols(sources, ['ftp', 'rsync']), generator: 'mb', now: NOW})
    expect([...doc.matchAll(/<url protocol="(\w+)" type="\1"/g)].map((m) => m[1])).to.deep.equal(['ftp', 'rsync'])
    expect(renderRepoMirrorList('# path = x ', trimToProtocols(sources, ['https', 'http']))).to.equal('# path = x \nhttps://a/x/\nhttp://a/x/\nhttp://b/x/\n')
  })
})
