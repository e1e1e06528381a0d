// @store-independent: the shell blocks of docs/operations.md, on an embedded store of their own
/**
 * The shell blocks of docs/operations.md that are marked runnable (an HTML comment
 * `<!-- runnable -->` on the line before the opening fence) run as written, in document order,
 * each with `bash -e -u -o pipefail`, so the page cannot drift from the code (issue 36, item 9).
 *
 * They run in a temporary root: a private mount and network namespace (`unshare -mn`, so
 * root only) where /etc, /var, /run, /srv and /usr are overlays whose changes land in a
 * scratch directory (the host is untouched; /etc/mb, /var/lib/mb, /var/log/mb and /run/mb
 * start empty), the loopback interface is the only network (a block may listen on port 80),
 * `/srv/pub` holds a small origin tree, and `mb` on the PATH is this tree's build. The
 * environment is hermetic: no config file (MB_CONFIG=none) unless a block names one, HOME in
 * the scratch directory, and MB_DATA_DIR a migrated embedded store made for the run (creating
 * one costs seconds a docs test need not spend).
 */
import {type ChildProcess, spawn} from 'node:child_process'
import {chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {expect} from 'chai'
import {BIN, hermeticEnv, requireBinary} from '../helpers/cli.js'
import {createEmbeddedTestDatabase, type TestDatabase} from '../helpers/db.js'

const PAGE = fileURLToPath(new URL('../../docs/operations.md', import.meta.url))

/** A runnable block: its text (indentation removed) and the line of its opening fence. */
interface Block {
  line: number
  text: string
}

/** The blocks of `markdown` marked `<!-- runnable -->` on the line before a ```sh fence. */
function runnableBlocks(markdown: string): Block[] {
  const blocks: Block[] = []
  for (const m of markdown.matchAll(/^( *)<!-- runnable -->\n\1```sh\n([\s\S]*?)\n\1```$/gm)) {
    const indent = m[1]
    const text = m[2]
      .split('\n')
      .map((l) => (l.startsWith(indent) ? l.slice(indent.length) : l))
      .join('\n')
    blocks.push({line: markdown.slice(0, m.index).split('\n').length + 1, text})
  }
  return blocks
}

/**
 * The temporary root, then the blocks: `$1` is the scratch directory, the rest are the block
 * files, run in order; the first that fails ends the run with its status. The logs a block
 * left under /var/log/mb are printed at the end, for the reader of a failure.
 */
const IN_TEMPORARY_ROOT = `set -eu
scratch=$1; shift
mount -t tmpfs tmpfs "$scratch"
for d in etc var run srv usr; do
  mkdir -p "$scratch/$d/upper" "$scratch/$d/work"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$scratch/$d/upper,workdir=$scratch/$d/work" "/$d"
done
rm -rf /etc/mb /var/lib/mb /var/log/mb /run/mb /srv/pub
mkdir -p /srv/pub/iso && printf 'mb docs test\\n' > /srv/pub/iso/readme.txt
ip link set lo up
trap 'for f in /var/log/mb/*.log; do [ -e "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }; done; true' EXIT
for block in "$@"; do
  echo "=== $block"
  bash -e -u -o pipefail "$block"
done`

describe('docs/operations.md: the runnable shell blocks run as written', function () {
  this.timeout(300_000)
  let scratch: string
  let tdb: TestDatabase
  let child: ChildProcess | undefined

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'mb-docs-'))
    tdb = await createEmbeddedTestDatabase()
  })

  after(async () => {
    // The namespace's processes (a server a failed block left running) are this process group.
    if (child?.pid)
      try {
        process.kill(-child.pid, 'SIGKILL')
      } catch {
        // None is left.
      }
    await tdb?.drop()
    if (scratch) rmSync(scratch, {recursive: true, force: true})
  })

  it('finds the marked blocks', () => {
    const blocks = runnableBlocks(readFileSync(PAGE, 'utf8'))
    expect(blocks.length).to.be.greaterThan(0)
    for (const block of blocks) expect(block.text, `block at line ${block.line}`).to.match(/\bmb\b/)
    expect(runnableBlocks('<!-- runnable -->\n  ```sh\nx\n  ```\n')).to.deep.equal([], 'the marker and the fence share their indentation')
    expect(runnableBlocks('  <!-- runnable -->\n  ```sh\n  mb a\n  mb b\n  ```\n')).to.deep.equal([{line: 2, text: 'mb a\nmb b'}])
  })

  it('runs them in a temporary root, each exiting 0', async function () {
    requireBinary(this, 'unshare', 'util-linux')
    requireBinary(this, 'curl', 'curl')
    const blocks = runnableBlocks(readFileSync(PAGE, 'utf8'))
    const bin = join(scratch, 'bin')
    mkdirSync(bin)
    writeFileSync(join(bin, 'mb'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)} "$@"\n`)
    chmodSync(join(bin, 'mb'), 0o755)
    const files = blocks.map((block) => {
      const file = join(scratch, `block-line-${block.line}.sh`)
      writeFileSync(file, `${block.text}\n`)
      return file
    })
    const root = join(scratch, 'root')
    mkdirSync(root)
    mkdirSync(join(scratch, 'home'))
    const env = hermeticEnv({...tdb.env, HOME: join(scratch, 'home'), PATH: `${bin}:${process.env.PATH}`})
    child = spawn('unshare', ['-mn', 'sh', '-c', IN_TEMPORARY_ROOT, 'sh', root, ...files], {env, stdio: ['ignore', 'pipe', 'pipe'], detached: true})
    let output = ''
    child.stdout!.on('data', (d) => (output += d))
    child.stderr!.on('data', (d) => (output += d))
    const code = await new Promise<number | null>((resolve) => child!.once('exit', (c) => resolve(c)))
    expect(code, output).to.equal(0)
    expect(output.match(/^=== /gm), output).to.have.length(blocks.length)
  })
})
