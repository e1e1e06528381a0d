// @store-independent: which config files mb reads
/**
 * Tests never read system or user config: with a hostile `/etc/mb/mb.yaml` present, every
 * `mb` the helpers start reads none (MB_CONFIG=none), and says so. The hostile file lives in
 * a private mount namespace (`unshare -m`, an overlay over /etc), so the host is untouched.
 */
import {spawn, spawnSync} from 'node:child_process'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {expect} from 'chai'
import {BIN, type CliResult, hermeticEnv} from '../helpers/cli.js'
import {createTestDatabase, type TestDatabase} from '../helpers/db.js'
import {type ServeProcess, startServe} from '../helpers/serve-process.js'

const HOSTILE = 'database_url: postgres://prod:secret@hostile.invalid:1/production\nroot: /hostile-root\ntrusted_proxies: [10.9.0.0/16]\n'

/** Mounts an overlay over /etc holding `mb/mb.yaml` = $HOSTILE (upper and work dirs on a tmpfs at $1), then runs the rest. */
const OVERLAY_ETC = `set -e
mount -t tmpfs tmpfs "$1"
mkdir -p "$1/upper/mb" "$1/work"
printf '%s' "$HOSTILE" > "$1/upper/mb/mb.yaml"
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
shift
exec "$@"`

describe('hermetic config: tests never read /etc/mb/mb.yaml', function () {
  this.timeout(120_000)
  let scratch: string
  let tdb: TestDatabase

  /** `mb ARGS` in a mount namespace whose /etc/mb/mb.yaml is {@link HOSTILE}. */
  function mbBesideHostileEtc(args: string[], env: NodeJS.ProcessEnv): Promise<CliResult> {
    return new Promise((resolve, reject) => {
      const child = spawn('unshare', ['-m', 'sh', '-c', OVERLAY_ETC, 'sh', scratch, process.execPath, BIN, ...args], {env: {...env, HOSTILE}, stdio: ['ignore', 'pipe', 'pipe']})
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d) => (stdout += d))
      child.stderr.on('data', (d) => (stderr += d))
      child.on('error', reject)
      child.on('close', (code) => resolve({code: code ?? -1, stdout, stderr, json: () => JSON.parse(stdout)}))
    })
  }

  before(async function () {
    scratch = mkdtempSync(join(tmpdir(), 'mb-hostile-etc-'))
    const probe = spawnSync('unshare', ['-m', 'sh', '-c', `${OVERLAY_ETC}`, 'sh', scratch, 'cat', '/etc/mb/mb.yaml'], {env: {...process.env, HOSTILE}, encoding: 'utf8'})
    if (probe.stdout !== HOSTILE) {
      const why = `cannot overlay /etc in a private mount namespace (needs root and unshare): ${probe.stderr || probe.error}`
      if (process.env.CI === 'true') throw new Error(`${why}; .ci/run runs as root`)
      console.warn(`    (skipped: ${why})`)
      this.skip()
    }
    tdb = await createTestDatabase()
  })

  after(async () => {
    await tdb?.drop()
    if (scratch) rmSync(scratch, {recursive: true, force: true})
  })

  it('the hostile file is what an unprotected mb reads (the trap works)', async () => {
    const env = hermeticEnv({MB_CONFIG: undefined})
    const r = await mbBesideHostileEtc(['config', 'show', '--json'], env)
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().file).to.equal('/etc/mb/mb.yaml')
  })

  it("the helpers' environment reads no config file, and a store-opening command says so in its debug line", async () => {
    const shown = await mbBesideHostileEtc(['config', 'show', '--json'], hermeticEnv())
    expect(shown.code, shown.stderr).to.equal(0)
    const {file, settings} = shown.json()
    expect(file).to.equal(null)
    expect(settings.filter((s: {source: string}) => s.source.startsWith('file:'))).to.deep.equal([])
    const listed = await mbBesideHostileEtc(['mirror', 'list', '--json'], hermeticEnv({...tdb.env, MB_DEBUG: '1'}))
    expect(listed.code, listed.stderr).to.equal(0)
    expect(listed.stderr).to.match(/^mb: config none, store /m)
    expect(listed.stderr).not.to.contain('hostile')
  })

  it('--config none reads no file either, whatever MB_CONFIG says', async () => {
    const env = hermeticEnv({MB_CONFIG: undefined})
    const r = await mbBesideHostileEtc(['config', 'show', '--json', '--config', 'none'], env)
    expect(r.code, r.stderr).to.equal(0)
    expect(r.json().file).to.equal(null)
  })

  it("mb serve's listening line names the config file read", async () => {
    let serve: ServeProcess | undefined
    const root = mkdtempSync(join(tmpdir(), 'mb-hermetic-root-'))
    try {
      serve = await startServe(['--root', root, '--no-stats'], tdb.env)
      expect(serve.output()).to.match(/"config":"none".*"msg":"listening"/)
    } finally {
      await serve?.stop()
      rmSync(root, {recursive: true, force: true})
    }
  })
})
