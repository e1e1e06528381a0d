import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {renderTable} from '../../lib/output.js'
import {probeFile, type FileProbeResult} from '../../lib/probe/file.js'

export default class ProbeFile extends BaseCommand<typeof ProbeFile> {
  static override description = `Ask every mirror that claims a file whether it serves it, and at which size

The claiming mirrors are those in the file's mirror set (held at the last scan) plus those with a stale record. Each gets one GET with Range: bytes=0-0; the size comes from Content-Range (or Content-Length). Verdicts: ok (origin's size), stale (another size), missing (404/410), unknown_size, error (see the reason).

With --hash, each copy of the origin's size is then fetched whole and hashed with the strongest digest the index holds of the file's current version (SHA-256, SHA-1 or MD5; run mb index --hashes first): corrupt when its bytes differ. The whole read must finish within probe.timeout seconds (--timeout); redirects are followed within the mirror's own host only.`

  static override examples = [
    '<%= config.bin %> probe file distribution/15.6/iso/netinst.iso',
    '<%= config.bin %> probe file /repo/repodata/repomd.xml --protocol http',
    '<%= config.bin %> probe file pub/README --json',
    '<%= config.bin %> probe file distribution/15.6/iso/netinst.iso --hash --timeout 600',
  ]

  static override args = {
    path: Args.string({description: 'origin path of the file (relative to the origin root)', required: true}),
  }

  static override flags = {
    protocol: Flags.string({description: 'base URL to prefer when a mirror has both', options: ['https', 'http'], default: 'https'}),
    jobs: Flags.integer({char: 'j', description: 'mirrors asked in parallel (config probe.jobs, default 8)', min: 1, max: 256}),
    insecure: Flags.boolean({description: 'accept self-signed or invalid HTTPS certificates (config probe.insecure_tls)'}),
    hash: Flags.boolean({description: "also fetch each copy of the right size whole and compare its bytes with the index's hash"}),
    timeout: Flags.integer({description: 'seconds for each check, a --hash read included (config probe.timeout, default 15)', min: 1}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {'probe.jobs': this.flags.jobs, 'probe.insecure_tls': this.flags.insecure ? true : undefined, 'probe.timeout': this.flags.timeout}
  }

  public async run(): Promise<FileProbeResult> {
    const config = this.mbConfig.probe
    const database = await this.openDb()
    const result = await probeFile(database.db, config, this.args.path, {protocol: this.flags.protocol as 'http' | 'https', jobs: config.jobs, hash: this.flags.hash})
    const compared = result.hash_algorithm ? `; bytes compared by ${result.hash_algorithm}` : ''
    const header = `${result.path}: ${result.size} bytes at the origin; ${result.mirrors.length} mirror(s) claim it${compared}`
    const table = renderTable(result.mirrors, [
      {header: 'mirror', get: (r) => r.mirror},
      {header: 'verdict', get: (r) => r.verdict},
      {header: 'http', get: (r) => r.http_status},
      {header: 'size', get: (r) => r.size},
      {header: 'claim', get: (r) => (r.claim === 'stale_record' ? `stale (${r.scanned_size})` : 'held')},
      {header: 'reason', get: (r) => r.reason},
      {header: 'ms', get: (r) => r.latency_ms},
      {header: 'url', get: (r) => r.url},
    ])
    const counts = Object.entries(result.counts)
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${n} ${k}`)
      .join(', ')
    this.print(result.mirrors.length === 0 ? `${header}.` : `${header}\n${table}\n${counts}`)
    return result
  }
}
