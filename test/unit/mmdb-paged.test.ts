import {expect} from 'chai'
import {readdirSync, writeFileSync, mkdtempSync, readFileSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import maxmind from 'maxmind'
import {defaultGeoipFiles} from '../../src/lib/geo/geoip.js'
import {openPagedMmdb} from '../../src/lib/geo/mmdb-paged.js'

const FIXTURES = fileURLToPath(new URL('../fixtures/geoip/', import.meta.url))

/** A reproducible stream of pseudo-random 32-bit numbers (xorshift32). */
function numbers(seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    return x >>> 0
  }
}

function addresses(count: number): string[] {
  const next = numbers(46)
  const out: string[] = []
  for (let i = 0; i < count; i++) {
    const v4 = next()
    out.push([v4 >>> 24, (v4 >>> 16) & 255, (v4 >>> 8) & 255, v4 & 255].join('.'))
    const words = Array.from({length: 8}, () => (next() & 0xffff).toString(16))
    words[0] = (0x2a00 | (next() & 0x1f)).toString(16) // 2a00::/11, RIPE's allocations: mostly known
    out.push(words.join(':'))
  }
  return out
}

/** Asserts that the paged reader of `path` answers as maxmind's whole-file reader for `ips`. */
async function sameAnswers(path: string, ips: string[]): Promise<number> {
  const whole = await maxmind.open(path)
  const paged = openPagedMmdb(path, 1000)
  let found = 0
  for (const ip of ips) {
    const expected = whole.getWithPrefixLength(ip)
    expect(paged.getWithPrefixLength(ip), `${path} ${ip}`).to.deep.equal(expected)
    if (expected[0]) found++
  }
  return found
}

describe('geo: MaxMind DB reader with the search tree on disk', () => {
  it('answers as the whole-file reader for every test database', async () => {
    const ips = [...addresses(500), '81.2.69.142', '2001:218::1', '2a02:d180::1', '::ffff:81.2.69.142', '216.160.83.56']
    for (const name of readdirSync(FIXTURES).filter((n) => n.endsWith('.mmdb'))) {
      await sameAnswers(join(FIXTURES, name), ips)
    }
  })

  it('answers as the whole-file reader for the bundled GeoLite2 City files, past a full page cache', async function () {
    this.timeout(60_000)
    const ips = addresses(20_000)
    const [v4, v6] = defaultGeoipFiles()
    // 20,000 random addresses touch far more than the 1,024 cached pages of the IPv4 tree.
    expect(
      await sameAnswers(
        v4,
        ips.filter((ip) => !ip.includes(':')),
      ),
    ).to.be.greaterThan(10_000)
    expect(await sameAnswers(v6, ips)).to.be.greaterThan(1000)
  })

  it('refuses a file that is not a MaxMind DB, and a truncated one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-mmdb-'))
    try {
      writeFileSync(join(dir, 'text.mmdb'), 'not a database\n')
      expect(() => openPagedMmdb(join(dir, 'text.mmdb'), 10)).to.throw()
      const whole = readFileSync(join(FIXTURES, 'GeoLite2-City-Test.mmdb'))
      // The tail (metadata) with too little before it for the tree.
      writeFileSync(join(dir, 'short.mmdb'), whole.subarray(whole.length - 2000))
      expect(() => openPagedMmdb(join(dir, 'short.mmdb'), 10)).to.throw(/larger than the file|Unsupported|unsupported/)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})
