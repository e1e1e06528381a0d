import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderRecord} from '../../lib/output.js'
import {addRule} from '../../lib/rules/registry.js'
import {ruleEntries} from '../../lib/rules/render.js'
import type {RuleRecord} from '../../lib/rules/rule.js'
import type {RuleInput} from '../../lib/rules/validate.js'

/** The rule field flags shared by `mb rule add` and `mb rule edit` (on edit, '' clears a list). */
export const ruleFieldFlags = {
  path: Flags.string({description: 'glob of origin paths (picomatch; quote it), e.g. "store/**" or "**" for all; without a "/" it matches basenames anywhere', helpGroup: 'MATCH'}),
  country: Flags.string({description: 'only clients of these countries (comma list of ISO 3166-1 alpha-2 codes)', helpGroup: 'MATCH'}),
  'not-country': Flags.string({description: 'only clients not of these countries (an unknown country is not one of them), e.g. US,CA', helpGroup: 'MATCH'}),
  continent: Flags.string({description: 'only clients of these continents (comma list of AF AN AS EU NA OC SA)', helpGroup: 'MATCH'}),
  client: Flags.string({description: 'only clients inside these CIDRs (comma list)', helpGroup: 'MATCH'}),
  asn: Flags.string({description: 'only clients of these AS numbers (comma list)', helpGroup: 'MATCH'}),
  to: Flags.string({description: 'target: redirect to this http(s) URL', helpGroup: 'TARGET', exclusive: ['mirrors', 'origin']}),
  'append-path': Flags.boolean({description: "with --to: append the path below the glob's literal directory to the URL", allowNo: true, helpGroup: 'TARGET'}),
  mirrors: Flags.string({description: 'target: select only among these mirrors (comma list of names)', helpGroup: 'TARGET', exclusive: ['to', 'origin']}),
  origin: Flags.boolean({description: 'target: deliver from the origin', helpGroup: 'TARGET', exclusive: ['to', 'mirrors']}),
  status: Flags.string({description: 'status of a --to redirect: 301, 302 (default) or 307', helpGroup: 'TARGET'}),
  priority: Flags.string({description: 'order: rules are tried by ascending priority, then name (default for add: after the last rule)'}),
  comment: Flags.string({description: 'free text'}),
}

type FieldFlags = {[K in keyof typeof ruleFieldFlags]?: unknown}

/** Maps parsed rule flags to registry input (flags not given stay undefined). */
export function ruleInputFromFlags(flags: FieldFlags): RuleInput {
  // biome-ignore lint/suspicious/noExplicitAny: oclif has parsed each flag to its RuleInput field's type; FieldFlags only names the keys
  const f = flags as Record<string, any>
  return {
    path: f.path,
    country: f.country,
    notCountry: f['not-country'],
    continent: f.continent,
    client: f.client,
    asn: f.asn,
    to: f.to,
    appendPath: f['append-path'],
    mirrors: f.mirrors,
    origin: f.origin,
    status: f.status,
    priority: f.priority,
    comment: f.comment,
  }
}

export default class RuleAdd extends BaseCommand<typeof RuleAdd> {
  static override description = `Add a redirect rule, tried before mirror selection

A request matches a rule when its path matches --path and the client meets every condition given (--country or --not-country, --continent, --client, --asn; none given: every client). The first matching rule in priority order decides: --to URL redirects there (with --status), --mirrors selects only among the named mirrors, --origin delivers the file locally. A running \`mb serve\` applies the change within seconds. Bad values are refused and nothing is written.`
  static override examples = [
    '<%= config.bin %> rule add intlstore --path "store/**" --not-country US,CA --to https://intlstore.example.org/ --append-path',
    '<%= config.bin %> rule add cn --path "**" --country CN --mirrors mirror.example.cn,mirror2.example.cn',
    '<%= config.bin %> rule add campus --path "iso/**" --client 10.0.0.0/8 --origin --priority 10',
  ]

  static override args = {
    name: Args.string({description: 'unique rule name: letters, digits, ".", "-" and "_", e.g. intlstore', required: true}),
  }

  static override flags = {
    ...ruleFieldFlags,
    disabled: Flags.boolean({description: 'add the rule disabled (`mb rule enable` turns it on)'}),
  }

  public async run(): Promise<RuleRecord> {
    const database = await this.openDb({create: true})
    const rule = await addRule(database.db, this.args.name, {...ruleInputFromFlags(this.flags), enabled: this.flags.disabled ? false : undefined})
    this.print(`Added rule ${rule.name}.\n${renderRecord(ruleEntries(rule))}`)
    return rule
  }
}
