import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../base-command.js'
import {documentJson, type DocumentJson} from '../lib/metalink/document.js'
import {type OfflineFormat, offlineMetalink} from '../lib/metalink/offline.js'

export default class Metalink extends BaseCommand<typeof Metalink> {
  static override description = `Print the metalink, .torrent, magnet link or .zsync that \`mb serve\` would send for a file

Builds the Metalink 4 (RFC 5854, default) or Metalink 3.0 document of an indexed file for a client address: its size, fresh hashes and piece hashes, and the mirrors in the order the selection engine ranks them for that client (at most --max-urls, by default select.metalink_max_mirrors: 100), the origin last. --format torrent writes the BitTorrent metainfo file (web seeds: those mirrors, then the origin), magnet the magnet link, zsync the zsync control file (URL lines: those mirrors); they need the data of \`mb index --hashes\` (and zsync.min_size for zsync). With --json, the document model (sources, hashes) is printed instead.`

  static override examples = [
    '<%= config.bin %> metalink distribution/15.6/iso/openSUSE-15.6-DVD-x86_64.iso',
    '<%= config.bin %> metalink pub/file.iso --client-ip 81.2.69.142 --base-url https://download.example.org/',
    '<%= config.bin %> metalink pub/file.iso --format metalink > file.iso.metalink',
    '<%= config.bin %> metalink pub/file.iso --format torrent --base-url https://download.example.org/ > file.iso.torrent',
    '<%= config.bin %> metalink pub/file.iso --format zsync > file.iso.zsync',
  ]

  static override args = {
    path: Args.string({description: 'origin-relative path of an indexed file', required: true}),
  }

  static override flags = {
    'client-ip': Flags.string({description: 'select mirrors as for this client address (default 127.0.0.1)'}),
    format: Flags.string({description: 'document format', options: ['meta4', 'metalink', 'torrent', 'magnet', 'zsync'], default: 'meta4'}),
    'base-url': Flags.string({description: "this server's public URL (default: serve.public_url, else http:// + serve.listen)"}),
    'max-urls': Flags.integer({description: 'mirror URLs to list (default: the select.metalink_max_mirrors setting, 100)', min: 0, max: 1000}),
    root: Flags.string({description: 'origin tree, to check that hashes still match the file on disk (env: MB_ROOT)'}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {root: this.flags.root}
  }

  public async run(): Promise<DocumentJson> {
    const database = await this.openDb()
    const {doc, text} = await offlineMetalink(database, this.mbConfig, {
      path: this.args.path,
      clientIp: this.flags['client-ip'],
      baseUrl: this.flags['base-url'],
      format: this.flags.format as OfflineFormat,
      maxUrls: this.flags['max-urls'],
    })
    if (!this.jsonEnabled()) process.stdout.write(text)
    return documentJson(doc)
  }
}
