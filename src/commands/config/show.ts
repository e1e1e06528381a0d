import {BaseCommand} from '../../base-command.js'
import {redact} from '../../lib/redact.js'
import {renderTable} from '../../lib/output.js'

export default class ConfigShow extends BaseCommand<typeof ConfigShow> {
  static override description = `Print the effective settings and where each came from (default, file, env, flag)

The first line names the config file read: --config, else MB_CONFIG, else
$XDG_CONFIG_HOME/mb/mb.yaml (~/.config/mb/mb.yaml), else /etc/mb/mb.yaml, the first that
exists; "none, defaults" when there is none (or with --config none / MB_CONFIG=none, which
read no file). contrib/mb.yaml lists every setting.`
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
        {header: 'value', get: (s) => (typeof s.value === 'object' && s.value !== null && !Array.isArray(s.value) ? JSON.stringify(s.value) : s.value)},
        {header: 'source', get: (s) => s.source},
      ]),
    )
    return {file: file ?? null, settings}
  }
}
