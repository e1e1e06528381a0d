import {Args, Flags} from '@oclif/core'
import {BaseCommand} from '../../base-command.js'
import type {MirrorRow} from '../../lib/db/schema.js'
import {editMirror, resolveMirror, trustScan} from '../../lib/mirrors/registry.js'
import {type PublicMirror, publicMirror} from '../../lib/mirrors/public.js'
import {IDENTIFIER_RULE, validateMirrorInput} from '../../lib/mirrors/validate.js'
import {mirrorRecord} from '../../lib/mirrors/render.js'
import {renderRecord} from '../../lib/output.js'
import {type ScanMirrorResult, scanMirror, scanSettings} from '../../lib/scan/scan.js'
import {mirrorFieldFlags, mirrorInputFromFlags} from './add.js'

export default class MirrorEdit extends BaseCommand<typeof MirrorEdit> {
  static override description =
    "Change fields of a mirror; fields not given stay as they are. An empty value (--asn '') or --clear FIELD clears an optional field. " +
    'Repeatable flags (--prefix, --client-prefix, --include, --exclude) replace the whole list. Changing --base-path or patterns marks the mirror for rescan. ' +
    'Changing a base URL keeps the mirror out of selection ("URL changed, awaiting scan", reason url_changed) until its next successful scan; --rescan runs that scan right after the edit, as `mb scan NAME` would.'

  static override examples = [
    '<%= config.bin %> mirror edit ftp.example.de --score 200 --https-url https://ftp.example.de/pub/',
    {description: 'Move a mirror to Austria, naming it by an unambiguous prefix (the continent follows the country)', command: '<%= config.bin %> mirror edit ftp.ex --country AT'},
    "<%= config.bin %> mirror edit ftp.example.de --asn '' --clear prefix --clear lat",
    '<%= config.bin %> mirror edit ftp.example.de --no-country-only --region-only --disabled',
    '<%= config.bin %> mirror edit old.example.org --rename new.example.org --json',
    {description: 'Keep clients away from a mirror until its maintenance ends (none ends it early)', command: '<%= config.bin %> mirror edit ftp.example.de --maintenance-until 2026-12-01T18:00:00Z'},
    {description: 'Use a suspect mirror (its last scan was refused) again, with the files of its last good scan', command: '<%= config.bin %> mirror edit ftp.example.de --trust-scan'},
    {
      description: 'Move a mirror to a new URL and scan it there at once, so that it takes clients again',
      command: '<%= config.bin %> mirror edit ftp.example.de --http-url https://new.example.de/pub/ --rescan',
    },
  ]

  static override args = {
    name: Args.string({description: 'mirror name, or an unambiguous prefix of it', required: true}),
  }

  static override flags = {
    ...mirrorFieldFlags,
    enabled: Flags.boolean({description: 'enable the mirror', exclusive: ['disabled']}),
    disabled: Flags.boolean({description: 'disable the mirror', exclusive: ['enabled']}),
    rename: Flags.string({description: `give the mirror a new unique name (${IDENTIFIER_RULE})`}),
    force: Flags.boolean({
      description: 'store a --prefix shorter than /16 (IPv4) or /32 (IPv6), or in a reserved range (private, loopback, link-local, ...): every client of such a range goes to this mirror first',
    }),
    'trust-scan': Flags.boolean({
      description:
        'use a suspect mirror again: its last scan was refused by the safety check (far fewer files than before), which keeps it out of selection; with this the files of its last good scan count again until the next scan',
    }),
    rescan: Flags.boolean({description: 'scan the mirror right after the edit (as `mb scan NAME`; the scan: settings apply): a changed URL is back in selection as soon as the scan succeeds'}),
    clear: Flags.string({description: 'clear an optional field (e.g. asn, prefix, lat, https-url, comment); repeatable', multiple: true}),
  }

  public async run(): Promise<PublicMirror & {scan?: ScanMirrorResult}> {
    const enabled = this.flags.enabled ? true : this.flags.disabled ? false : undefined
    const input = {...mirrorInputFromFlags(this.flags), identifier: this.flags.rename, enabled}
    // A bad value is refused before the store is opened (editMirror checks it again).
    validateMirrorInput(input)
    const database = await this.openDb()
    const clear = this.flags.clear ?? []
    const trust = this.flags['trust-scan'] === true
    const changed: string[] = []
    let row: MirrorRow | undefined
    // Fields first: their validation fails before anything is written.
    const rescan = this.flags.rescan === true
    if ((!trust && !rescan) || clear.length > 0 || Object.values(input).some((v) => v !== undefined)) {
      const edited = await editMirror(database.db, this.args.name, input, clear, {force: this.flags.force})
      row = edited.mirror
      changed.push(...edited.changed)
    }
    if (trust) {
      const trusted = await trustScan(database.db, row?.identifier ?? this.args.name)
      row = trusted.mirror
      if (trusted.changed) changed.push('scan_refused_at (trusted)')
    }
    if (rescan) return this.rescan(row?.identifier ?? this.args.name, changed)
    const mirror = publicMirror(row!)
    this.print(`${summary(mirror, changed)}\n${renderRecord(mirrorRecord(mirror))}`)
    return mirror
  }

  /** `--rescan`: scans the (edited) mirror as `mb scan NAME` does; a failed scan fails the command (exit 1), the edit stays. */
  private async rescan(name: string, changed: string[]): Promise<PublicMirror & {scan: ScanMirrorResult}> {
    const database = await this.openDb()
    const scan = await scanMirror(database, await resolveMirror(database.db, name), {...scanSettings(this.mbConfig.scan)})
    const mirror = publicMirror(await resolveMirror(database.db, name))
    const line = scan.ok
      ? `Scanned ${scan.mirror}: ok via ${scan.protocol}, ${scan.files} files, ${scan.matched} matched, ${scan.stale} stale, ${scan.missing} missing, ${scan.seconds} s.`
      : `Scan of ${scan.mirror} FAILED after ${scan.seconds} s: ${scan.error}. The mirror stays out of selection until a scan succeeds (\`mb scan ${scan.mirror}\`).`
    this.print(`${summary(mirror, changed)}\n${line}\n${renderRecord(mirrorRecord(mirror))}`)
    if (!scan.ok) process.exitCode = 1
    return {...mirror, scan}
  }
}

/** The edit's one-line outcome. */
function summary(mirror: PublicMirror, changed: readonly string[]): string {
  return changed.length === 0 ? `Mirror ${mirror.identifier} unchanged (the values given are already set).` : `Updated mirror ${mirror.identifier}: ${changed.join(', ')}.`
}
