/**
 * Effective configuration: defaults < config file < environment < flags.
 *
 * The file is YAML (read with the `yaml` package), found through `--config` or `MB_CONFIG`.
 * Keys in the file use snake_case; sections group the options of one area
 * (`select:`, `scan:`, `probe:`, `serve:`, `stats:`). One zod schema validates the merged
 * result, whatever layer a value came from, and each leaf remembers its source so that
 * `mb config show` can say where it came from.
 */
import {existsSync, readFileSync} from 'node:fs'
import {isAbsolute, join, resolve} from 'node:path'
import {parse as parseYaml} from 'yaml'
import {UsageError} from '../errors.js'
import {ConfigSchema, type Config} from './schema.js'
import {splitList} from '../text.js'

export type {Config} from './schema.js'

/** Where a setting's value came from. */
export type ConfigSource = 'default' | `file:${string}` | `env:${string}` | `flag:--${string}`

/** The validated configuration plus the source of every leaf key (dotted snake_case path). */
export interface LoadedConfig {
  config: Config
  sources: Record<string, ConfigSource>
  /** Absolute path of the config file read, if any. */
  file?: string
}

/**
 * Environment variables and the dotted config key each sets. Values are strings; lists are
 * comma-separated.
 */
const ENV_KEYS: Record<string, {key: string; list?: boolean}> = {
  MB_DATABASE_URL: {key: 'database_url'},
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
const OPTIONAL_KEYS = ['database_url', 'root', 'asn_db']

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
 * Loads and validates the effective configuration.
 *
 * @param options.file   path given by `--config` (wins over `MB_CONFIG`)
 * @param options.flags  dotted snake_case keys set by command-line flags, e.g.
 *                       `{'root': '/srv', 'serve.listen': '127.0.0.1:8080'}`; undefined values are ignored
 * @param options.env    the environment (default `process.env`)
 * @throws UsageError when the file is missing or unparsable, or a value fails validation;
 *         the message names the key and where the bad value came from.
 */
export function loadConfig(options: {file?: string; flags?: Record<string, unknown>; env?: NodeJS.ProcessEnv} = {}): LoadedConfig {
  const env = options.env ?? process.env
  const sources: Record<string, ConfigSource> = {}
  const tree: Tree = {}

  const fileArg = options.file ?? (env.MB_CONFIG && env.MB_CONFIG.length > 0 ? env.MB_CONFIG : undefined)
  let file: string | undefined
  if (fileArg) {
    file = resolve(fileArg)
    if (!existsSync(file)) throw new UsageError(`Config file ${file} does not exist. Check --config or MB_CONFIG.`, 'CONFIG_NOT_FOUND')
    let parsed: unknown
    try {
      parsed = parseYaml(readFileSync(file, 'utf8'))
    } catch (error) {
      throw new UsageError(`Config file ${file} is not valid YAML: ${(error as Error).message}`, 'CONFIG_INVALID')
    }
    if (parsed !== null && parsed !== undefined) {
      if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new UsageError(`Config file ${file} must hold a mapping of settings at its top level.`, 'CONFIG_INVALID')
      merge(tree, parsed as Tree)
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
    sources[key] = `flag:--${FLAG_NAMES[key] ?? key.split('.').at(-1)!.replaceAll('_', '-')}`
  }

  const result = ConfigSchema.safeParse(tree)
  if (!result.success) {
    const issue = result.error.issues[0]
    const key = issue.path.join('.')
    const from = sources[key] ?? sources[issue.path.slice(0, -1).join('.')] ?? 'the configuration'
    throw new UsageError(`Invalid setting ${key || '(top level)'} (from ${from}): ${issue.message}`, 'CONFIG_INVALID')
  }
  const config = result.data
  if (!config.data_dir) config.data_dir = defaultDataDir(env)
  for (const leaf of [...leaves(config), ...OPTIONAL_KEYS]) sources[leaf] ??= 'default'
  return {config, sources, file}
}
