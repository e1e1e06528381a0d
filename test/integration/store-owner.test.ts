/**
 * The embedded store cannot be broken by the wrong user (issue 36, item 2): a command run as
 * another user than the store's owner (root on a service's store, typically) is refused with
 * a message naming the owner and `runuser -u OWNER -- mb …`, and leaves every file as it was;
 * a store file the running user cannot use is named with its owner and mode, never PGlite's
 * `Aborted()`. Runs as root (CI does), on the embedded store alone.
 */
import {expect} from 'chai'
import {execFileSync} from 'node:child_process'
import {chmodSync, chownSync, lstatSync, mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {BIN, mb, requireRoot} from '../helpers/cli.js'
import {backend} from '../helpers/db.js'

/** uid and gid of `nobody`, the stand-in for a service account. */
const NOBODY = 65_534
const NO_STORE = {MB_DATABASE_URL: undefined, XDG_DATA_HOME: undefined}

/** Every path under `dir` with its owner uid and mode. */
function owners(dir: string): string[] {
  const found: string[] = []
  const walk = (path: string) => {
    const stat = lstatSync(path)
    found.push(`${path} ${stat.uid} ${(stat.mode & 0o7777).toString(8)}`)
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name))
  }
  walk(dir)
  return found.sort()
}

const suite = (backend === 'pglite' ? describe : () => undefined) as Mocha.SuiteFunction

/** This checkout (the directory of bin/run.js). */
const checkout = dirname(dirname(BIN))

/**
 * Runs `node CHECKOUT/bin/run.js ARGS…` as uid $3, in the private mount namespace `unshare
 * --mount` made: the checkout is bind-mounted at $2, a directory that user can reach, since
 * the checkout itself may lie where only root may enter (a clone in a 0700 `mktemp -d`, or
 * root's home). A checkout whose files that user cannot read fails with a message saying so.
 * Arguments: $1 checkout, $2 mount point, $3 uid, $4 node, then mb's arguments.
 */
const AS_NOBODY = `set -e
checkout=$1 view=$2 uid=$3 node=$4; shift 4
mkdir -p "$view" && mount --bind "$checkout" "$view"
if ! setpriv --reuid "$uid" --regid "$uid" --clear-groups -- test -r "$view/bin/run.js" -a -r "$view/dist/src/commands/mirror/list.js"; then
  echo "uid $uid cannot read this checkout's files (bin/run.js, dist/): make them readable by others (chmod -R o+rX $checkout) or clone under umask 022" >&2
  exit 99
fi
exec setpriv --reuid "$uid" --regid "$uid" --clear-groups -- "$node" "$view/bin/run.js" "$@"`

suite('the embedded store and its owner', function () {
  this.timeout(180_000)
  let dir: string
  let store: string

  before(async function () {
    requireRoot(this, 'to act as another user than the store owner')
    dir = mkdtempSync(join(tmpdir(), 'mb-owner-'))
    chmodSync(dir, 0o755)
    store = join(dir, 'store')
    const created = await mb(['db', 'migrate'], {env: {...NO_STORE, MB_DATA_DIR: store}})
    expect(created.code, created.stderr).to.equal(0)
    execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, store])
  })

  after(() => {
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('refuses root on a store that belongs to another user, names the owner and the command, and changes nothing', async () => {
    const before = owners(store)
    for (const args of [
      ['mirror', 'list'],
      ['mirror', 'disable', 'x.example'],
      ['db', 'migrate'],
    ]) {
      const r = await mb(args, {env: {...NO_STORE, MB_DATA_DIR: store}})
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(1)
      expect(r.stderr).to.contain(`The embedded store at ${store} belongs to nobody, and this command runs as root`)
      expect(r.stderr).to.contain('runuser -u nobody -- mb …')
      expect(r.stderr).to.not.contain('Aborted')
    }
    expect(owners(store)).to.deep.equal(before)
  })

  it('names a store file its user cannot use, with its owner and mode, instead of Aborted()', async () => {
    const control = join(store, 'global', 'pg_control')
    chownSync(control, 0, 0)
    chmodSync(control, 0o600)
    try {
      const r = execFileSync('unshare', ['--mount', 'sh', '-c', AS_NOBODY, 'sh', checkout, join(dir, 'checkout'), String(NOBODY), process.execPath, 'mirror', 'list'], {
        env: {PATH: process.env.PATH, MB_DATA_DIR: store, MB_CONFIG: 'none', HOME: dir},
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      })
      expect.fail(`expected a failure, got: ${r}`)
    } catch (error) {
      const e = error as {status: number; stderr: string}
      expect(e.status, e.stderr).to.equal(1)
      expect(e.stderr).to.contain(`Cannot open the embedded store at ${store}: this user cannot read and write ${control} (owner root, mode 0600)`)
      expect(e.stderr).to.not.contain('Aborted')
    } finally {
      chownSync(control, NOBODY, NOBODY)
    }
  })
})
