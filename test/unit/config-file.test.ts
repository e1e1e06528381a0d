/**
 * The config file: which one mb reads (--config, MB_CONFIG, $XDG_CONFIG_HOME/mb/mb.yaml or
 * ~/.config/mb/mb.yaml, /etc/mb/mb.yaml), what `mb config show` says about it, and the sample
 * `contrib/mb.yaml`, which must match the schema and, switched on line by line, give exactly
 * the defaults.
 */
import {expect} from 'chai'
import {mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {SAMPLE_PATH, renderSampleConfig} from '../../scripts/sample-config.js'
import {configFileLabel, findConfigFile, loadConfig} from '../../src/lib/config/index.js'
import {UsageError} from '../../src/lib/errors.js'
import {mb} from '../helpers/cli.js'

describe('config file lookup', () => {
  let dir: string
  let xdg: string
  let home: string
  let system: string

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-config-'))
    xdg = join(dir, 'xdg')
    home = join(dir, 'home')
    system = join(dir, 'etc', 'mb', 'mb.yaml')
  })
  afterEach(() => rmSync(dir, {recursive: true, force: true}))

  function write(path: string, text: string): string {
    mkdirSync(join(path, '..'), {recursive: true})
    writeFileSync(path, text)
    return path
  }

  it('takes --config over MB_CONFIG over XDG_CONFIG_HOME over the system file', () => {
    const flag = write(join(dir, 'flag.yaml'), 'log_level: error\n')
    const envFile = write(join(dir, 'env.yaml'), 'log_level: warn\n')
    const user = write(join(xdg, 'mb', 'mb.yaml'), 'log_level: debug\n')
    write(system, 'log_level: trace\n')
    const env = {MB_CONFIG: envFile, XDG_CONFIG_HOME: xdg, HOME: home}
    expect(findConfigFile(flag, env, system)).to.equal(flag)
    expect(findConfigFile(undefined, env, system)).to.equal(envFile)
    expect(findConfigFile(undefined, {XDG_CONFIG_HOME: xdg, HOME: home}, system)).to.equal(user)
    expect(findConfigFile(undefined, {XDG_CONFIG_HOME: join(dir, 'empty'), HOME: home}, system)).to.equal(system)
    const loaded = loadConfig({env: {XDG_CONFIG_HOME: xdg, HOME: home}, systemFile: system})
    expect(loaded.file).to.equal(user)
    expect(loaded.config.log_level).to.equal('debug')
    expect(loaded.sources.log_level).to.equal(`file:${user}`)
  })

  it('reads no file at all for --config none or MB_CONFIG=none, though user and system files exist', () => {
    const user = write(join(xdg, 'mb', 'mb.yaml'), 'log_level: debug\n')
    write(system, 'log_level: trace\n')
    const env = {XDG_CONFIG_HOME: xdg, HOME: home}
    expect(findConfigFile(undefined, env, system)).to.equal(user)
    expect(findConfigFile('none', env, system)).to.equal(undefined)
    expect(findConfigFile(undefined, {...env, MB_CONFIG: 'none'}, system)).to.equal(undefined)
    const loaded = loadConfig({env: {...env, MB_CONFIG: 'none', MB_LOG_LEVEL: 'warn'}, systemFile: system})
    expect(loaded.file).to.equal(undefined)
    expect(configFileLabel(loaded)).to.equal('none')
    expect(loaded.config.log_level).to.equal('warn')
    expect(configFileLabel(loadConfig({env, systemFile: system}))).to.equal(user)
  })

  it('falls back to ~/.config/mb/mb.yaml when XDG_CONFIG_HOME is unset or relative', () => {
    const user = write(join(home, '.config', 'mb', 'mb.yaml'), 'log_level: warn\n')
    expect(findConfigFile(undefined, {HOME: home}, system)).to.equal(user)
    expect(findConfigFile(undefined, {HOME: home, XDG_CONFIG_HOME: 'relative/dir'}, system)).to.equal(user)
  })

  it('uses no file, only defaults, when none exists', () => {
    const loaded = loadConfig({env: {XDG_CONFIG_HOME: xdg, HOME: home}, systemFile: system})
    expect(loaded.file).to.equal(undefined)
    expect(loaded.config.log_level).to.equal('info')
    expect(loaded.sources.log_level).to.equal('default')
  })

  it('refuses an explicit --config or MB_CONFIG that does not exist, naming the path and its origin', () => {
    write(system, 'log_level: warn\n')
    const missing = join(dir, 'missing.yaml')
    for (const [explicit, env, via] of [
      [missing, {}, '--config'],
      [undefined, {MB_CONFIG: missing}, 'MB_CONFIG'],
    ] as const) {
      let error: unknown
      try {
        findConfigFile(explicit, env, system)
      } catch (caught) {
        error = caught
      }
      expect(error).to.be.instanceOf(UsageError)
      expect((error as UsageError).code).to.equal('CONFIG_NOT_FOUND')
      expect((error as UsageError).message)
        .to.contain(missing)
        .and.contain(`(from ${via})`)
    }
  })
})

describe('mb config show names the file it used', () => {
  let dir: string
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mb-config-show-'))
    mkdirSync(join(dir, 'mb'))
    writeFileSync(join(dir, 'mb', 'mb.yaml'), 'select:\n  min_size: 8192\n')
  })
  after(() => rmSync(dir, {recursive: true, force: true}))

  // A test of the search itself: MB_CONFIG is left unset (the helpers set it to none).
  it('prints the XDG file, and "none, defaults" without one', async () => {
    const used = await mb(['config', 'show'], {env: {MB_CONFIG: undefined, XDG_CONFIG_HOME: dir}})
    expect(used.code, used.stderr).to.equal(0)
    expect(used.stdout.split('\n')[0]).to.equal(`config file: ${join(dir, 'mb', 'mb.yaml')}`)
    expect(used.stdout).to.match(new RegExp(`^select\\.min_size\\t8192\\tfile:${join(dir, 'mb', 'mb.yaml')}$`, 'm'))
    const json = (await mb(['config', 'show', '--json'], {env: {MB_CONFIG: undefined, XDG_CONFIG_HOME: dir}})).json()
    expect(json.file).to.equal(join(dir, 'mb', 'mb.yaml'))
    const none = await mb(['config', 'show'], {env: {MB_CONFIG: undefined, XDG_CONFIG_HOME: join(dir, 'nothing-here')}})
    expect(none.stdout.split('\n')[0]).to.equal('config file: none, defaults')
    // An empty geoip is the bundled data, not "no GeoIP": the table says so, --json keeps [].
    expect(none.stdout).to.match(/^geoip\t\(empty: the bundled GeoLite2 City data\)\tdefault$/m)
    expect(json.settings.find((s: {key: string}) => s.key === 'geoip').value).to.deep.equal([])
  })

  it('exits 2 when MB_CONFIG names a missing file', async () => {
    const r = await mb(['config', 'show'], {env: {MB_CONFIG: join(dir, 'nope.yaml')}})
    expect(r.code).to.equal(2)
    expect(r.stderr).to.contain(`Config file ${join(dir, 'nope.yaml')} (from MB_CONFIG) does not exist`)
  })
})

describe('contrib/mb.yaml', () => {
  it('is what `npm run contrib` generates from the schema', () => {
    expect(readFileSync(SAMPLE_PATH, 'utf8'), 'contrib/mb.yaml is stale: run `npm run contrib`').to.equal(renderSampleConfig())
  })

  it('gives exactly the defaults with every setting switched on', () => {
    const dir = mkdtempSync(join(tmpdir(), 'mb-sample-'))
    try {
      const env = {HOME: dir}
      const defaults = loadConfig({env, systemFile: join(dir, 'none')})
      const sections = Object.entries(defaults.config)
        .filter(([, value]) => typeof value === 'object' && value !== null && !Array.isArray(value))
        .map(([key]) => key)
      // Settings that are groups of settings inside a section (serve.origin_budget): their lines open a block too.
      const isGroup = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value)
      const groups = new Set(
        sections.flatMap((section) => Object.entries((defaults.config as unknown as Record<string, Record<string, unknown>>)[section]).flatMap(([key, value]) => (isGroup(value) ? [key] : []))),
      )
      // Switch on every setting that has a value, and every section and group line; unset ones stay commented.
      const on = readFileSync(SAMPLE_PATH, 'utf8').replace(/^( *)#([a-z0-9_]+):( .+)?$/gm, (line, indent: string, key: string, value?: string) =>
        value !== undefined || (indent === '' && sections.includes(key)) || (indent === '  ' && groups.has(key)) ? `${indent}${key}:${value ?? ''}` : line,
      )
      expect(on).to.match(/^serve:$/m)
      expect(on).to.match(/^ {2}listen: 127\.0\.0\.1:8080$/m)
      const file = join(dir, 'mb.yaml')
      writeFileSync(file, on)
      const fromSample = loadConfig({file, env})
      expect(fromSample.config).to.deep.equal(defaults.config)
      expect(Object.values(fromSample.sources).filter((s) => s.startsWith('file:')).length).to.be.greaterThan(40)
    } finally {
      rmSync(dir, {recursive: true, force: true})
    }
  })
})

describe('database_read_url', () => {
  it('comes from MB_DATABASE_READ_URL beside database_url, and is refused without it (the embedded store has no standby)', () => {
    const env = {MB_CONFIG: 'none', MB_DATABASE_URL: 'postgres://mb@primary/mb', MB_DATABASE_READ_URL: 'postgres://mb@standby/mb'}
    const loaded = loadConfig({env})
    expect(loaded.config.database_read_url).to.equal('postgres://mb@standby/mb')
    expect(loaded.sources.database_read_url).to.equal('env:MB_DATABASE_READ_URL')
    let error: unknown
    try {
      loadConfig({env: {MB_CONFIG: 'none', MB_DATA_DIR: '/nonexistent/store', MB_DATABASE_READ_URL: 'postgres://mb@standby/mb'}})
    } catch (e) {
      error = e
    }
    expect(error).to.be.instanceOf(UsageError)
    expect((error as UsageError).code).to.equal('CONFIG_INVALID')
    expect((error as Error).message).to.match(/MB_DATABASE_READ_URL \(setting database_read_url\).*set database_url/)
  })
})
