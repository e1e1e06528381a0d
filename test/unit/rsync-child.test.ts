/**
 * The rsync child under its watchdog, with scripts standing in for rsync (`binary`): its
 * listing and exit code come through, a missing binary and a death by signal are named, and an
 * aborted listing ends the whole process group, grandchildren included.
 */
import {chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {rsyncLister, type RsyncListOptions} from '../../src/lib/scan/rsync.js'
import type {ListingEntry} from '../../src/lib/scan/types.js'
import {listingFailure} from '../helpers/listing.js'

const URL = 'rsync://127.0.0.1:873/pub/'

async function list(options: RsyncListOptions): Promise<ListingEntry[]> {
  const out: ListingEntry[] = []
  for await (const e of rsyncLister.list(URL, options)) out.push(e)
  return out
}

function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /, '')[0] !== 'Z'
  } catch {
    return false
  }
}

describe('rsync lister: the child process', function () {
  let dir: string
  const script = (name: string, body: string) => {
    const path = join(dir, name)
    writeFileSync(path, `#!/bin/sh\n${body}\n`)
    chmodSync(path, 0o755)
    return path
  }
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-rsync-child-'))
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  it('passes the listing and a usable exit code through the watchdog', async () => {
    const binary = script('ok', 'echo "-rw-r--r--            5 2026/01/02 03:04:05 a.txt"; exit 24')
    expect(await list({binary})).to.deep.equal([{path: 'a.txt', type: 'file', size: 5, mtime: 1767323045, mtimePrecision: 1}])
  })

  it('names a missing binary and an rsync killed by a signal', async () => {
    expect((await listingFailure(list({binary: join(dir, 'no-such-rsync')}))).message).to.equal('The rsync binary was not found. Install it (apt-get install rsync).')
    const binary = script('killed', 'kill -TERM $$')
    expect((await listingFailure(list({binary}))).message).to.match(/failed \(killed by SIGTERM\)/)
  })

  it('an aborted listing kills rsync and everything it started', async () => {
    const pidFile = join(dir, 'grandchild.pid')
    const binary = script('hang', `sleep 300 & echo $! > ${pidFile}; wait`)
    const controller = new AbortController()
    const listing = list({binary, signal: controller.signal})
    const deadline = Date.now() + 5000
    let pid = 0
    while (!pid && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      try {
        pid = Number(readFileSync(pidFile, 'utf8'))
      } catch {}
    }
    expect(alive(pid), 'grandchild started').to.equal(true)
    controller.abort(new Error('test abort'))
    expect((await listingFailure(listing)).code).to.equal('SCAN_ABORTED')
    const gone = Date.now() + 3000
    while (alive(pid) && Date.now() < gone) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(alive(pid), 'grandchild alive after abort').to.equal(false)
  })
})
