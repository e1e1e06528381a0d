/**
 * Effective configuration: defaults < config file < environment < flags.
 *
 * The file is YAML (read with the `yaml` package). The first of these is read
 * ({@link findConfigFile}): `--config`, `MB_CONFIG`, `$XDG_CONFIG_HOME/mb/mb.yaml` (default
 * `~/.config/mb/mb.yaml`), `/etc/mb/mb.yaml`. A file named by `--config` or `MB_CONFIG` must
 * exist; the other two are used when present. `--config none` or `MB_CONFIG=none` reads no
 * file at all (defaults, environment and flags only): what tests and one-off runs beside a
 * production `/etc/mb/mb.yaml` use.
 * Keys in the file use snake_case; sections group the options of one area
 * (`select:`, `scan:`, `probe:`, `serve:`, `stats:`). One zod schema validates the merged
 * result, whatever layer a value came from, and each leaf remembers its source so that
 * `mb config show` can say where it came from.
 */
import {existsSync, readFileSync, statSync} from 'node:fs'
import {homedir} from 'node:os'
import {isAbsolute, join, resolve} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {z} from 'zod'
import {UsageError} from '../errors.js'
import {ConfigSchema, type Config} from './schema.js'
import {splitList} from '../text.js'
import {closest} from '../suggest.js'

export type {Config} from './schema.js'

/** Where a setting's value came from. */
export type ConfigSource = 'default' | `file:${string}` | `env:${string}` | `flag:--${string}`

/** The validated configuration plus the source of every leaf key (dotted snake_case path). */
export interface LoadedConfig {
  config: Config
  sources: Record<string, ConfigSource>
  /** Absolute path of the config file read; undefined when none was (see {@link configFileLabel}). */
  file?: string
  /** Warnings for the operator (stderr), e.g. a config file with a password that others can read. */
  warnings: string[]
}

/**
 * Environment variables and the dotted config key each sets. Values are strings; lists are
 * comma-separated.
 */
const ENV_KEYS: Record<string, {key: string; list?: boolean}> = {
  MB_DATABASE_URL: {key: 'database_url'},
  MB_DATABASE_READ_URL: {key: 'database_read_url'},
  MB_DATA_DIR: {key: 'data_dir'},
  MB_ROOT: {key: 'root'},
  MB_GEOIP: {key: 'geoip', list: true},
  MB_ASN_DB: {key: 'asn_db'},
  MB_TRUSTED_PROXIES: {key: 'trusted_proxies', list: true},
  MB_LISTEN: {key: 'serve.listen'},
  MB_LOG_LEVEL: {key: 'log_level'},
}

/** Command-line flag names whose spelling differs from their config key's last part. */
const FLAG_NAMES: Record<string, string> = {
  trusted_proxies: 'trusted-proxy',
  'serve.listen': 'listen',
  'select.min_size': 'min-size',
}

/** Optional settings that `mb config show` lists even when unset. */
const OPTIONAL_KEYS = ['database_url', 'database_read_url', 'root', 'asn_db']

/** The system-wide config file, read when no other one is named or present. */
const SYSTEM_CONFIG_FILE = '/etc/mb/mb.yaml'

/** The `--config`/`MB_CONFIG` value that reads no file (a file named so is `./none`). */
const NO_CONFIG = 'none'

/**
 * The config file to read, by the XDG Base Directory rules
 * (https://specifications.freedesktop.org/basedir-spec/latest/):
 * 1. `explicit` (`--config`), then `MB_CONFIG`: must exist, else a usage error; {@link NO_CONFIG}
 *    (`none`) stops the search there: no file, neither the user's nor the system's;
 * 2. `$XDG_CONFIG_HOME/mb/mb.yaml`, `~/.config/mb/mb.yaml` when XDG_CONFIG_HOME is unset or
 *    not absolute (the spec says to ignore a relative one); skipped without a home directory;
 * 3. `systemFile` (default {@link SYSTEM_CONFIG_FILE}).
 * @returns the absolute path, or undefined when no file applies (defaults only)
 * @throws UsageError `CONFIG_NOT_FOUND` when an explicit file does not exist
 */
export function findConfigFile(explicit: string | undefined, env: NodeJS.ProcessEnv = process.env, systemFile = SYSTEM_CONFIG_FILE): string | undefined {
  const named = explicit ?? (env.MB_CONFIG && env.MB_CONFIG.length > 0 ? env.MB_CONFIG : undefined)
  if (named === NO_CONFIG) return undefined
  if (named !== undefined) {
    const file = resolve(named)
    const via = explicit === undefined ? 'MB_CONFIG' : '--config'
    if (!existsSync(file))
      throw new UsageError(
        `Config file ${file} (from ${via}) does not exist. Check the path, leave ${via} unset to use ~/.config/mb/mb.yaml or ${SYSTEM_CONFIG_FILE}, or set it to ${NO_CONFIG} to read no config file.`,
        'CONFIG_NOT_FOUND',
      )
    return file
  }
  const candidates: string[] = []
  const xdg = env.XDG_CONFIG_HOME
  if (xdg && isAbsolute(xdg)) candidates.push(join(xdg, 'mb', 'mb.yaml'))
  else {
    const home = homeDirectory(env)
    if (home) candidates.push(join(home, '.config', 'mb', 'mb.yaml'))
  }
  candidates.push(systemFile)
  return candidates.find((file) => existsSync(file))
}

/** `$HOME`, else the password database's entry; undefined when neither gives one. */
function homeDirectory(env: NodeJS.ProcessEnv): string | undefined {
  if (env.HOME) return env.HOME
  try {
    return homedir() || undefined
  } catch {
    return undefined
  }
}

/**
 * The default embedded-store directory: `$XDG_DATA_HOME/mb`, else `$HOME/.local/share/mb`
 * (XDG Base Directory Specification: a relative XDG_DATA_HOME is ignored). Undefined when
 * neither is an absolute path, as under cron or a service without HOME: the store's place
 * is then unknown, and guessing one (the passwd entry's home, the working directory) could
 * open a new, empty store.
 */
function defaultDataDir(env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.XDG_DATA_HOME && isAbsolute(env.XDG_DATA_HOME)) return join(env.XDG_DATA_HOME, 'mb')
  if (env.HOME && isAbsolute(env.HOME)) return join(env.HOME, '.local', 'share', 'mb')
  return undefined
}

/** The config file read, for log and debug lines: its path, or `none`. */
export function configFileLabel(loaded: Pick<LoadedConfig, 'file'>): string {
  return loaded.file ?? 'none'
}

type Tree = Record<string, unknown>

function setPath(tree: Tree, dotted: string, value: unknown): void {
  const parts = dotted.split('.')
  let node = tree
  for (const part of parts.slice(0, -1)) {
    if (typeof node[part] !== 'object' || node[part] === null || Array.isArray(node[part])) node[part] = {}
    node = node[part] as Tree
  }
  node[parts.at(-1)!] = value
}

function leaves(tree: unknown, prefix = ''): string[] {
  if (typeof tree !== 'object' || tree === null || Array.isArray(tree)) return prefix ? [prefix] : []
  return Object.entries(tree as Tree).flatMap(([k, v]) => leaves(v, prefix ? `${prefix}.${k}` : k))
}

function merge(target: Tree, source: Tree): Tree {
  for (const [k, v] of Object.entries(source)) {
    if (v === undefined) continue
    if (typeof v === 'object' && v !== null && !Array.isArray(v) && typeof target[k] === 'object' && target[k] !== null && !Array.isArray(target[k])) {
      merge(target[k] as Tree, v as Tree)
    } else {
      target[k] = v
    }
  }
  return target
}

/**
 * A warning when the config file `file` holds a database password (in `databaseUrl`, as
 * the URL's password or a `password` parameter) and its mode lets every user read it; null
 * otherwise. A group-readable file is the usual service layout (`root:mb 0640`), an explicit
 * grant, so it is not warned about. The fix named is `chmod o-r`.
 */
function exposedPasswordWarning(file: string, databaseUrl: unknown): string | null {
  if (typeof databaseUrl !== 'string') return null
  let url: URL
  try {
    url = new URL(databaseUrl)
  } catch {
    return null
  }
  if (url.password === '' && !url.searchParams.has('password')) return null
  const mode = statSync(file).mode
  if ((mode & 0o004) === 0) return null
  return `Warning: config file ${file} holds a database password and is readable by all users (mode ${(mode & 0o777).toString(8).padStart(3, '0')}). Restrict it: chmod o-r ${file} (or chmod 600 ${file})`
}

/** The value at `path` in `tree`, or undefined. */
function valueAt(tree: unknown, path: ReadonlyArray<string | number>): unknown {
  let node = tree
  for (const part of path) {
    if (typeof node !== 'object' || node === null) return undefined
    node = (node as Record<string | number, unknown>)[part]
  }
  return node
}

/**
 * The error for the first failed check: it names the setting as the user gave it (the flag
 * typed, the environment variable, or the key and the file), and says on its one line what
 * was wrong and what value was received, e.g.
 * `Invalid value for --stats-flush-interval (setting stats.flush_interval_seconds): expected a
 * number, but received "abc".`
 */
function invalidSetting(issue: z.ZodIssue, tree: Tree, sources: Record<string, ConfigSource>): UsageError {
  const key = issue.path.join('.')
  // An unknown key has no source of its section's own, but the file it was read from is the key's.
  const unknown = issue.code === 'unrecognized_keys' ? sources[[...issue.path, issue.keys[0]].join('.')] : undefined
  const source = sources[key] ?? sources[issue.path.slice(0, -1).join('.')] ?? unknown
  const where =
    source?.startsWith('flag:') || source?.startsWith('env:')
      ? `Invalid value for ${source.slice(source.indexOf(':') + 1)} (setting ${key})`
      : source?.startsWith('file:')
        ? `Invalid setting ${key || '(top level)'} in ${source.slice(5)}`
        : `Invalid setting ${key || '(top level)'}`
  const raw = valueAt(tree, issue.path)
  const received = raw === undefined || Number.isNaN(raw) ? undefined : typeof raw === 'number' && !Number.isFinite(raw) ? String(raw) : JSON.stringify(raw)
  let what = issue.message.charAt(0).toLowerCase() + issue.message.slice(1)
  if (issue.code === 'unrecognized_keys') return new UsageError(`${where}: ${unknownKeys(issue.keys, issue.path)}.`, 'CONFIG_INVALID')
  if (issue.code === 'invalid_type') {
    what = `expected ${issue.expected === 'number' ? 'a number' : issue.expected}`
    if (received !== undefined) what += `, but received ${received}`
  } else if ((issue.code === 'too_big' || issue.code === 'too_small' || issue.code === 'not_finite') && numberRange(issue.path) !== undefined) {
    what = `expected ${numberRange(issue.path)}`
    if (received !== undefined) what += `, but received ${received}`
  } else if (received !== undefined && !what.includes(String(raw))) {
    what += ` (received ${received})`
  }
  return new UsageError(`${where}: ${what}.`, 'CONFIG_INVALID')
}

/** `schema` without its defaults, optionals, nullables and transforms. */
function unwrap(schema: z.ZodTypeAny): z.ZodTypeAny {
  for (;;) {
    if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) schema = schema._def.innerType
    else if (schema instanceof z.ZodEffects) schema = schema._def.schema
    else return schema
  }
}

/** The schema of the setting at `path` of {@link ConfigSchema} (unwrapped), or undefined. */
function schemaAt(path: ReadonlyArray<string | number>): z.ZodTypeAny | undefined {
  let schema = unwrap(ConfigSchema)
  for (const part of path) {
    if (!(schema instanceof z.ZodObject)) return undefined
    const next = (schema.shape as Record<string, z.ZodTypeAny>)[String(part)]
    if (!next) return undefined
    schema = unwrap(next)
  }
  return schema
}

/** The keys of the section of {@link ConfigSchema} at `path` (empty when it is not a section). */
function sectionKeys(path: Array<string | number>): string[] {
  const schema = schemaAt(path)
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : []
}

/**
 * The accepted range of the numeric setting at `path`, as `a number from 0 to 3600`, `an
 * integer from 1 to 64` or `a number above 0, at most 300`, or undefined when it is not a number.
 */
function numberRange(path: ReadonlyArray<string | number>): string | undefined {
  const schema = schemaAt(path)
  if (!(schema instanceof z.ZodNumber)) return undefined
  const {minValue, maxValue, isInt} = schema
  const exclusive = schema._def.checks.some((c) => c.kind === 'min' && !c.inclusive)
  const kind = isInt ? 'an integer' : 'a number'
  if (exclusive) return `${kind} above ${minValue}${maxValue === null ? '' : `, at most ${maxValue}`}`
  if (minValue !== null && maxValue !== null) return `${kind} from ${minValue} to ${maxValue}`
  return `${kind}${minValue === null ? '' : ` of at least ${minValue}`}${maxValue === null ? '' : ` of at most ${maxValue}`}`
}

/**
 * `unknown key "listne" (did you mean listen?)` for each key a section does not have; the
 * section's keys when one of them has no close match.
 */
function unknownKeys(keys: string[], path: Array<string | number>): string {
  const known = sectionKeys(path)
  let guessed = true
  const parts = keys.map((key) => {
    const near = closest(key, known)
    guessed &&= near !== undefined
    return `unknown key ${JSON.stringify(key)}${near ? ` (did you mean ${near}?)` : ''}`
  })
  // Without a guess for every key, the keys there are.
  return guessed || known.length === 0 ? parts.join(', ') : `${parts.join(', ')}; known keys here: ${known.join(', ')}`
}

/**
 * Loads and validates the effective configuration.
 *
 * @param options.file   path given by `--config` (wins over `MB_CONFIG`); see {@link findConfigFile}
 * @param options.flags  dotted snake_case keys set by command-line flags, e.g.
 *                       `{'root': '/srv', 'serve.listen': '127.0.0.1:8080'}`; undefined values are ignored
 * @param options.flagNames the flag each key of `options.flags` was typed as, without `--`
 *                       (e.g. `{'stats.flush_interval_seconds': 'stats-flush-interval'}`), so
 *                       that sources and errors name the flag the user typed; a key not
 *                       listed falls back to its last part in kebab case
 * @param options.env    the environment (default `process.env`)
 * @param options.systemFile  the system-wide file (default {@link SYSTEM_CONFIG_FILE}; tests)
 * @throws UsageError when the file is missing or unparsable, or a value fails validation;
 *         the message names the key and where the bad value came from.
 */
export function loadConfig(options: {file?: string; flags?: Record<string, unknown>; flagNames?: Record<string, string>; env?: NodeJS.ProcessEnv; systemFile?: string} = {}): LoadedConfig {
  const env = options.env ?? process.env
  const sources: Record<string, ConfigSource> = {}
  const tree: Tree = {}
  const warnings: string[] = []

  const file = findConfigFile(options.file, env, options.systemFile)
  if (file) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (error) {
      throw new UsageError(`Config file ${file} cannot be read: ${(error as Error).message}`, 'CONFIG_INVALID')
    }
    let parsed: unknown
    try {
      parsed = parseYaml(text)
    } catch (error) {
      throw new UsageError(`Config file ${file} is not valid YAML: ${(error as Error).message}`, 'CONFIG_INVALID')
    }
    if (parsed !== null && parsed !== undefined) {
      if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new UsageError(`Config file ${file} must hold a mapping of settings at its top level.`, 'CONFIG_INVALID')
      merge(tree, parsed as Tree)
      for (const url of [(parsed as Tree).database_url, (parsed as Tree).database_read_url]) {
        const exposed = exposedPasswordWarning(file, url)
        if (exposed) warnings.push(exposed)
      }
      for (const leaf of leaves(parsed)) sources[leaf] = `file:${file}`
    }
  }

  for (const [name, {key, list}] of Object.entries(ENV_KEYS)) {
    const raw = env[name]
    if (raw === undefined || raw === '') continue
    setPath(tree, key, list ? splitList(raw) : raw)
    sources[key] = `env:${name}`
  }

  for (const [key, value] of Object.entries(options.flags ?? {})) {
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue
    setPath(tree, key, value)
    sources[key] = `flag:--${options.flagNames?.[key] ?? FLAG_NAMES[key] ?? key.split('.').at(-1)!.replaceAll('_', '-')}`
  }

  const result = ConfigSchema.safeParse(tree)
  if (!result.success) throw invalidSetting(result.error.issues[0], tree, sources)
  const config = result.data
  if (!config.data_dir) config.data_dir = defaultDataDir(env)
  for (const leaf of [...leaves(config), ...OPTIONAL_KEYS]) sources[leaf] ??= 'default'
  return {config, sources, file, warnings}
}
