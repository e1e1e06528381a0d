import {BaseCommand} from '../../base-command.js'
import {redact} from '../../lib/redact.js'
import {renderTable} from '../../lib/output.js'

/**
 * Settings whose empty value means something other than "none", as the table says it (the
 * schema's descriptions say so too); `--json` keeps the value itself.
 */
const EMPTY_MEANS: Record<string, string> = {geoip: '(empty: the bundled GeoLite2 City data)'}

/** A setting's value as the table shows it: objects as JSON, an empty value by its meaning. */
function shownValue(key: string, value: unknown): unknown {
  const empty = value === null || (Array.isArray(value) && value.length === 0)
  if (empty && EMPTY_MEANS[key] !== undefined) return EMPTY_MEANS[key]
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? JSON.stringify(value) : value
}

export default class ConfigShow extends BaseCommand<typeof ConfigShow> {
  static override description = `Print the effective settings and where each came from (default, file, env, flag)

The first line names the config file read: --config, else MB_CONFIG, else $XDG_CONFIG_HOME/mb/mb.yaml (~/.config/mb/mb.yaml), else /etc/mb/mb.yaml, the first that exists; "none, defaults" when there is none (or with --config none / MB_CONFIG=none, which read no file). contrib/mb.yaml lists every setting.`
  static override examples = ['<%= config.bin %> config show', '<%= config.bin %> config show --config /etc/mb/mb.yaml --json']

  public async run(): Promise<{file: string | null; settings: Array<{key: string; value: unknown; source: string}>}> {
    const {config, sources, file} = this.loadedConfig
    const settings = Object.keys(sources)
      .sort()
      .map((key) => {
        let value: unknown = key.split('.').reduce<unknown>((node, part) => (node as Record<string, unknown> | undefined)?.[part], config)
        if ((key === 'database_url' || key === 'database_read_url') && typeof value === 'string') value = redact(value)
        return {key, value: value ?? null, source: sources[key]}
      })
    this.print(`config file: ${file ?? 'none, defaults'}`)
    this.print(
      renderTable(settings, [
        {header: 'setting', get: (s) => s.key},
        {header: 'value', get: (s) => shownValue(s.key, s.value)},
        {header: 'source', get: (s) => s.source},
      ]),
    )
    return {file: file ?? null, settings}
  }
}
