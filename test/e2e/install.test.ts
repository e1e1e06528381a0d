/**
 * The release: `npm pack` packs the package, and `npm install -g --prefix TMP` of
 * the tarball alone, without dev dependencies and without building, gives a working `mb`:
 * `mb --version`, `mb db migrate` on a new store (a temp embedded store, or an empty
 * PostgreSQL database when MB_TEST_DATABASE_URL is set), a mirror served by nginx, an index,
 * a scan, and `mb serve` answering a 302 to that mirror.
 *
 * Dependencies come from the npm registry through the npm cache (`--prefer-offline`).
 *
 * It packs the `dist/` that the test run built (`--ignore-scripts` skips `prepack`'s build):
 * other test files run beside this one and spawn the `mb` in `dist/`, which a rebuild would
 * change under them.
 */
import {expect} from 'chai'
import {spawnSync} from 'node:child_process'
import {mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import pg from 'pg'
import {expectedSchemaVersion} from '../../src/lib/db/migrate.js'
import {mb, requireBinary} from '../helpers/cli.js'
import {backend} from '../helpers/db.js'
import {request, type ServeProcess, startServe} from '../helpers/serve-process.js'
import {type RunningServer, startNginx} from '../helpers/servers.js'

const REPO = new URL('../../', import.meta.url).pathname
const VERSION = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')).version as string

/** The environment for npm: without the variables an outer `npm test` sets for its own run. */
function npmEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {...process.env}
  for (const key of Object.keys(env)) {
    if (/^npm_(lifecycle_|package_|command$|config_(prefix|global|omit|include|dry_run)$)/.test(key)) delete env[key]
  }
  return env
}

function run(command: string, args: string[], cwd: string, timeoutMs: number): string {
  const r = spawnSync(command, args, {cwd, env: npmEnv(), encoding: 'utf8', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024})
  if (r.status !== 0) throw new Error(`${command} ${args.join(' ')} exited ${r.status ?? r.signal}:\n${r.stdout}\n${r.stderr}`)
  return r.stdout
}

describe(`the packed release installs and serves (${backend})`, function () {
  this.timeout(900_000)
  let dir: string
  let prefix: string
  let bin: string
  let env: Record<string, string | undefined>
  let nginx: RunningServer | undefined
  let serve: ServeProcess | undefined
  let database: string | undefined

  before(async function () {
    requireBinary(this, 'npm', 'npm')
    requireBinary(this, 'nginx', 'nginx-light')
    dir = mkdtempSync(join(tmpdir(), 'mb-install-'))
    prefix = join(dir, 'prefix')
    bin = join(prefix, 'bin', 'mb')
  })

  after(async () => {
    await serve?.stop()
    await nginx?.stop()
    if (database) {
      const admin = new pg.Client({connectionString: process.env.MB_TEST_DATABASE_URL})
      await admin.connect()
      await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      await admin.end()
    }
    if (dir) rmSync(dir, {recursive: true, force: true})
  })

  it('packs the bundled code (the migrations inside it), the manifest and contrib/, and no sources or tests', () => {
    run('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], REPO, 600_000)
    const tarball = readdirSync(dir).filter((name) => name.endsWith('.tgz'))
    expect(tarball).to.deep.equal([`mb-${VERSION}.tgz`])
    const files = run('tar', ['tzf', join(dir, tarball[0])], dir, 60_000)
      .trim()
      .split('\n')
    for (const file of [
      'package/bin/run.js',
      'package/oclif.manifest.json',
      'package/dist/src/commands/serve.js',
      'package/dist/src/hooks/init/version.js',
      'package/dist/src/lib/db/store-worker.js',
      'package/contrib/mb.yaml',
      'package/contrib/systemd/mb-serve.service',
      'package/contrib/logrotate/mb',
    ])
      expect(files, file).to.include(file)
    expect(files.filter((f) => /^package\/(src|test|bench|scripts)\//.test(f) || /\.ts$/.test(f))).to.deep.equal([])
  })

  it('installs from the tarball alone without dev dependencies and prints its versions', () => {
    const tarball = join(dir, `mb-${VERSION}.tgz`)
    run('npm', ['install', '-g', '--prefix', prefix, tarball, '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], dir, 600_000)
    const installed = join(prefix, 'lib', 'node_modules', 'mb')
    expect(readdirSync(join(installed, 'node_modules'))).to.not.include.members(['typescript', 'tsx', 'mocha'])
    const version = spawnSync(bin, ['--version'], {encoding: 'utf8', timeout: 60_000})
    expect(version.status, version.stderr).to.equal(0)
    expect(version.stdout.trim()).to.equal(`mb ${VERSION} (schema ${expectedSchemaVersion()}, node ${process.version}, ${process.platform}-${process.arch})`)
  })

  it('migrates a new store, scans a mirror and answers a 302 to it', async () => {
    const root = join(dir, 'root')
    mkdirSync(join(root, 'pub'), {recursive: true})
    writeFileSync(join(root, 'pub', 'release.iso'), Buffer.alloc(10_000, 7))
    nginx = await startNginx({root, autoindex: 'html'})
    env = {MB_ROOT: root, MB_DATA_DIR: join(dir, 'data'), MB_DATABASE_URL: undefined}
    if (backend === 'postgres') {
      database = `mb_install_${process.pid}`
      const admin = new pg.Client({connectionString: process.env.MB_TEST_DATABASE_URL})
      await admin.connect()
      await admin.query(`DROP DATABASE IF EXISTS ${database}`)
      await admin.query(`CREATE DATABASE ${database}`)
      await admin.end()
      const url = new URL(process.env.MB_TEST_DATABASE_URL!)
      url.pathname = `/${database}`
      env = {...env, MB_DATABASE_URL: url.toString(), MB_DATA_DIR: undefined}
    }
    const migrate = await mb(['db', 'migrate', '--json'], {env, bin})
    expect(migrate.code, migrate.stderr).to.equal(0)
    expect(JSON.stringify(migrate.json())).to.contain(expectedSchemaVersion())
    for (const args of [
      ['mirror', 'add', '--no-locate', 'm.example', '--http-url', nginx.url],
      ['index', '--quiet'],
      ['scan', '--all', '--quiet'],
    ]) {
      const r = await mb(args, {env, bin})
      expect(r.code, `mb ${args.join(' ')}: ${r.stderr}`).to.equal(0)
    }
    serve = await startServe([], env, {bin})
    const res = await request(serve.port, '/pub/release.iso')
    expect(res.status).to.equal(302)
    expect(res.headers.location).to.equal(`${nginx.url}pub/release.iso`)
    expect(res.headers['x-mb-mirror']).to.equal('m.example')
  })
})
