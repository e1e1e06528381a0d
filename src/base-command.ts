/**
 * The base of every `mb` command: shared flags (`--json`, `--quiet`, `--wide`, `--config`,
 * `--database-url`, `--data-dir`), configuration loading, database access, and exit codes
 * (0 ok, 1 failure, 2 usage) that hold with and without `--json`.
 *
 * `--quiet` (for cron and scripts) prints errors only: no tables, summaries, warnings or
 * progress, and `mb serve` logs at level `error`. A document asked for explicitly (`--json`,
 * `mb stats --format csv`, `mb metalink`) is still printed; the exit code tells the rest.
 */
import {Command, Errors, Flags, type Interfaces} from '@oclif/core'
import {configFileLabel, type Config as MbConfig, type LoadedConfig, loadConfig} from './lib/config/index.js'
import {type Database, describeStore, openDatabase, type OpenOptions} from './lib/db/index.js'
import {ERRORS, type ErrorCode, MbError, errorMessage} from './lib/errors.js'
import {setWideTables} from './lib/output.js'
import {closest} from './lib/suggest.js'

export type BaseFlags<T extends typeof Command> = Interfaces.InferredFlags<(typeof BaseCommand)['baseFlags'] & T['flags']>

export abstract class BaseCommand<T extends typeof Command> extends Command {
  static override enableJsonFlag = true

  static override baseFlags = {
    quiet: Flags.boolean({char: 'q', description: 'print errors only (for cron and scripts); --json output is still printed', helpGroup: 'GLOBAL'}),
    config: Flags.string({description: 'YAML config file (env: MB_CONFIG); "none" reads no config file, not even /etc/mb/mb.yaml', helpGroup: 'GLOBAL'}),
    'database-url': Flags.string({description: 'PostgreSQL URL (env: MB_DATABASE_URL); default: the embedded store', helpGroup: 'GLOBAL'}),
    'data-dir': Flags.string({description: 'embedded store directory (env: MB_DATA_DIR; default ~/.local/share/mb)', helpGroup: 'GLOBAL'}),
    wide: Flags.boolean({description: 'print tables in full on a terminal, however wide (by default they fit its width, leaving out columns of low value)', helpGroup: 'GLOBAL'}),
  }

  protected flags!: BaseFlags<T>
  protected args!: Interfaces.InferredArgs<T['args']>
  private loaded?: LoadedConfig
  private database?: Database

  public override async init(): Promise<void> {
    await super.init()
    const {args, flags} = await this.parse({
      flags: this.ctor.flags,
      baseFlags: (super.ctor as typeof BaseCommand).baseFlags,
      enableJsonFlag: this.ctor.enableJsonFlag,
      args: this.ctor.args,
      strict: this.ctor.strict,
    })
    this.flags = flags as BaseFlags<T>
    setWideTables(Boolean(this.flags.wide))
    this.args = args as Interfaces.InferredArgs<T['args']>
  }

  /**
   * Config keys (dotted snake_case) that this command's flags set; override to map flags,
   * e.g. `{root: this.flags.root}`. Undefined values are ignored.
   */
  protected configFlags(): Record<string, unknown> {
    return {}
  }

  /**
   * The flag behind each config key of {@link configFlags}, found by running it once over the
   * flag names instead of their values: a key whose value is a flag read as is gets that
   * flag's name (a key whose value is computed keeps the default naming).
   */
  protected configFlagNames(): Record<string, string> {
    const values = this.flags
    const mark = '\u0000flag:'
    this.flags = new Proxy({}, {get: (_target, name) => (typeof name === 'string' ? `${mark}${name}` : undefined)}) as BaseFlags<T>
    try {
      const names: Record<string, string> = {}
      for (const [key, value] of Object.entries(this.configFlags())) {
        if (typeof value === 'string' && value.startsWith(mark)) names[key] = value.slice(mark.length)
      }
      return names
    } catch {
      return {}
    } finally {
      this.flags = values
    }
  }

  /** The effective configuration (loaded once). @throws UsageError on a bad setting */
  protected get loadedConfig(): LoadedConfig {
    this.loaded ??= loadConfig({
      file: this.flags.config,
      flags: {database_url: this.flags['database-url'], data_dir: this.flags['data-dir'], ...(this.flags.quiet ? {log_level: 'error'} : {}), ...this.configFlags()},
      flagNames: {database_url: 'database-url', data_dir: 'data-dir', ...this.configFlagNames()},
    })
    for (const warning of this.loaded.warnings.splice(0)) process.stderr.write(`${warning}\n`)
    return this.loaded
  }

  protected get mbConfig(): MbConfig {
    return this.loadedConfig.config
  }

  /**
   * Opens the configured database once per command run; closed in `finally()`. A missing
   * embedded store is an error unless `options.create` (the commands that start a store).
   */
  protected async openDb(options: Partial<OpenOptions> = {}): Promise<Database> {
    if (!this.database) {
      const config = this.mbConfig
      this.debugStore()
      this.database = await openDatabase({url: config.database_url, dataDir: config.data_dir, socketGroup: config.socket_group, quiet: this.quiet, ...options})
    }
    return this.database
  }

  /**
   * Under `MB_DEBUG`: which config file the settings came from and which store they name
   * (`mb: config FILE|none, store BACKEND LOCATION` on stderr), before the store is opened, so
   * that a run against the wrong store, or one that fails to open, is explained.
   */
  protected debugStore(): void {
    if (!process.env.MB_DEBUG) return
    const store = describeStore({url: this.mbConfig.database_url, dataDir: this.mbConfig.data_dir})
    process.stderr.write(`mb: config ${configFileLabel(this.loadedConfig)}, store ${store.backend} ${store.location}\n`)
  }

  /** Prints human output unless `--json` or `--quiet` is set (oclif prints the returned value under `--json`). */
  protected print(text: string): void {
    if (!this.jsonEnabled()) this.log(text)
  }

  /** True under `--quiet`: print errors only. */
  protected get quiet(): boolean {
    return Boolean(this.flags?.quiet)
  }

  /** Human stdout lines; nothing under `--quiet`. */
  public override log(message = '', ...args: unknown[]): void {
    if (!this.quiet) super.log(message, ...args)
  }

  /** Warnings on stderr; nothing under `--quiet`. */
  public override warn(input: string | Error): string | Error {
    if (!this.quiet) super.warn(input)
    return input
  }

  public override async finally(error: Error | undefined): Promise<unknown> {
    if (this.database) {
      const database = this.database
      this.database = undefined
      await database.close().catch(() => {})
    }
    return super.finally(error)
  }

  /** Keeps exit code 2 for usage errors even under `--json`, and prints MbErrors plainly. */
  protected override async catch(error: Error & {exitCode?: number; oclif?: {exit?: number}}): Promise<unknown> {
    const exitCode = error instanceof MbError ? error.exitCode : (error.oclif?.exit ?? error.exitCode ?? 1)
    const code: ErrorCode = error instanceof MbError ? error.code : exitCode === 2 ? 'USAGE' : 'FAILED'
    const unknown = (error as {flags?: unknown}).flags
    const message =
      Array.isArray(unknown) && /^Nonexistent flag/.test(error.message)
        ? unknownFlagMessage(unknown.map(String), {...(this.ctor as typeof BaseCommand).baseFlags, ...this.ctor.flags})
        : flagParseMessage(errorMessage(error))
    if (this.jsonEnabled()) {
      this.logJson({error: {code, message, hint: ERRORS[code].hint}})
    } else if (error instanceof MbError || exitCode === 2) {
      process.stderr.write(`Error: ${message}\n`)
    } else {
      process.stderr.write(`Error: ${message}\n`)
      if (process.env.MB_DEBUG) process.stderr.write(`${error.stack}\n`)
    }
    throw new Errors.ExitError(exitCode)
  }
}

/**
 * oclif reports a flag value its parser refused as `Parsing --min-size \n\tExpected an
 * integer but received: abc\nSee more help with --help`, whose first line says nothing of
 * what was wrong. This puts it on one line: `Invalid value for --min-size: expected an
 * integer but received "abc". See --help.` Other messages are returned unchanged.
 */
function flagParseMessage(message: string): string {
  const parsed = /^Parsing (--[\w-]+) ?\n\t([\s\S]*?)(?:\nSee more help with --help)?$/.exec(message)
  if (!parsed) return message
  const [, flag, detail] = parsed
  const received = /^(.*?) but received: ([\s\S]*)$/.exec(detail.trim())
  const what = received ? `${received[1]} but received ${JSON.stringify(received[2])}` : detail.trim().replace(/\.$/, '')
  return `Invalid value for ${flag}: ${what.charAt(0).toLowerCase()}${what.slice(1)}. See --help.`
}

/**
 * oclif's `Nonexistent flag: --explain` with a suggestion: the flag whose name is closest
 * (src/lib/suggest.ts), or else the one whose description uses the mistyped word (`--explain`:
 * `--client-ip`, "explain the mirror choice for this client address"), e.g.
 * `Unknown flag --explain: did you mean --client-ip? See --help.`
 */
function unknownFlagMessage(typed: string[], known: Record<string, {description?: string; hidden?: boolean}>): string {
  const names = [
    ...Object.entries(known)
      .filter(([, flag]) => !flag.hidden)
      .map(([name]) => name),
    'json',
  ]
  const parts = typed.map((flag) => {
    const word = flag.replace(/^-+/, '').replace(/=.*$/s, '')
    const byName = closest(word, names)
    const byDescription =
      byName ??
      (word.length >= 4
        ? names.find((name) =>
            (known[name]?.description ?? '')
              .toLowerCase()
              .split(/[^a-z0-9]+/)
              .includes(word.toLowerCase()),
          )
        : undefined)
    return byDescription ? `${flag}: did you mean --${byDescription}?` : flag
  })
  const list = parts.join('; ')
  return `Unknown flag${typed.length === 1 ? '' : 's'} ${list}${list.endsWith('?') ? '' : '.'} See --help.`
}
