import {Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {listMirrors} from '../../lib/mirrors/registry.js'
import type {MirrorRow} from '../../lib/db/schema.js'

/** One line of mirmon's mirror list: country code (lower case, `--` when unknown), URL, admin e-mail (may be absent). */
interface MirmonEntry {
  country: string
  url: string
  email: string | null
}

/** URL columns exported, in this order for each mirror. */
const URL_COLUMNS = ['http_url', 'https_url', 'ftp_url', 'rsync_url'] as const

/**
 * The mirmon entries of `rows`: one per public URL (HTTP, HTTPS, FTP, rsync) of each mirror.
 * A URL with credentials (user info) is a scan URL, not a public one, and is left out;
 * so is the HTTP(S) URL of a mirror behind signed URLs (`--sign`), which refuses unsigned requests;
 * rsync `host::module/path` URLs are written as `rsync://host/module/path`, the form mirmon
 * takes. Mirmon's list is `cc url [email]`, one mirror URL a line.
 */
function mirmonEntries(rows: MirrorRow[]): MirmonEntry[] {
  const entries: MirmonEntry[] = []
  for (const row of rows) {
    for (const column of URL_COLUMNS) {
      let url = row[column]
      if (!url) continue
      const daemon = /^([^/:@\s]+)::(.*)$/.exec(url)
      if (daemon) url = `rsync://${daemon[1]}/${daemon[2]}`
      if (/^[a-z][a-z0-9+.-]*:\/\/[^/]*@/i.test(url)) continue
      // A mirror behind signed URLs refuses mirmon's unsigned HTTP(S) requests: it would show as down.
      if (row.sign_scheme !== null && (column === 'http_url' || column === 'https_url')) continue
      entries.push({
        country: row.country ? row.country.toLowerCase() : '--',
        url: url.endsWith('/') ? url : `${url}/`,
        email: row.admin_email && /^\S+$/.test(row.admin_email) ? row.admin_email : null,
      })
    }
  }
  return entries
}

export default class MirrorExport extends BaseCommand<typeof MirrorExport> {
  static override description = `Export the mirror list for other tools; --format mirmon writes the list that mirmon (the mirror monitor) reads

One line per public URL of each enabled mirror: \`cc url email\`, the country code in lower case (\`--\` when unknown) and the admin's e-mail address when set (mirmon's \`list\` file, as MirrorBrain's \`mb export --format mirmon\` writes it). HTTP, HTTPS, FTP and rsync URLs are exported; a URL holding credentials (a private scan URL) is left out, and so are the HTTP and HTTPS URLs of a mirror behind signed URLs (--sign), which refuse mirmon's unsigned requests. --disabled adds the disabled mirrors. With --json: an array of {country, url, email}.`
  static override examples = ['<%= config.bin %> mirror export --format mirmon > /etc/mirmon/mirror.list', '<%= config.bin %> mirror export --format mirmon --json']

  static override flags = {
    format: Flags.string({description: 'output format', options: ['mirmon'], default: 'mirmon'}),
    disabled: Flags.boolean({description: 'also export the disabled mirrors'}),
  }

  public async run(): Promise<MirmonEntry[]> {
    const database = await this.openDb()
    const rows = await listMirrors(database.db, this.flags.disabled ? {} : {enabled: true})
    const entries = mirmonEntries(rows)
    // The list itself is the output: printed even under --quiet (as other documents asked for are).
    if (!this.jsonEnabled()) process.stdout.write(entries.map((e) => (e.email ? `${e.country} ${e.url} ${e.email}\n` : `${e.country} ${e.url}\n`)).join(''))
    return entries
  }
}
