import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import {MbError} from '../../lib/errors.js'
import {type IpLookup, lookupIp, type PrefixMatch} from '../../lib/lookup/ip.js'
import {renderRecord} from '../../lib/output.js'

export default class GeoipLookup extends BaseCommand<typeof GeoipLookup> {
  static override description = `Show what selection knows of a client address: country, continent, coordinates, AS, client network, and the mirrors that match it

As MirrorBrain's iplookup. The location comes from the GeoIP database (the geoip setting; default the bundled GeoLite2 City data) and the AS number from the asn_db setting when one is configured. The network is the client's /24 (IPv4) or /48 (IPv6) by default (select.client_prefix_v4/_v6), which keys its sticky mirror choice. Mirrors listed: those whose --prefix networks hold the address (its prefix pool), those in its AS (its AS pool), and those whose --client-prefix admits it. Without a database (no embedded store yet) the mirrors are left out.`

  static override examples = [
    '<%= config.bin %> geoip lookup 81.2.69.142',
    '<%= config.bin %> geoip lookup 2001:218::1 --json',
    '<%= config.bin %> geoip lookup 1.0.0.1 --asn-db /var/lib/GeoIP/GeoLite2-ASN.mmdb',
  ]

  static override args = {
    ip: Args.string({description: 'an IPv4 or IPv6 address', required: true}),
  }

  static override flags = {
    geoip: Flags.string({description: 'GeoIP City/Country .mmdb file (env: MB_GEOIP; default: bundled)', multiple: true}),
    'asn-db': Flags.string({description: 'GeoLite2-ASN .mmdb file (env: MB_ASN_DB)'}),
  }

  protected override configFlags(): Record<string, unknown> {
    return {geoip: this.flags.geoip, asn_db: this.flags['asn-db']}
  }

  public async run(): Promise<IpLookup> {
    const result = await lookupIp(await this.registry(), this.mbConfig, this.args.ip)
    this.print(render(result))
    return result
  }

  /** The mirror registry, or undefined when there is no embedded store yet (nothing to match). */
  private async registry() {
    try {
      return (await this.openDb()).db
    } catch (error) {
      if (error instanceof MbError && error.code === 'STORE_NOT_FOUND') return undefined
      throw error
    }
  }
}

/** `name (cidr), …`, or `none`. */
function matches(list: PrefixMatch[]): string {
  return list.length === 0 ? 'none' : list.map((m) => `${m.mirror} (${m.prefix})`).join(', ')
}

function render(r: IpLookup): string {
  const record: Array<[string, unknown]> = [
    ['address', `${r.ip} (IPv${r.family})`],
    ['country', r.country ?? 'unknown'],
    ['continent', r.continent ?? 'unknown'],
    ['coordinates', r.latitude === null || r.longitude === null ? 'unknown' : `${r.latitude},${r.longitude}`],
    ['asn', r.asn === null ? 'unknown' : `AS${r.asn}`],
    ['network', `${r.network} (client network for sticky choice)`],
  ]
  if (r.mirrors) {
    record.push(['prefix mirrors', matches(r.mirrors.prefix)])
    record.push(['as mirrors', r.asn === null ? 'AS unknown' : r.mirrors.as.length === 0 ? 'none' : r.mirrors.as.join(', ')])
    record.push(['client-prefix', matches(r.mirrors.clientPrefix)])
  } else {
    record.push(['mirrors', 'no database yet'])
  }
  record.push(['geoip', r.geoip])
  return renderRecord(record)
}
