/**
 * Nagios/Icinga plugin output for a probe round (Nagios Plugin Development Guidelines:
 * one status line `SERVICE STATE - text | perfdata`, exit 0 OK, 1 WARNING, 2 CRITICAL,
 * 3 UNKNOWN; perfdata `label=value;warn;crit;min;max`).
 */

export const NAGIOS_EXIT = {OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3} as const
export type NagiosState = keyof typeof NAGIOS_EXIT

/** The plugin verdict: state, exit code and the one output line. */
export interface NagiosResult {
  state: NagiosState
  code: number
  line: string
}

/** Sync lags to judge with a round (`sync.trace_path`): seconds behind the origin per up mirror whose trace was read, and the thresholds in seconds. */
export interface NagiosLags {
  lags: Array<{name: string; seconds: number}>
  warning: number
  critical: number
}

const RANK: Record<NagiosState, number> = {OK: 0, WARNING: 1, CRITICAL: 2, UNKNOWN: 3}

function nameList(label: string, names: string[]): string {
  return names.length > 0 ? ` (${label}: ${names.slice(0, 10).join(', ')}${names.length > 10 ? ', ...' : ''})` : ''
}

/**
 * Judges a round by the share of probed mirrors that are down: CRITICAL when it is at least
 * `critical` percent, WARNING when at least `warning` percent (and above zero), else OK;
 * UNKNOWN when no mirror could be probed. With `sync`, a mirror at least `sync.critical`
 * seconds behind the origin makes it CRITICAL, one at least `sync.warning` behind WARNING
 * (the worse of the two verdicts wins), and the perfdata gains `max_lag` in seconds.
 *
 * @param counts   mirrors up and down after the round, and the identifiers of the down ones
 * @param warning  percent (0-100)
 * @param critical percent (0-100)
 */
export function nagiosVerdict(counts: {up: number; down: number; downNames?: string[]}, warning: number, critical: number, sync?: NagiosLags): NagiosResult {
  const total = counts.up + counts.down
  if (total === 0) return nagiosUnknown('no mirror could be probed')
  const share = (counts.down / total) * 100
  let state: NagiosState = counts.down > 0 && share >= critical ? 'CRITICAL' : counts.down > 0 && share >= warning ? 'WARNING' : 'OK'
  let lagText = ''
  let lagData = ''
  if (sync) {
    const behind = sync.lags.filter((l) => l.seconds >= sync.warning).sort((a, b) => b.seconds - a.seconds)
    const lagState: NagiosState = behind.some((l) => l.seconds >= sync.critical) ? 'CRITICAL' : behind.length > 0 ? 'WARNING' : 'OK'
    if (RANK[lagState] > RANK[state]) state = lagState
    lagText = nameList(
      'behind',
      behind.map((l) => `${l.name} ${l.seconds}s`),
    )
    const max = sync.lags.reduce((m, l) => Math.max(m, l.seconds), 0)
    lagData = ` max_lag=${max}s;${sync.warning};${sync.critical};0;`
  }
  const line = `MB PROBE ${state} - ${counts.up}/${total} mirrors up${nameList('down', counts.downNames ?? [])}${lagText} | up=${counts.up};;;0;${total} down=${counts.down};;;0;${total}${lagData}`
  return {state, code: NAGIOS_EXIT[state], line}
}

/** An UNKNOWN verdict with a reason (nothing to probe, database unreachable, bad flags). */
export function nagiosUnknown(reason: string): NagiosResult {
  return {state: 'UNKNOWN', code: NAGIOS_EXIT.UNKNOWN, line: `MB PROBE UNKNOWN - ${reason.replaceAll('|', '/').replaceAll('\n', ' ')}`}
}
